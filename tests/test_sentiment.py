"""SST-2 from the shared local copy: loading through ``datasets`` with the hub's
columns, and the whole pipeline on a small slice."""

import json

import pytest
import torch

from benchmark.core.records import read_results
from benchmark.plan import RunConfig
from benchmark.runner import run
from tasks.classification import TaskOptions
from tasks.sentiment import TASK, read


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
    from benchmark.core.errors import InputError

    with pytest.raises(InputError, match="unknown training split 'trees'"):
        read(TaskOptions(data_dir=str(shared_data), variant="trees"))


def test_pipeline_on_a_slice(shared_data, tmp_path):
    config = RunConfig(tasks=("sentiment",), data_dir=str(shared_data), variant="sentences",
                       train_limit=1500, epochs=1, limit=16, batch_size=8, progress=False,
                       out=str(tmp_path))
    summary = run(config)
    assert summary.exit_code == 0
    records = read_results(tmp_path / "results.jsonl")
    # six explainers (rollout needs a Transformer) x seven faithfulness + five plausibility
    assert len(records) == 6 * 12
    for r in records:
        assert r.task == "sentiment@1" and r.estimate["n"] == 16  # all 16 have a rationale
        acc = r.provenance["model_accuracy"]
        assert set(acc) == {"validation", "test"}
        assert r.provenance["config"]["task"]["variant"] == "sentences"
    # the cached model is loaded, not retrained, by a second prepare
    ready = TASK.prepare(TaskOptions(data_dir=str(shared_data), variant="sentences",
                                     train_limit=1500, epochs=1), progress=False)
    assert ready.loaded_from_cache and ready.checkpoint == records[0].provenance["checkpoint"]
    # the recorded accuracy is the share of examples the model gets right, recounted
    # here one example at a time, apart from the training code's batched count
    for split in ("validation", "test"):
        right = 0
        with torch.no_grad():
            for e in ready.splits[split]:
                batch, _, _ = ready.collate([e])
                right += int(ready.model.logits(batch).argmax()) == e.label
        assert records[0].provenance["model_accuracy"][split] == pytest.approx(
            right / len(ready.splits[split]), abs=1e-12)


def test_hub_is_the_default_and_offline_says_what_to_do(monkeypatch):
    """Without --data-dir the hub id is asked for; offline, the error names the fix."""
    import tasks.data
    from benchmark.core.errors import InputError

    asked = []

    def offline(name, *args, **kwargs):
        asked.append(name)
        raise ConnectionError("no network")

    monkeypatch.delenv("FAITHBENCH_DATA", raising=False)
    monkeypatch.setattr(tasks.data.datasets, "load_dataset", offline)
    with pytest.raises(InputError, match="pass --data-dir DIR"):
        read(TaskOptions())
    assert asked == ["stanfordnlp/sst2"]
