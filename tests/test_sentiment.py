"""SST-2 from the shared local copy: loading through ``datasets`` with the hub's
columns, and the whole pipeline on a small slice."""

import json

import pytest
import torch

from faithbench import submissions
from faithbench.benchmark.core.api import capabilities
from faithbench.benchmark.core.records import read_results
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import run
from faithbench.tasks.classification import TaskOptions
from faithbench.tasks.sentiment import TASK, read
from faithbench.testing import tiny_classifier


def test_local_copy_loads_with_hub_columns(shared_data):
    splits = read(TaskOptions(data_dir=str(shared_data), variant="sentences"))
    assert {k: len(v) for k, v in splits.items()} == {"validation": 872, "test": 1821, "train": 6920}
    first = json.loads((shared_data / "sst2" / "validation.jsonl").read_text().splitlines()[0])
    ex = splits["validation"][0]
    assert ex.id == f"validation-{first['idx']}" and ex.label == first["label"]
    assert list(ex.tokens) == first["sentence"].lower().split()
    phrases = read(TaskOptions(data_dir=str(shared_data), variant="phrases"))
    assert len(phrases["train"]) == 77189 and len(phrases["validation"]) == 872


def test_unknown_variant_is_an_input_error(shared_data):
    from faithbench.benchmark.core.errors import InputError

    with pytest.raises(InputError, match="unknown training split 'trees'"):
        read(TaskOptions(data_dir=str(shared_data), variant="trees"))


def test_pipeline_on_a_slice(shared_data, tmp_path):
    config = RunConfig(tasks=("sentiment",), data_dir=str(shared_data), variant="sentences",
                       train_limit=1500, epochs=1, limit=16, batch_size=8, progress=False,
                       allow_weak_model=True,
                       out=str(tmp_path))
    summary = run(config)
    assert summary.exit_code == 0
    records = read_results(tmp_path / "results.jsonl")
    # every explainer a BiLSTM serves (rollout and value zeroing need a Transformer; counted
    # from the registry, which grows) x seven faithfulness + five plausibility
    have = capabilities(tiny_classifier())  # the sentiment model's class
    served = [n for n in submissions.REFERENCE
              if submissions.get_explainer(n).spec.requires <= have]
    assert {r.explainer.split("[")[0].split("@")[0] for r in records} == set(served)
    assert len(records) == len(served) * 12
    for r in records:
        assert r.task == "sentiment@1" and r.estimate.n == 16  # all 16 have a rationale
        acc = r.provenance.model_accuracy
        assert set(acc) == {"validation", "test"}
        assert r.provenance.config["task"]["variant"] == "sentences"
    # the cached model is loaded, not retrained, by a second prepare
    ready = TASK.prepare(TaskOptions(data_dir=str(shared_data), variant="sentences",
                                     train_limit=1500, epochs=1), progress=False)
    assert ready.loaded_from_cache and ready.checkpoint == records[0].provenance.checkpoint
    # the recorded accuracy is the share of examples the model gets right, recounted
    # here one example at a time, apart from the training code's batched count
    for split in ("validation", "test"):
        right = 0
        with torch.no_grad():
            for e in ready.splits[split]:
                batch, _, _ = ready.collate([e])
                right += int(ready.model.logits(batch).argmax()) == e.label
        assert records[0].provenance.model_accuracy[split] == pytest.approx(
            right / len(ready.splits[split]), abs=1e-12)


def test_hub_is_the_default_and_offline_says_what_to_do(monkeypatch):
    """Without --data-dir the hub id is asked for; offline, the error names the fix."""
    import datasets  # faithbench.tasks.data imports it where it reads

    from faithbench.benchmark.core.errors import InputError

    asked = []

    def offline(name, *args, **kwargs):
        asked.append(name)
        raise ConnectionError("no network")

    monkeypatch.delenv("FAITHBENCH_DATA", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(InputError, match="pass --data-dir DIR"):
        read(TaskOptions())
    assert asked == ["stanfordnlp/sst2"]


def _sst2(tmp_path, rows_by_split):
    """A local sst2/ folder (the sentences variant) with the given rows per split."""
    (tmp_path / "sst2").mkdir()
    good = [{"idx": i, "sentence": f"a fine film {i}", "label": i % 2} for i in range(3)]
    for split in ("train", "validation", "test"):
        rows = rows_by_split.get(split, good)
        data = rows if isinstance(rows, bytes) else "".join(json.dumps(r) + "\n" for r in rows)
        (tmp_path / "sst2" / f"{split}.jsonl").write_bytes(
            data if isinstance(data, bytes) else data.encode())
    return TaskOptions(data_dir=str(tmp_path), variant="sentences")


@pytest.mark.parametrize("sentence", ["", "   \t "])
def test_an_empty_sentence_is_refused_at_load_with_file_and_line(tmp_path, sentence):
    """Before: loaded, trained, and failed in the first erasure metric with `examples
    with no real token: test-1`, naming no file."""
    from faithbench.benchmark.core.errors import DataFileError

    rows = [{"idx": 0, "sentence": "good", "label": 1}, {"idx": 1, "sentence": sentence,
                                                         "label": 0}]
    with pytest.raises(DataFileError, match="empty text") as info:
        read(_sst2(tmp_path, {"test": rows}))
    assert info.value.path.endswith("test.jsonl")
    assert (info.value.line, info.value.field) == (2, "sentence")


def test_bytes_that_are_not_utf8_name_the_line_and_byte_offset(tmp_path):
    """A 0xff byte on line 3 (Latin-1 'ÿ'): before, a UnicodeDecodeError traceback (exit 1)."""
    from faithbench.benchmark.core.errors import NotUtf8Error

    lines = [b'{"idx": 0, "sentence": "good", "label": 1}\n',
             b'{"idx": 1, "sentence": "bad", "label": 0}\n',
             b'{"idx": 2, "sentence": "na\xefve", "label": 0}\n']
    lines[2] = lines[2].replace(b"\xef", b"\xff")
    column = lines[2].index(b"\xff")  # 0-based position within line 3
    with pytest.raises(NotUtf8Error) as info:
        read(_sst2(tmp_path, {"validation": b"".join(lines)}))
    err = info.value
    assert (err.line, err.offset) == (3, len(lines[0]) + len(lines[1]) + column)
    assert err.path.endswith("validation.jsonl") and err.exit_code == 2
    assert f"byte 0xff at byte offset {err.offset} (byte {column + 1} of the line)" in str(err)


def test_an_empty_file_is_an_error_naming_it(tmp_path):
    from faithbench.benchmark.core.errors import DataFileError

    with pytest.raises(DataFileError, match="no rows: the file is empty") as info:
        read(_sst2(tmp_path, {"train": []}))
    assert info.value.path.endswith("train.jsonl")


def test_a_hub_copy_leaves_out_empty_sentences_and_counts_them(monkeypatch, caplog):
    """A hub copy cannot be fixed by its user: its empty rows are left out, counted."""
    import logging

    import datasets

    import faithbench.tasks.sentiment

    split = datasets.Dataset.from_list([{"idx": 0, "sentence": "good", "label": 1},
                                        {"idx": 1, "sentence": " ", "label": 0},
                                        {"idx": 2, "sentence": "bad", "label": 0}])
    monkeypatch.delenv("FAITHBENCH_DATA", raising=False)
    monkeypatch.setattr(faithbench.tasks.sentiment, "load_hub", lambda name, splits: dict.fromkeys(splits, split))
    with caplog.at_level(logging.WARNING):
        splits = read(TaskOptions())
    assert [e.id for e in splits["test"]] == ["test-0", "test-2"]
    assert "stanfordnlp/sst2 test: left out 1 rows with an empty sentence" in caplog.text
