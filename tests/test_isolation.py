"""Plugins that misbehave beyond raising: they exit the process, interrupt, hang,
change the model's weights, switch it to train mode, or leave threads running.
None of them may take down the run, change what other explainers and metrics see,
or enter the leaderboard; and ``validate`` must return under its time budget.
Every plugin runs in a worker process; hostile plugins are in test_sandbox.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from faithbench.benchmark.core.cache import weights_hash
from faithbench.benchmark.core.errors import InputError, PluginError
from faithbench.benchmark.core.isolation import InProcess, Worker, is_reference, plugin_caller
from faithbench.benchmark.core.plugins import load_explainer
from faithbench.benchmark.core.records import read_jsonl, read_results
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import resolve_explainer, run
from faithbench.benchmark.verbs import validate_plugin

pytestmark = pytest.mark.usefixtures("one_thread")
PLUGINS = Path(__file__).parent / "plugins"
IDS = ("ex-a", "ex-b", "ex-c")
FAST = {"limit": 16, "batch_size": 8, "progress": False}


def plugin(name: str):
    return load_explainer(str(PLUGINS / f"{name}.py"))


# ---------------------------------------------------------------- in a worker process

WORKER_FAILURES = [
    # plugin file, what the failure says
    ("calls_os_exit", "worker process died (exit code 7)"),
    ("calls_sys_exit", "raised SystemExit: 3"),
    ("raises_keyboard_interrupt", "raised KeyboardInterrupt"),
    ("leaves_thread", "left 1 thread(s) running (plugin-leftover)"),
    ("changes_weights", "changed the model's parameters (embedding.weight)"),
    ("hangs", "exceeded its time budget of 0.5s per example"),
]


@pytest.mark.parametrize("file, says", WORKER_FAILURES)
def test_worker_turns_every_misbehaviour_into_a_plugin_error(file, says, model, batch):
    b, target = batch
    before = weights_hash(model.state_dict())
    start = time.perf_counter()
    with plugin_caller(plugin(file), model, time_budget_s=0.5, isolation="process") as caller:
        assert isinstance(caller, Worker)
        with pytest.raises(PluginError) as info:
            caller.explain(b, target, seed=0)
    err = info.value
    assert says in str(err) and err.stage == "explain" and err.example_ids == IDS
    assert time.perf_counter() - start < 20  # the hang is cut at 3 x 0.5 s, not an hour
    assert weights_hash(model.state_dict()) == before and not model.training


def test_worker_gives_the_same_scores_as_in_process(model, batch):
    b, target = batch
    gradient = resolve_explainer("gradient")
    with plugin_caller(gradient, model, time_budget_s=5.0, isolation="process") as caller:
        isolated = caller.explain(b, target, seed=0)
        again = caller.explain(b, target, seed=0)  # the worker serves many calls
    here = InProcess(gradient, model, 5.0).explain(b, target, seed=0)
    torch.testing.assert_close(isolated, here, rtol=0, atol=0)
    torch.testing.assert_close(again, here, rtol=0, atol=0)


def test_worker_after_multithreaded_parent_does_not_hang(model, batch):
    """OpenMP's pool does not survive fork: a worker that kept the parent's thread count
    hung on its first op once the parent had run multi-threaded (seen with 2 threads)."""
    b, target = batch
    torch.set_num_threads(2)
    try:
        torch.randn(512, 512) @ torch.randn(512, 512)  # the parent's thread pool is up
        gradient = resolve_explainer("gradient")
        with plugin_caller(gradient, model, time_budget_s=5.0, isolation="process") as caller:
            isolated = caller.explain(b, target, seed=0)
    finally:
        torch.set_num_threads(1)
    here = InProcess(gradient, model, 5.0).explain(b, target, seed=0)
    torch.testing.assert_close(isolated, here)


def test_auto_isolation_runs_only_outside_plugins_in_a_worker(model):
    assert is_reference(resolve_explainer("occlusion"))
    assert not is_reference(plugin("calls_os_exit"))
    with plugin_caller(resolve_explainer("occlusion"), model, time_budget_s=1.0) as caller:
        assert isinstance(caller, InProcess)
    with plugin_caller(plugin("calls_os_exit"), model, time_budget_s=1.0) as caller:
        assert isinstance(caller, Worker)
    with plugin_caller(resolve_explainer("occlusion"), model, time_budget_s=1.0,
                       isolation="process") as caller:
        assert isinstance(caller, Worker)
    with pytest.raises(InputError, match="a plugin runs only in a worker process"):
        plugin_caller(plugin("calls_os_exit"), model, time_budget_s=1.0,
                      isolation="none").__enter__()
    with pytest.raises(InputError, match="runs only in a worker"):
        InProcess(plugin("calls_os_exit"), model, 1.0)


# ---------------------------------------------------------------- in this process

class _ChangesWeights:
    """Built in this process by the caller (not loaded): runs here when asked to."""

    def __init__(self):
        from faithbench.benchmark.core.api import ExplainerSpec

        self.spec = ExplainerSpec(name="local_weights", version="1")

    def explain(self, model, batch, target, *, rng):
        with torch.no_grad():
            model.embedding.weight.add_(1.0)
        return batch.mask.float()


def test_in_process_weight_change_is_undone_and_fails(model, batch):
    b, target = batch
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(PluginError, match="changed the model's parameters"):
        InProcess(_ChangesWeights(), model, 5.0).explain(b, target, seed=0)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_train_mode_in_a_worker_does_not_reach_this_model(model, batch):
    b, target = batch
    gradient = resolve_explainer("gradient")
    clean = InProcess(gradient, model, 5.0).explain(b, target, seed=0)
    with plugin_caller(plugin("calls_train"), model, time_budget_s=5.0) as caller:
        caller.explain(b, target, seed=0)
    assert not model.training
    after = InProcess(gradient, model, 5.0).explain(b, target, seed=0)
    torch.testing.assert_close(after, clean, rtol=0, atol=0)


# ---------------------------------------------------------------- a whole run

def test_run_survives_every_misbehaving_plugin(tmp_path, synthetic_ready):
    """The bad plugins fail and are recorded; the reference explainer after them gets
    exactly the results it gets alone; nothing of the bad ones enters the leaderboard;
    a plugin that only switched to train mode is harmless to the others."""
    bad = ["calls_os_exit", "calls_sys_exit", "raises_keyboard_interrupt", "leaves_thread",
           "changes_weights"]
    refs = tuple(str(PLUGINS / f"{b}.py") for b in bad) + (str(PLUGINS / "calls_train.py"),)
    metrics = ("comprehensiveness", "flip_rate")
    mixed = run(RunConfig(out=str(tmp_path / "mixed"), explainers=refs + ("gradient",),
                          metrics=metrics, time_budget_s=2.0, **FAST))
    run(RunConfig(out=str(tmp_path / "alone"), explainers=("gradient",),
                          metrics=metrics, **FAST))
    assert mixed.exit_code == 1
    failed = {f.explainer.split("@")[0] for f in mixed.failures}
    assert failed == {"broken_os_exit", "broken_sys_exit", "broken_interrupt", "broken_thread",
                      "broken_weights"}
    assert len(read_jsonl(tmp_path / "mixed" / "failures.jsonl")) == len(bad)

    def values(folder):
        return {(r.explainer, r.metric): [row["value"] for row in
                                          read_jsonl(tmp_path / folder / r.per_example_file)]
                for r in read_results(tmp_path / folder / "results.jsonl")}

    got, want = values("mixed"), values("alone")
    assert {e.split("[")[0].split("@")[0] for e, _ in got} == {"gradient", "misbehaves_train"}
    for key, v in want.items():
        assert got[key] == v, key
    entries = {e.header["explainer_name"] for e in mixed.entries}
    assert entries == {"gradient", "misbehaves_train"}
    assert synthetic_ready.checkpoint == weights_hash(synthetic_ready.model.state_dict())


def test_validate_of_a_hanging_plugin_returns_within_its_budget(synthetic_ready):
    start = time.perf_counter()
    checks = validate_plugin(str(PLUGINS / "hangs.py"), RunConfig(time_budget_s=0.25, **FAST))
    took = time.perf_counter() - start
    failed = {c.check for c in checks if not c.passed}
    assert {"shape_and_finite", "time_per_example"} <= failed
    assert "time budget of 0.25s" in next(c.detail for c in checks if c.check == "shape_and_finite")
    assert took < 60, took  # one budget (8 examples x 0.25 s), plus the model; not an hour


# ---------------------------------------------------------------- the time budget

class _SleepsPerToken:
    """An outside plugin whose cost is ``per_token`` seconds per real token of a batch."""

    def __init__(self, per_token: float):
        from faithbench.benchmark.core.api import ExplainerSpec

        self.spec, self.per_token = ExplainerSpec(name="sleeps", version="1"), per_token

    def explain(self, model, batch, target, *, rng):
        time.sleep(self.per_token * int(batch.lengths.sum()))
        return batch.mask.float()


@pytest.mark.parametrize("isolation", ["auto", "process"])
def test_a_plugins_budget_scales_with_example_length(model, isolation):
    """0.1 s per example of up to 32 tokens: a 320-token example may take 1.0 s, so 0.32 s
    passes (before: failed the fixed 0.1 s); a 10-token one taking 0.3 s still fails."""
    from faithbench.benchmark.core.vocab import collate

    long = collate([[5] * 320], ["long"])
    with plugin_caller(_SleepsPerToken(0.001), model, time_budget_s=0.1,
                       isolation=isolation) as caller:
        assert caller.explain(long, torch.tensor([0]), seed=0).tolist() == [[1.0] * 320]
    short = collate([[5] * 10], ["short"])
    over = r"time budget of 0.1s per example \(0.1s for a batch of 1 examples with 10 tokens"
    with (plugin_caller(_SleepsPerToken(0.03), model, time_budget_s=0.1,
                        isolation=isolation) as caller, pytest.raises(PluginError, match=over)):
        caller.explain(short, torch.tensor([0]), seed=0)


@pytest.mark.parametrize("isolation", ["auto", "process"])
def test_a_reference_explainer_is_not_held_to_the_plugin_budget(model, batch, isolation):
    """Integrated gradients under a budget of a microsecond per example: a plugin would
    fail (before: so did IG, e.g. after 546 s on long IMDB reviews); a reference
    explainer's cost is known, so it runs, with the scores it gives unbudgeted."""
    b, target = batch
    ig = resolve_explainer("integrated_gradients")
    want = InProcess(ig, model, None).explain(b, target, seed=0)
    with plugin_caller(ig, model, time_budget_s=1e-6, isolation=isolation) as caller:
        torch.testing.assert_close(caller.explain(b, target, seed=0), want)
