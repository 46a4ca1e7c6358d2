"""What the perturbation explainers cost next to the forward passes they need.

Run: ``python -m pytest benchmarks/test_perturbation_speed.py --benchmark-columns=mean,rounds``
(``FAITHBENCH_BENCH_TASK=sentiment FAITHBENCH_DATA=../shared/data`` for SST-2, and
``FAITHBENCH_BENCH_MODEL=transformer`` for the fine-tuned MiniLM of the published
runs, which must be in the model cache). For each of occlusion, LIME, KernelSHAP and
Shapley value sampling it explains the first ``FAITHBENCH_BENCH_N`` (default 64)
validation examples through a fresh session (its engine's memory empty) and records in
``extra_info``: the rows the explainer asked the engine for, the distinct rows it
forwarded, the explain time, the bare forward time of exactly those distinct rows
(recorded, then forwarded again alone, best of 3), and their ratio
``cost_vs_forward`` (target: ≤ 1.3; 1.0 = the explainer costs its forward passes).
Both times are CPU seconds of this process (``time.process_time``; run with
``OMP_NUM_THREADS=1``), so jobs beside it on the machine do not skew the ratio.
Occlusion still builds and forwards its variants itself (no sharing): its ratio is
the yardstick of an explainer with no sampling or fitting to do.
"""

import dataclasses
import os
import time

import pytest
from test_speed import DATA, Recording, bare_forward_seconds

from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import resolve_explainer
from faithbench.benchmark.session import EvaluationSession, open_session

TASK = os.environ.get("FAITHBENCH_BENCH_TASK", "synthetic")
MODEL = os.environ.get("FAITHBENCH_BENCH_MODEL")  # None: the task's BiLSTM
N_EXAMPLES = int(os.environ.get("FAITHBENCH_BENCH_N", "64"))
EXPLAINERS = ("occlusion", "lime", "kernel_shap", "shapley_sampling")


@pytest.fixture(scope="module")
def session():
    config = RunConfig(tasks=(TASK,), data_dir=DATA if TASK != "synthetic" else None,
                       split="validation", limit=N_EXAMPLES, batch_size=32, progress=False,
                       time_budget_s=None, model=MODEL, epochs=1 if MODEL else None)
    return open_session(TASK, config)


@pytest.mark.parametrize("name", EXPLAINERS)
def test_explainer_vs_its_forward_passes(benchmark, session, name):
    explainer = resolve_explainer(name)
    targets = session.targets

    def once():
        recording = Recording(session.prepared.model)
        prepared = dataclasses.replace(session.prepared, model=recording)
        fresh = EvaluationSession(prepared, session.config, seed=session.seed)
        fresh._probs, fresh._targets = session.base_probs, targets
        start = time.process_time()
        fresh.explain(explainer, cache=False)
        return time.process_time() - start, fresh.perturber, recording

    seconds, engine, recording = benchmark.pedantic(once, rounds=2, warmup_rounds=0)
    forward = bare_forward_seconds(session.prepared.model, list(recording.batches),
                                   clock=time.process_time)
    rows = sum(len(b) for b in recording.batches)
    benchmark.extra_info.update(
        task=TASK, model=MODEL or "bilstm", n_examples=len(session.examples),
        rows_requested=engine.rows_requested, rows_forwarded=rows,
        clock="process_time (CPU seconds, one torch thread)",
        explain_s=seconds, distinct_forward_s=forward, cost_vs_forward=seconds / forward,
        seconds_per_example=seconds / len(session.examples))
    assert rows > 0
