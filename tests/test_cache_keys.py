"""What the caches are keyed by: a model by what its training reads, a unit and its
explanations by weights, seed, data fingerprint, split and limit; and a cache hit is
checked example by example."""

import json
import shutil

import pytest
import torch

from faithbench.benchmark import plan
from faithbench.benchmark.core.api import TaskOptions
from faithbench.benchmark.core.files import content_hash, file_hash
from faithbench.benchmark.core.records import read_jsonl, read_results, write_jsonl_atomic
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import resolve_explainer, run
from faithbench.benchmark.session import open_session

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def data(tmp_path, shared_data):
    """A copy of the SST-2 sentence files that a test may change."""
    (tmp_path / "data" / "sst2").mkdir(parents=True)
    for split in ("train", "validation", "test"):
        shutil.copy(shared_data / "sst2" / f"{split}.jsonl", tmp_path / "data" / "sst2")
    return tmp_path / "data"


def replace_test_file(data, shift: int = 400, n: int = 400) -> None:
    """Test rows 0..n-1 keep their ids (idx) but get the sentences and labels of rows
    shift..shift+n-1: other sentences under the same ids, same count."""
    path = data / "sst2" / "test.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    new = [{**rows[i + shift], "idx": rows[i]["idx"]} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in new))


def options(data) -> TaskOptions:
    return TaskOptions(data_dir=str(data), variant="sentences", train_limit=200, epochs=1)


def test_a_model_evaluated_on_another_test_file_is_not_retrained(data):
    """The model's key hashes the training and validation splits; the test split's
    accuracy is measured again (recounted here) and kept in the model file."""
    from faithbench import tasks
    task = tasks.get_task("sentiment")
    first = task.prepare(options(data), progress=False)
    assert not first.loaded_from_cache
    replace_test_file(data)
    again = task.prepare(options(data), progress=False)
    assert again.loaded_from_cache
    assert (again.checkpoint, again.cache_key) == (first.checkpoint, first.cache_key)
    assert again.data_fingerprint != first.data_fingerprint
    test = again.splits["test"]
    with torch.no_grad():
        right = [int(again.model.logits(again.collate([e])[0]).argmax()) == e.label
                 for e in test]
    assert again.accuracy["test"] == pytest.approx(sum(right) / len(test), abs=1e-12)
    assert again.accuracy["test"] != first.accuracy["test"]
    assert again.accuracy["validation"] == first.accuracy["validation"]
    third = task.prepare(options(data), progress=False)  # the refreshed accuracy was saved
    assert third.loaded_from_cache and third.accuracy == again.accuracy


def per_example(out, record) -> list:
    return [(row["id"], row["value"]) for row in read_jsonl(out / record.per_example_file)]


def test_a_rerun_after_the_test_file_changed_explains_the_new_sentences(tmp_path, data):
    """Same training data, so the same weights; a rerun into the same --out computes
    the unit again, on the new sentences, exactly as a run into a fresh folder does."""
    config = RunConfig(tasks=("sentiment",), data_dir=str(data), variant="sentences",
                       train_limit=200, epochs=1, limit=30, explainers=("gradient",),
                       allow_weak_model=True,
                       metrics=("comprehensiveness",), out=str(tmp_path / "out"),
                       progress=False, write_leaderboard=False)
    first = run(config)
    assert first.computed == 1
    replace_test_file(data)
    again = run(config)
    assert (again.computed, again.skipped) == (1, 0)
    fresh = run(RunConfig(**{**config.as_dict(), "out": str(tmp_path / "fresh")}))
    [old, new] = read_results(tmp_path / "out" / "results.jsonl")
    [want] = read_results(tmp_path / "fresh" / "results.jsonl")
    assert old.provenance.checkpoint == new.provenance.checkpoint
    assert per_example(tmp_path / "out", new) == per_example(tmp_path / "fresh", want)
    assert per_example(tmp_path / "out", new) != per_example(tmp_path / "out", old)
    assert fresh.computed == 1
    assert len(list((tmp_path / "out" / "explanations").glob("*.jsonl"))) == 2


def test_cached_explanations_of_other_examples_are_computed_again(tmp_path, synthetic_ready):
    """A cache file whose ids (or tokens) are not the session's examples, one by one, is
    not used, even with the right number of rows (each file written with its content
    hash, as faithbench writes one; a file changed without it is refused:
    tests/test_integrity.py)."""
    config = RunConfig(out=str(tmp_path), limit=6, progress=False)
    explainer = resolve_explainer("gradient")
    want = open_session("synthetic", config).explain(explainer)
    [path] = (tmp_path / "explanations").glob("*.jsonl")
    rows = read_jsonl(path)

    def write(rows):
        write_jsonl_atomic(path, rows)
        path.with_suffix(".sha256").write_text(file_hash(path) + "\n")

    write(rows[::-1])  # same count, ids in another order
    got = open_session("synthetic", config).explain(explainer)
    assert got.scores == want.scores != [r["scores"] for r in rows[::-1]]
    assert [r["id"] for r in read_jsonl(path)] == [r["id"] for r in rows]  # rewritten
    swapped = [{**r, "tokens": rows[0]["tokens"]} if i == 1 else r for i, r in enumerate(rows)]
    write([{**r, "scores": [0.0] * len(r["scores"])} for r in swapped])
    assert open_session("synthetic", config).cached(explainer) is None
    write(rows)
    assert open_session("synthetic", config).cached(explainer).scores == want.scores


def test_unit_keys_hash_seed_and_data():
    config = RunConfig(limit=7)
    [unit] = plan.units(config, "synthetic", 1, "abc", "test", ["e@1"], ["m@1"], data="fp")
    assert unit == plan.Unit("synthetic", 1, "e@1", "m@1", "test", 7, unit.key)
    assert unit.key == content_hash({"checkpoint": "abc", "seed": 1, "data": "fp",
                                     "explainer": "e@1", "metric": "m@1", "split": "test",
                                     "limit": 7})
    keys = {plan.unit_key("abc", "e@1", "m@1", "test", 7, seed=s, data=d)
            for s in (0, 1) for d in ("fp", "other")}
    assert len(keys) == 4
