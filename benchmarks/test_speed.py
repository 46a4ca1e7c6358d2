"""Speed of the metrics next to the model's own batched-forward throughput.

Run: ``python -m pytest benchmarks --benchmark-columns=mean,rounds`` (add
``FAITHBENCH_BENCH_TASK=sentiment FAITHBENCH_DATA=../shared/data`` for SST-2 in the
per-metric benchmarks). Each benchmark records in ``extra_info``:

- per metric: the rows it forwarded, its rows/s, the model's best forward rows/s on the
  unperturbed examples (across chunk sizes), and ``cost_vs_forward``: metric time / time
  of the bare forward passes of exactly the variants it forwarded (recorded, then re-run
  alone in the same session) — 1.0 means the metric costs exactly its forward passes;
- ``test_suite``: the whole sentiment faithfulness suite (every faithfulness metric x
  the six reference explainers, 256 validation examples): rows requested (what an
  engine without sharing forwards), distinct rows forwarded, their ratio, suite time
  (best of 5 rounds) as a multiple of the bare forward time of the distinct rows (best
  of 5), and the same suite with sharing off;
- ``test_explain_isolation_cost``: an explainer in-process and in a worker process.
"""

import dataclasses
import os
import time
from pathlib import Path

import pytest
import torch
from forward_rate import best_forward_rows_per_s

from faithbench import metrics as metric_registry
from faithbench import submissions
from faithbench import tasks as task_registry
from faithbench.benchmark.core.perturb import Perturber
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import resolve_explainer
from faithbench.benchmark.session import EvaluationSession, open_session

TASK = os.environ.get("FAITHBENCH_BENCH_TASK", "synthetic")
N_EXAMPLES = int(os.environ.get("FAITHBENCH_BENCH_N", "256"))
CHUNKS = (64, 256, 512, 1024, 2048)
SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
DATA = os.environ.get("FAITHBENCH_DATA") or (str(SHARED_DATA) if SHARED_DATA.is_dir() else None)


def _config(task: str, **changes) -> RunConfig:
    base = RunConfig(tasks=(task,), data_dir=DATA if task != "synthetic" else None,
                     limit=N_EXAMPLES, batch_size=64, progress=False, time_budget_s=None)
    return dataclasses.replace(base, **changes)


@pytest.fixture(scope="module")
def setup():
    session = open_session(TASK, _config(TASK))
    explained = session.explain(resolve_explainer("gradient"), cache=False)
    return session, explained.scores


@pytest.fixture(scope="module")
def forward_rows_per_s(setup):
    """Best rows/s of plain batched forward passes over the examples, across chunk sizes."""
    session, _ = setup
    batches = [b for b, _, _ in session.prepared.batches(session.examples * 4, 2048)]
    return best_forward_rows_per_s(session.prepared.model, batches, CHUNKS)


def test_forward(benchmark, setup, forward_rows_per_s):
    session, _ = setup
    batch, _, _ = session.prepared.collate(session.examples)
    p = Perturber(session.prepared.model, chunk_size=512, share=False)
    benchmark.pedantic(p.probs, args=(batch,), rounds=5, warmup_rounds=1)
    benchmark.extra_info.update(rows=len(session.examples),
                                best_forward_rows_per_s=forward_rows_per_s)


class Recording:
    """The model surface, keeping every batch the engine forwards."""

    def __init__(self, model):
        self.model, self.batches = model, []
        self.pad_id, self.mask_id, self.baseline_id = model.pad_id, model.mask_id, model.baseline_id

    def logits(self, batch):
        self.batches.append(batch)
        return self.model.logits(batch)

    def __getattr__(self, name):  # the rest of the surface (embed, max_rows_per_pass, ...)
        return getattr(self.model, name)


@torch.no_grad()
def bare_forward_seconds(model, batches, repeats: int = 3, clock=time.perf_counter) -> float:
    """Best time to forward ``batches`` (with the softmax the engine applies) and nothing
    else, on ``clock`` (``time.process_time``: CPU seconds, which other jobs on the
    machine do not inflate when torch runs one thread)."""
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        for b in batches:
            torch.softmax(model.logits(b).float(), dim=-1)
        best = min(best, clock() - start)
    return best


def recording_session(session: EvaluationSession, *, share: bool):
    """A fresh session (empty memory, base probs not yet computed) of the same model,
    whose forward passes are recorded."""
    recording = Recording(session.prepared.model)
    prepared = dataclasses.replace(session.prepared, model=recording)
    return EvaluationSession(prepared, session.config, seed=session.seed, share=share), recording


@pytest.mark.parametrize("name", [m.spec.name for m in metric_registry.default_metrics(
    task_registry.get_task(TASK).spec.kind, has_reference=False)])  # those that apply to TASK
def test_metric(benchmark, name, setup, forward_rows_per_s):
    """One metric alone, sharing off, so its rows are exactly what it needs."""
    session, scores = setup
    metric = metric_registry.get_metric(name)
    probs = session.base_probs  # computed once, outside the timed rounds

    def once():
        fresh, recording = recording_session(session, share=False)
        fresh._probs = probs
        return fresh.score(metric, scores), recording

    (result, recording) = benchmark.pedantic(once, rounds=3, warmup_rounds=1)
    seconds = benchmark.stats.stats.mean
    forward = bare_forward_seconds(session.prepared.model, list(recording.batches))
    benchmark.extra_info.update(
        rows_forwarded=result.rows_forwarded,
        rows_per_s=result.rows_forwarded / seconds,
        bare_forward_s=forward,
        best_forward_rows_per_s=forward_rows_per_s,
        cost_vs_forward=seconds / forward,
    )
    assert torch.isfinite(torch.as_tensor(result.values)).all()


@pytest.fixture(scope="module")
def suite():
    """The sentiment model (seed 0), 256 validation examples, the six reference
    explainers' scores (computed once, not timed), and the faithfulness metrics."""
    if DATA is None:
        pytest.skip("the suite benchmark needs SST-2: set FAITHBENCH_DATA or put ../shared/data "
                    "beside the repo")
    session = open_session("sentiment", _config("sentiment", split="validation", limit=256))
    scores = {name: session.explain(resolve_explainer(name), cache=False).scores
              for name in submissions.UNIVERSAL}
    faithfulness = [m for m in metric_registry.default_metrics(session.spec.kind, False)
                    if m.spec.family == "faithfulness"]
    return session, scores, faithfulness


def run_suite(session, scores, metrics_, *, share: bool):
    fresh, recording = recording_session(session, share=share)
    start = time.perf_counter()
    values = {(e, m.spec.name): fresh.score(m, s).values
              for e, s in scores.items() for m in metrics_}
    seconds = time.perf_counter() - start
    return values, seconds, fresh.perturber, recording


def test_suite(benchmark, suite):
    """Every faithfulness metric x the six explainers through one session: identical
    variants are forwarded once. Targets: distinct rows <= 0.75 x rows requested, and
    suite time <= 1.15 x the bare forward time of the distinct rows."""
    session, scores, faithfulness = suite
    plain, plain_s, plain_engine, _ = run_suite(session, scores, faithfulness, share=False)

    def once():
        return run_suite(session, scores, faithfulness, share=True)

    shared, _, engine, recording = benchmark.pedantic(once, rounds=5, warmup_rounds=1)
    # best round vs best bare forward: the same statistic on both sides of the ratio
    seconds = benchmark.stats.stats.min
    forward = bare_forward_seconds(session.prepared.model, list(recording.batches), repeats=5)
    requested, forwarded = engine.rows_requested, engine.rows_forwarded
    benchmark.extra_info.update(
        metrics=[m.spec.name for m in faithfulness],
        explainers=list(scores),
        n_examples=len(session.examples),
        rows_requested=requested,
        rows_forwarded=forwarded,
        forwarded_share=forwarded / requested,
        suite_s=seconds,
        suite_mean_s=benchmark.stats.stats.mean,
        distinct_forward_s=forward,
        suite_vs_distinct_forward=seconds / forward,
        unshared_rows_forwarded=plain_engine.rows_forwarded,
        unshared_suite_s=plain_s,
        speedup_vs_unshared=plain_s / seconds,
    )
    assert plain_engine.rows_forwarded == requested  # without sharing, every request
    for key, value in shared.items():  # the same numbers, to float32 rounding
        assert torch.allclose(torch.as_tensor(value), torch.as_tensor(plain[key]), atol=1e-6)


@pytest.mark.parametrize("isolation", ["none", "process"])
@pytest.mark.parametrize("name", ["gradient", "occlusion"])
def test_explain_isolation_cost(benchmark, name, isolation, setup):
    """What running an explainer in a worker process costs: one fresh Python process per
    explainer run (torch imported, the model read from a file) plus an array round trip
    per batch, against the same explainer in this process."""
    session, _ = setup
    config = dataclasses.replace(session.config, isolation=isolation)
    mine = EvaluationSession(session.prepared, config, seed=session.seed)
    mine._targets = session.targets
    explainer = resolve_explainer(name)

    result = benchmark.pedantic(lambda: mine.explain(explainer, cache=False), rounds=3,
                                warmup_rounds=1)
    benchmark.extra_info.update(isolation=isolation,
                                examples_per_s=len(session.examples) / benchmark.stats.stats.mean)
    assert len(result.scores) == len(session.examples)
