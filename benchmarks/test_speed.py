"""Speed of every metric next to the model's own batched-forward throughput.

Run: ``python -m pytest benchmarks --benchmark-columns=mean,rounds`` (add
``FAITHBENCH_BENCH_TASK=sentiment FAITHBENCH_DATA=../shared/data`` for SST-2).
``test_explain_isolation_cost`` times an explainer in-process and in a worker process.
Each metric benchmark records in ``extra_info`` the rows it forwarded, its rows/s,
the model's best forward rows/s on the unperturbed examples (across chunk sizes),
and ``cost_vs_forward``: metric time / time of the bare forward passes of exactly
the variants it forwarded (recorded, then re-run alone in the same session) —
1.0 means the metric costs exactly the forward passes it needs, and the rest is
the engine's overhead (ranking, building keep-masks, erasing, sorting, copying).
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


class Recording:
    """The model surface, keeping every batch the engine forwards."""

    def __init__(self, model):
        self.model, self.batches = model, []
        self.pad_id, self.mask_id, self.baseline_id = model.pad_id, model.mask_id, model.baseline_id

    def logits(self, batch):
        self.batches.append(batch)
        return self.model.logits(batch)


@torch.no_grad()
def bare_forward_seconds(model, batches, repeats: int = 3) -> float:
    """Best time to forward ``batches`` (with the softmax the engine applies) and nothing else."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for b in batches:
            torch.softmax(model.logits(b).float(), dim=-1)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("name", [m.spec.name for m in metric_registry.default_metrics(
    task_registry.get_task(TASK).spec.kind, has_reference=False)])  # those that apply to TASK
def test_metric(benchmark, name, setup, forward_rows_per_s):
    ready, examples, probs, targets, scores = setup
    metric = metric_registry.get_metric(name)
    recording = Recording(ready.model)
    perturber = Perturber(recording, chunk_size=512)

    def once():
        recording.batches.clear()
        return score(metric, ready, examples, scores, targets, probs, perturber, batch_size=64,
                     progress=False)

    result = benchmark.pedantic(once, rounds=3, warmup_rounds=1)
    seconds = benchmark.stats.stats.mean
    forward = bare_forward_seconds(ready.model, list(recording.batches))
    benchmark.extra_info.update(
        rows_forwarded=result.rows_forwarded,
        rows_per_s=result.rows_forwarded / seconds,
        bare_forward_s=forward,
        best_forward_rows_per_s=forward_rows_per_s,
        cost_vs_forward=seconds / forward,
    )
    assert torch.isfinite(torch.as_tensor(result.values)).all()


@pytest.mark.parametrize("isolation", ["none", "process"])
@pytest.mark.parametrize("name", ["gradient", "occlusion"])
def test_explain_isolation_cost(benchmark, name, isolation, setup):
    """What running a plugin in a worker process costs: one fork per explainer run plus a
    pickle round trip per batch, against the same explainer in this process."""
    ready, examples, _, targets, _ = setup
    explainer = resolve_explainer(name)

    def once():
        return explain(explainer, ready, examples, targets, batch_size=64, seed=0,
                       time_budget_s=None, progress=False, isolation=isolation)

    result = benchmark.pedantic(once, rounds=3, warmup_rounds=1)
    benchmark.extra_info.update(isolation=isolation,
                                examples_per_s=len(examples) / benchmark.stats.stats.mean)
    assert len(result.scores) == len(examples)
