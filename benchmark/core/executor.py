"""Executors run independent jobs (e.g. the retraining jobs of a ROAR sweep). Every
executor returns results in job order, so results do not depend on which one ran them.
In-process is the default; a process pool and a cluster executor plug in behind the
same ``map``."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from typing import Any

import torch


class InProcessExecutor:
    """Runs jobs one after another in this process."""

    name = "in-process"

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any]) -> list[Any]:
        return [fn(job) for job in jobs]


_FN: Callable[[Any], Any] | None = None  # the job function, inherited by forked workers


def _start_worker() -> None:
    # OpenMP's thread pool does not survive fork (benchmark.core.isolation): one thread
    torch.set_num_threads(1)


def _call(job: Any) -> Any:
    return _FN(job)


class ProcessPoolExecutor:
    """Runs jobs on a pool of forked worker processes, one torch thread each. The job
    function reaches the workers by fork, not by pickling, so closures work; jobs and
    results are pickled. Results come back in job order, and a job's exception is
    raised here."""

    name = "process-pool"

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any]) -> list[Any]:
        global _FN
        jobs = list(jobs)
        if not jobs:
            return []
        _FN = fn
        try:
            ctx = multiprocessing.get_context("fork")
            with ctx.Pool(min(self.workers, len(jobs)), initializer=_start_worker) as pool:
                return pool.map(_call, jobs, chunksize=1)
        finally:
            _FN = None
