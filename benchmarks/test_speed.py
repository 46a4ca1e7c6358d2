"""Speed of every metric next to the model's own batched-forward throughput.

Run: ``python -m pytest benchmarks --benchmark-columns=mean,rounds`` (add
``FAITHBENCH_BENCH_TASK=sentiment FAITHBENCH_DATA=../shared/data`` for SST-2).
Each metric benchmark records in ``extra_info`` the rows it forwarded, its rows/s,
the model's best forward rows/s measured in the same session, and
``cost_vs_forward``: metric time / (rows forwarded / best forward rows/s) —
1.0 means the metric costs exactly the forward passes it needs.
"""

import os
import time

import pytest
import torch

import metrics as metric_registry
import tasks as task_registry
from benchmark.core.perturb import Perturber
from benchmark.runner import resolve_explainer
from benchmark.scoring import base_probs, explain, score
from tasks.classification import TaskOptions

TASK = os.environ.get("FAITHBENCH_BENCH_TASK", "synthetic")
N_EXAMPLES = int(os.environ.get("FAITHBENCH_BENCH_N", "256"))
CHUNKS = (64, 256, 512, 1024, 2048)


@pytest.fixture(scope="module")
def setup():
    ready = task_registry.get_task(TASK).prepare(TaskOptions(), progress=False)
    examples = ready.examples(limit=N_EXAMPLES)
    perturber = Perturber(ready.model, chunk_size=512)
    probs = base_probs(ready, examples, perturber, 64)
    targets = probs.argmax(-1)
    explained = explain(resolve_explainer("gradient"), ready, examples, targets, batch_size=64,
                        seed=0, time_budget_s=None, progress=False)
    return ready, examples, probs, targets, explained.scores


@pytest.fixture(scope="module")
def forward_rows_per_s(setup):
    """Best rows/s of plain batched forward passes over the examples, across chunk sizes."""
    ready, examples, *_ = setup
    batches = [b for b, _, _ in ready.batches(examples * 4, 2048)]
    best = 0.0
    for chunk in CHUNKS:
        p = Perturber(ready.model, chunk_size=chunk)
        start = time.perf_counter()
        for b in batches:
            p.probs(b)
        best = max(best, p.rows_forwarded / (time.perf_counter() - start))
    return best


def test_forward(benchmark, setup, forward_rows_per_s):
    ready, examples, *_ = setup
    batch, _, _ = ready.collate(examples)
    p = Perturber(ready.model, chunk_size=512)
    benchmark.pedantic(p.probs, args=(batch,), rounds=5, warmup_rounds=1)
    benchmark.extra_info.update(rows=len(examples), best_forward_rows_per_s=forward_rows_per_s)


@pytest.mark.parametrize("name", [n for n in metric_registry.REGISTRY.names()
                                  if not metric_registry.get_metric(n).spec.needs_reference])
def test_metric(benchmark, name, setup, forward_rows_per_s):
    ready, examples, probs, targets, scores = setup
    metric = metric_registry.get_metric(name)
    perturber = Perturber(ready.model, chunk_size=512)

    def once():
        return score(metric, ready, examples, scores, targets, probs, perturber, batch_size=64,
                     progress=False)

    result = benchmark.pedantic(once, rounds=3, warmup_rounds=1)
    seconds = benchmark.stats.stats.mean
    ideal = result.rows_forwarded / forward_rows_per_s
    benchmark.extra_info.update(
        rows_forwarded=result.rows_forwarded,
        rows_per_s=result.rows_forwarded / seconds,
        best_forward_rows_per_s=forward_rows_per_s,
        cost_vs_forward=seconds / ideal if ideal else float("nan"),
    )
    assert torch.isfinite(torch.as_tensor(result.values)).all()
