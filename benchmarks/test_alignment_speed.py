"""Speed of explaining translation rows next to the model's own batched forward rate.

A row is one (sentence pair, target position): explainers batch rows of many sentences
and positions into one forward (and one backward) pass, so no explainer runs a backward
per target word. Run ``python -m pytest benchmarks/test_alignment_speed.py
--benchmark-columns=mean,rounds``; the model is a small one trained on 3,000 pairs (a
minute), or the full-size cached model with ``FAITHBENCH_BENCH_ALIGN=full``. Each
explainer benchmark records in ``extra_info``: rows, its rows/s, the best forward rows/s
of the same rows (across chunk sizes) and ``cost_in_forwards`` (forward rate / its rate:
how many forward passes of a row one explanation of that row costs).
"""

import dataclasses
import os
from pathlib import Path

import pytest
from forward_rate import best_forward_rows_per_s

from faithbench import submissions
from faithbench.benchmark.core.api import TaskOptions
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import resolve_explainer
from faithbench.benchmark.session import EvaluationSession
from faithbench.tasks.alignment import TASK

SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
DATA = os.environ.get("FAITHBENCH_DATA") or (str(SHARED_DATA) if SHARED_DATA.is_dir() else None)
FULL = os.environ.get("FAITHBENCH_BENCH_ALIGN") == "full"
N_PAIRS = int(os.environ.get("FAITHBENCH_BENCH_N", "40"))  # gold pairs: about 13 rows each
CHUNKS = (64, 256, 512, 1024)

pytestmark = pytest.mark.skipif(DATA is None, reason="needs ../shared/data/alignment")


@pytest.fixture(scope="module")
def session():
    if FULL:
        task, options = TASK, TaskOptions(data_dir=DATA)
    else:
        task = dataclasses.replace(TASK, model_config={"embed_dim": 64, "hidden": 64,
                                                       "attn_dim": 64, "dropout": 0.1})
        options = TaskOptions(data_dir=DATA, train_limit=3000, epochs=1)
    prepared = task.prepare(options, progress=False)
    config = RunConfig(tasks=(task.spec.name,), limit=N_PAIRS, batch_size=64, progress=False,
                       time_budget_s=None)
    s = EvaluationSession(prepared, config, seed=0, examples=prepared.examples("test", N_PAIRS))
    s.targets  # noqa: B018 -- computed once, outside the timed rounds
    return s


@pytest.fixture(scope="module")
def forward_rows_per_s(session):
    """Best rows/s of plain batched forward passes over the rows, across chunk sizes."""
    batches = [b for b, _, _ in session.prepared.batches(session.examples, 4096)]
    return best_forward_rows_per_s(session.prepared.model, batches, CHUNKS)


@pytest.mark.parametrize("name", list(submissions.UNIVERSAL))
def test_explain_rows(benchmark, name, session, forward_rows_per_s):
    explainer = resolve_explainer(name)
    result = benchmark.pedantic(lambda: session.explain(explainer, cache=False), rounds=2,
                                warmup_rounds=0)
    rows_per_s = len(session.examples) / benchmark.stats.stats.mean
    benchmark.extra_info.update(rows=len(session.examples), rows_per_s=rows_per_s,
                                forward_rows_per_s=forward_rows_per_s,
                                cost_in_forwards=forward_rows_per_s / rows_per_s)
    assert len(result.scores) == len(session.examples)
    assert all(len(s) == len(e.tokens) for s, e in zip(result.scores, session.examples))
