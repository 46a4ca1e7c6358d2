"""The protocol a reviewer checks: the seed decides the weights, records name the
weights they came from, the scored split is held out, ``<unk>`` (the ``mask``
eraser's substitute) is a trained vector, flips are changes of the decision, and
lists on the command line split on commas too."""

from __future__ import annotations

import json
import math

import pytest
import torch

from faithbench.benchmark.cli import build_parser, main
from faithbench.benchmark.cli.options import config as _config
from faithbench.benchmark.core.cache import weights_hash
from faithbench.benchmark.core.records import read_jsonl
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.verbs import score_file
from faithbench.tasks.classification import TaskOptions
from faithbench.tasks.nli import SPEC as NLI
from faithbench.tasks.sentiment import SPEC as SENTIMENT
from faithbench.tasks.synthetic import TASK as SYNTHETIC

SMALL = {"train_limit": 300, "epochs": 2}


def fresh(seed, tmp_path, monkeypatch, **extra):
    """Train from scratch into an empty cache (so nothing is loaded)."""
    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / f"cache-{seed}-{len(list(tmp_path.iterdir()))}"))
    return SYNTHETIC.prepare(TaskOptions(seed=seed, **SMALL, **extra), progress=False)


def test_one_seed_gives_bit_identical_weights_and_another_seed_does_not(
        tmp_path, monkeypatch, one_thread):
    a, b, c = (fresh(s, tmp_path, monkeypatch) for s in (0, 0, 1))
    assert not (a.loaded_from_cache or b.loaded_from_cache or c.loaded_from_cache)
    for name, tensor in a.model.state_dict().items():
        assert torch.equal(tensor, b.model.state_dict()[name]), name
    assert a.checkpoint == b.checkpoint == weights_hash(a.model.state_dict())
    assert a.accuracy == b.accuracy
    assert c.checkpoint != a.checkpoint
    assert not torch.equal(a.model.embedding.weight, c.model.embedding.weight)
    # the cache key hashes inputs (data, configs, seed); the checkpoint id hashes weights
    assert a.cache_key == b.cache_key != c.cache_key and a.cache_key != a.checkpoint


def test_a_cached_model_is_named_by_its_weights(tmp_path, monkeypatch, one_thread):
    trained = fresh(0, tmp_path, monkeypatch)
    loaded = SYNTHETIC.prepare(TaskOptions(seed=0, **SMALL), progress=False)
    assert loaded.loaded_from_cache and loaded.checkpoint == trained.checkpoint


def test_word_dropout_trains_the_unknown_word_embedding(tmp_path, monkeypatch, one_thread):
    """Every synthetic training word is in the vocabulary (min_freq=1), so only word
    dropout ever feeds <unk> to the model: with it the vector moves, without it not."""
    from dataclasses import replace

    from faithbench.benchmark.core.models.training import seed_everything
    from faithbench.tasks.classification import ClassificationTask

    def unk_moved(task: ClassificationTask) -> float:
        ready = task.prepare(TaskOptions(seed=0, **SMALL), progress=False)
        seed_everything(0)  # the initial weights of the same build
        init = task.model_class(ready.model.config).embedding.weight[ready.model.mask_id]
        moved = ready.model.embedding.weight[ready.model.mask_id] - init
        return float(moved.detach().abs().max())

    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "with"))
    assert SYNTHETIC.train_config.word_dropout == 0.05
    assert unk_moved(SYNTHETIC) > 1e-3
    without = replace(SYNTHETIC, train_config=replace(SYNTHETIC.train_config, word_dropout=0.0))
    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "without"))
    assert unk_moved(without) == 0.0


def test_real_tasks_score_the_held_out_test_split():
    assert SENTIMENT.eval_split == "test" and NLI.eval_split == "test"


def test_flips_are_counted_against_the_prediction_not_the_target(tmp_path, synthetic_ready):
    """Explaining the other class (target = 1 - prediction) changes which tokens rank
    first, but a flip is still a change of the model's decision: with the same scores,
    the per-example flip_rate equals an independent recount against the prediction."""
    model, vocab = synthetic_ready.model, synthetic_ready.vocab
    examples = synthetic_ready.examples("test", limit=16)

    def pred(tokens):
        from faithbench.benchmark.core.vocab import collate

        batch = collate([vocab.encode(tokens)], ["x"]) if tokens else None
        if batch is None:
            from faithbench.benchmark.core.api import Batch

            batch = Batch(torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, 1, dtype=torch.bool),
                          ("x",))
        with torch.no_grad():
            return int(model.logits(batch).argmax(-1))

    rows, expected = [], []
    for i, e in enumerate(examples):
        # even rows rank a planted word first (often a flip), odd rows a filler word
        scores = [float(bool(r) == (i % 2 == 0)) for r in e.reference]
        p = pred(list(e.tokens))
        top = min(range(len(scores)), key=lambda j: (-scores[j], j))
        expected.append(float(pred([t for j, t in enumerate(e.tokens) if j != top]) != p))
        rows.append({"id": e.id, "tokens": list(e.tokens), "scores": scores, "target": 1 - p})
    path = tmp_path / "other-class.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    per = tmp_path / "per.jsonl"
    [summary] = score_file("synthetic", str(path), RunConfig(metrics=("flip_rate",),
                                                             progress=False), str(per))
    assert [v["value"] for v in read_jsonl(per)] == expected
    assert summary["mean"] == pytest.approx(sum(expected) / len(expected))
    assert 0 < sum(expected) < len(expected)  # a case where the complement would differ


def test_lists_accept_commas_as_well_as_spaces():
    args = build_parser().parse_args(
        ["run", "--tasks", "synthetic,sentiment", "--explainers", "random,gradient", "occlusion",
         "--metrics", "comprehensiveness[bins=0.1,0.5],flip_rate", "--seeds", "0,1", "2"])
    config = _config(args)
    assert config.tasks == ("synthetic", "sentiment")
    assert config.explainers == ("random", "gradient", "occlusion")
    assert config.metrics == ("comprehensiveness[bins=0.1,0.5]", "flip_rate")
    assert config.seeds == (0, 1, 2)


def test_bad_seeds_are_an_input_error(capsys):
    assert main(["run", "--seeds", "0,x", "--no-progress"]) == 2
    assert "--seeds: expected integers" in capsys.readouterr().err


def test_comma_separated_explainers_run(tmp_path, synthetic_ready):
    out = tmp_path / "out"
    assert main(["run", "--out", str(out), "--explainers", "random,gradient", "--metrics",
                 "flip_rate", "--limit", "8", "--no-progress"]) == 0
    names = {r["explainer"].split("[")[0].split("@")[0] for r in read_jsonl(out / "results.jsonl")}
    assert names == {"random", "gradient"}
    assert math.isfinite(read_jsonl(out / "results.jsonl")[0]["estimate"]["mean"])


def test_several_explanation_files_share_one_model_and_engine(tmp_path, synthetic_ready):
    """Two files with the same scores: the second asks for exactly the first's variants,
    so it forwards none, and both get the values a lone file gets."""
    examples = synthetic_ready.examples("test", 12)
    rows = [{"id": e.id, "tokens": list(e.tokens),
             "scores": [float(i % 3) for i in range(len(e.tokens))]} for e in examples]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = RunConfig(metrics=("comprehensiveness", "taucorr_loo"), progress=False)
    both = score_file("synthetic", [str(a), str(b)], config, str(tmp_path / "per.jsonl"))
    alone = score_file("synthetic", str(a), config)
    assert [r["explanations"] for r in both] == [str(a), str(a), str(b), str(b)]
    assert [r["mean"] for r in both] == [r["mean"] for r in alone] * 2
    assert all(r["rows_forwarded"] > 0 for r in both[:2])
    assert all(r["rows_forwarded"] == 0 for r in both[2:])
    per = read_jsonl(tmp_path / "per.jsonl")
    assert {r["explanations"] for r in per} == {str(a), str(b)} and len(per) == 4 * 12
