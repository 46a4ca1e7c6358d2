"""NLI on the shared SNLI copy: loading (label -1 dropped), premise/hypothesis
segments, the pair model's surface, and the pipeline with per-segment metrics."""

import json

import pytest
import torch

from faithbench.benchmark.core.models.pair_classifier import (
    PairAttentionClassifier,
    PairConfig,
    split_segment,
)
from faithbench.benchmark.core.records import read_results
from faithbench.benchmark.core.vocab import collate
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import run
from faithbench.tasks.classification import TaskOptions
from faithbench.tasks.nli import read, tokenize


def test_tokenize():
    assert tokenize("A man's hat, 2 dogs.") == ("a", "man", "'", "s", "hat", ",", "2", "dogs", ".")


def test_snli_loads_and_drops_unlabelled(shared_data):
    splits = read(TaskOptions(data_dir=str(shared_data)))
    assert {k: len(v) for k, v in splits.items()} == {"train": 8160, "validation": 9842,
                                                      "test": 9824}
    first = json.loads((shared_data / "snli" / "validation.jsonl").read_text().splitlines()[0])
    ex = splits["validation"][0]
    p, h = tokenize(first["premise"]), tokenize(first["hypothesis"])
    assert ex.tokens == p + h and ex.segments == (0,) * len(p) + (1,) * len(h)
    assert ex.label == first["label"] and ex.id == "validation-0"


def test_esnli_variant_carries_explanations(shared_data):
    splits = read(TaskOptions(data_dir=str(shared_data), variant="esnli"))
    assert len(splits["validation"]) == 9842 and len(splits["train"]) == 8160
    ex = splits["validation"][0]
    assert ex.extras["explanation_1"] == "the to go packages may not be from lunch ."
    assert ex.id == json.loads((shared_data / "esnli" / "validation.jsonl")
                               .read_text().splitlines()[0])["pairID"]


def test_split_segment_left_aligns_each_sentence():
    batch = collate([[5, 6, 7, 8, 9], [10, 11, 12]], ["a", "b"], segments=[[0, 0, 0, 1, 1], [0, 1, 1]])
    embeds = batch.ids.float().unsqueeze(-1)
    hyp, mask, pos = split_segment(embeds, batch, 1)
    assert hyp.squeeze(-1).tolist() == [[8.0, 9.0], [11.0, 12.0]]
    assert pos.tolist() == [[3, 4], [1, 2]] and mask.all()
    prem, mask, _ = split_segment(embeds, batch, 0)
    assert prem.squeeze(-1).tolist() == [[5.0, 6.0, 7.0], [10.0, 0.0, 0.0]]
    assert mask.tolist() == [[True, True, True], [True, False, False]]


def test_pair_model_attention_covers_both_sentences():
    torch.manual_seed(0)
    model = PairAttentionClassifier(PairConfig(vocab_size=20, num_classes=3, embed_dim=8,
                                               hidden=8, attn_dim=8, mlp_dim=8)).eval()
    batch = collate([[5, 6, 7, 8, 9], [10, 11, 12]], ["a", "b"], segments=[[0, 0, 0, 1, 1], [0, 1, 1]])
    att = model.attention(batch)
    seg = batch.segments
    for s in (0, 1):  # each sentence's weights sum to 1/2
        assert torch.allclose((att * (seg == s) * batch.mask).sum(1), torch.tensor([0.5, 0.5]))
    alone = model.logits(batch.select([1]).replace(ids=batch.ids[1:, :3], mask=batch.mask[1:, :3],
                                                   segments=seg[1:, :3]))
    assert torch.allclose(alone, model.logits(batch)[1:], atol=1e-6)


def served_by_a_bilstm() -> list[str]:
    """The reference explainers an NLI BiLSTM serves: a run's default set (counted from
    the registry, which grows)."""
    from faithbench import submissions
    from faithbench.benchmark.core.api import capabilities
    have = capabilities(PairAttentionClassifier(PairConfig(vocab_size=5, num_classes=3)))
    return [n for n in submissions.REFERENCE
            if submissions.get_explainer(n).spec.requires <= have]


def test_pipeline_with_per_segment_metrics(shared_data, tmp_path):
    config = RunConfig(tasks=("nli",), data_dir=str(shared_data), train_limit=800, epochs=1,
                       limit=12, batch_size=6, progress=False, out=str(tmp_path),
                       metrics=("comprehensiveness", "comprehensiveness[segment=0]",
                                "comprehensiveness[segment=1]", "segment_share"))
    summary = run(config)
    assert summary.exit_code == 0
    records = read_results(tmp_path / "results.jsonl")
    served = {r.explainer for r in records}  # every reference explainer a BiLSTM serves
    assert len(served) == len(served_by_a_bilstm()) and len(records) == len(served) * 4
    ids = {r.metric for r in records}
    assert "comprehensiveness[bins=0.01,0.05,0.1,0.2,0.5;eraser=delete;rounding=ceil;segment=1]@2" in ids
    # segment_share recomputed by hand from the cached explanations and the segments
    import math

    from faithbench.benchmark.core.records import read_jsonl
    from faithbench.tasks.nli import TASK

    ready = TASK.prepare(TaskOptions(data_dir=str(shared_data), train_limit=800, epochs=1),
                         progress=False)
    segments = {e.id: e.segments for e in ready.examples("test", limit=12)}
    shares = [r for r in records if r.metric.startswith("segment_share")]
    assert len(shares) == len(served)
    for r in shares:
        name = r.explainer.split("[")[0].split("@")[0]
        [path] = (tmp_path / "explanations").glob(f"nli-{name}-*.jsonl")
        got = {row["id"]: row["value"] for row in read_jsonl(tmp_path / r.per_example_file)}
        for row in read_jsonl(path):
            n, seg = len(row["scores"]), segments[row["id"]]
            order = sorted(range(n), key=lambda i: (-row["scores"][i], i))
            ks = [min(max(math.ceil(b * n - 1e-9), 1), n) for b in (0.01, 0.05, 0.1, 0.2, 0.5)]
            want = sum(sum(seg[i] == 0 for i in order[:k]) / k for k in ks) / len(ks)
            assert got[row["id"]] == pytest.approx(want, abs=1e-9)


def test_esnli_csv_highlights_become_the_reference(tmp_path):
    """The e-SNLI CSV release path, on the hand-written sample (tests/fixtures/esnli)."""
    import shutil
    from pathlib import Path

    sample = Path(__file__).parent / "fixtures" / "esnli" / "esnli_dev_sample.csv"
    (tmp_path / "esnli").mkdir()
    for name in ("esnli_dev.csv", "esnli_test.csv"):
        shutil.copy(sample, tmp_path / "esnli" / name)
    (tmp_path / "snli").mkdir()
    row = json.dumps({"premise": "A dog runs.", "hypothesis": "An animal moves.", "label": 0})
    for split in ("train", "validation", "test"):
        (tmp_path / "snli" / f"{split}.jsonl").write_text(row + "\n")
    splits = read(TaskOptions(data_dir=str(tmp_path), variant="esnli"))
    first = splits["validation"][0]
    assert first.id == "4705552913.jpg#2r1n" and first.label == 1
    # premise: no highlight; hypothesis "... after just *eating* *lunch.*"
    assert first.reference == (False,) * 10 + (False,) * 12 + (True, True, True)
    assert first.extras["explanation_1"] == "The to go packages may not be from lunch."
    second = splits["validation"][1]  # "Two *women* are embracing while *holding* to go *packages.*"
    assert second.reference[:10] == (False, True, False, False, False, True, False, False,
                                     True, True)


def test_explain_score_predict_on_pairs(shared_data, tmp_path, capsys):
    """The file verbs carry segment ids for pairs (same cached slice model as above)."""
    from faithbench.benchmark.cli import main
    from faithbench.benchmark.core.records import read_jsonl

    common = ["--task", "nli", "--data-dir", str(shared_data), "--train-limit", "800",
              "--epochs", "1", "--no-progress"]
    exp = tmp_path / "occ.jsonl"
    assert main(["explain", *common, "--explainer", "occlusion", "--limit", "4",
                 "--out", str(exp)]) == 0
    rows = read_jsonl(exp)
    assert all(len(r["segments"]) == len(r["tokens"]) and r["segments"][0] == 0 for r in rows)
    assert main(["score", *common, "--explanations", str(exp), "--metrics",
                 "comprehensiveness[segment=1]"]) == 0
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "x", "tokens": rows[0]["tokens"],
                               "segments": rows[0]["segments"]}) + "\n")
    capsys.readouterr()
    assert main(["predict", *common, "--input", str(inp)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["label"] in ("entailment", "neutral", "contradiction") and len(out["probs"]) == 3
    inp.write_text(json.dumps({"id": "x", "tokens": ["a", "b"]}) + "\n")
    assert main(["predict", *common, "--input", str(inp)]) == 2
    assert "field 'segments'" in capsys.readouterr().err


def _snli(tmp_path, test_rows):
    (tmp_path / "snli").mkdir()
    good = json.dumps({"premise": "A dog runs.", "hypothesis": "An animal moves.", "label": 0})
    for split in ("train", "validation"):
        (tmp_path / "snli" / f"{split}.jsonl").write_text(good + "\n")
    (tmp_path / "snli" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in test_rows))
    return TaskOptions(data_dir=str(tmp_path))


@pytest.mark.parametrize("field", ["premise", "hypothesis"])
def test_an_empty_premise_or_hypothesis_is_refused_at_load(tmp_path, field):
    """Before: loaded, and an empty hypothesis made a row with no segment-1 token."""
    from faithbench.benchmark.core.errors import DataFileError

    good = {"premise": "A dog runs.", "hypothesis": "An animal moves.", "label": 0}
    with pytest.raises(DataFileError, match="empty text") as info:
        read(_snli(tmp_path, [good, good, {**good, field: " "}]))
    assert info.value.path.endswith("test.jsonl")
    assert (info.value.line, info.value.field) == (3, field)


def test_an_esnli_csv_that_is_not_utf8_names_line_and_offset(tmp_path):
    """The CSV release path: a Latin-1 byte on line 3 of esnli_dev.csv. Before: a raw
    UnicodeDecodeError traceback."""
    import shutil
    from pathlib import Path

    from faithbench.benchmark.core.errors import NotUtf8Error

    sample = Path(__file__).parent / "fixtures" / "esnli" / "esnli_dev_sample.csv"
    (tmp_path / "esnli").mkdir()
    shutil.copy(sample, tmp_path / "esnli" / "esnli_test.csv")
    lines = sample.read_bytes().splitlines(keepends=True)
    at = lines[2].index(b"a")
    lines[2] = lines[2][:at] + b"\xe9" + lines[2][at + 1 :]  # 'é' in Latin-1
    (tmp_path / "esnli" / "esnli_dev.csv").write_bytes(b"".join(lines))
    _snli(tmp_path, [{"premise": "A dog runs.", "hypothesis": "An animal moves.", "label": 0}])
    with pytest.raises(NotUtf8Error) as info:
        read(TaskOptions(data_dir=str(tmp_path), variant="esnli"))
    assert info.value.path.endswith("esnli_dev.csv")
    assert (info.value.line, info.value.offset) == (3, len(lines[0]) + len(lines[1]) + at)


def test_a_hub_copy_leaves_out_empty_pairs_keeping_their_ids(monkeypatch, caplog):
    import logging

    import datasets

    import faithbench.tasks.nli

    rows = datasets.Dataset.from_list([
        {"premise": "A dog runs.", "hypothesis": "An animal moves.", "label": 0},
        {"premise": "A dog runs.", "hypothesis": "", "label": 1},
        {"premise": "A cat sits.", "hypothesis": "A cat sleeps.", "label": 1}])
    monkeypatch.delenv("FAITHBENCH_DATA", raising=False)
    monkeypatch.setattr(faithbench.tasks.nli, "load_hub", lambda name, splits: dict.fromkeys(splits, rows))
    with caplog.at_level(logging.WARNING):
        splits = read(TaskOptions())
    assert [e.id for e in splits["test"]] == ["test-0", "test-2"]
    assert "stanfordnlp/snli test: left out 1 rows with an empty premise or hypothesis" in caplog.text
