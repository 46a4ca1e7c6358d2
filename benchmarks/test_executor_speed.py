"""Wall time of a batch of ROAR retraining jobs on each executor, and the speed-up over
in-process (the jobs are independent, so N workers should approach N times faster).

Run ``python -m pytest benchmarks/test_executor_speed.py --benchmark-columns=mean,rounds``
on an otherwise idle machine. The jobs are ``FAITHBENCH_BENCH_JOBS`` (default 4)
SST-2 retrainings on randomly masked sentences (30 %), each on the first 3,000
training sentences for 3 epochs; every executor trains them into a fresh cache, so
none loads a model another trained. ``extra_info`` records jobs, workers, seconds per
job and the executor's speed-up over the in-process time of the same jobs. Ray starts
a local cluster of ``workers`` CPUs (needs the ``ray`` extra).
"""

import os
from dataclasses import replace
from pathlib import Path

import pytest

from faithbench.benchmark.core.api import TaskOptions
from faithbench.benchmark.core.cache import weights_hash
from faithbench.benchmark.core.executor import make_executor
from faithbench.benchmark.core.retrain import TrainJob, train_job
from faithbench.metrics.masking import RandomMask
from faithbench.tasks.sentiment import TASK as SENTIMENT

SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
DATA = os.environ.get("FAITHBENCH_DATA") or (str(SHARED_DATA) if SHARED_DATA.is_dir() else None)
N_JOBS = int(os.environ.get("FAITHBENCH_BENCH_JOBS", "4"))
WORKERS = os.cpu_count() or 1

pytestmark = pytest.mark.skipif(DATA is None, reason="needs ../shared/data/sst2")

TIMES: dict[str, float] = {}
WEIGHTS: dict[str, list[str]] = {}


def _jobs() -> list[TrainJob]:
    base = TaskOptions(data_dir=DATA, variant="sentences", train_limit=3000, epochs=3)
    return [TrainJob(SENTIMENT, replace(base, seed=s, transform=RandomMask(0.3, seed=s)))
            for s in range(N_JOBS)]


def _weights(trained) -> str:
    import io

    import torch

    saved = torch.load(io.BytesIO(trained.blob), map_location="cpu", weights_only=True)
    return weights_hash(saved["state_dict"])


@pytest.mark.parametrize("name", ["in-process", "pool", "ray"])
def test_retraining_jobs(benchmark, name, tmp_path, monkeypatch):
    if name == "ray":
        pytest.importorskip("ray")
    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "cache"))
    executor = make_executor(name, workers=WORKERS)
    out = benchmark.pedantic(lambda: executor.map(train_job, _jobs()), rounds=1, iterations=1)
    assert not any(t.loaded_from_cache for t in out)  # every executor really trained
    TIMES[name] = benchmark.stats.stats.mean
    WEIGHTS[name] = [_weights(t) for t in out]
    benchmark.extra_info.update(jobs=N_JOBS, workers=1 if name == "in-process" else WORKERS,
                                s_per_job=TIMES[name] / N_JOBS)
    if "in-process" in TIMES:
        benchmark.extra_info["speedup"] = TIMES["in-process"] / TIMES[name]
        assert WEIGHTS[name] == WEIGHTS["in-process"]  # same models, whichever executor
