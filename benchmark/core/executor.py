"""Executors run independent jobs (e.g. the retraining jobs of a ROAR sweep). Every
executor returns results in job order and runs each job at one torch thread (the
thread count changes float summation order, so weights would depend on it): results
do not depend on which executor ran them. In-process is the default; a process pool
uses the cores of one machine and Ray a cluster, behind the same ``map``."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent import futures
from typing import Any, Protocol

import torch

from faithbench.benchmark.core.confine import die_with_parent
from faithbench.benchmark.core.errors import InputError

EXECUTORS = ("in-process", "pool", "ray")


def one_thread(fn: Callable[[Any], Any], job: Any) -> Any:
    """``fn(job)`` at one torch thread, the thread count restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn(job)
    finally:
        torch.set_num_threads(before)


Callback = Callable[[int, Any], None] | None


class Executor(Protocol):
    """What every executor offers: a name for logs and an ordered ``map``."""

    name: str

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any], on_done: Callback = None
            ) -> list[Any]: ...


class InProcessExecutor:
    """Runs jobs one after another in this process."""

    name = "in-process"

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any], on_done: Callback = None
            ) -> list[Any]:
        """Every ``fn(job)``, in job order; ``on_done(i, result)`` as each one finishes
        (in finishing order), so a caller can store results before the rest are done."""
        out = []
        for i, job in enumerate(jobs):
            out.append(one_thread(fn, job))
            if on_done is not None:
                on_done(i, out[-1])
        return out


_FN: Callable[[Any], Any] | None = None  # the job function, inherited by forked workers


def _start_worker(parent_pid: int) -> None:
    # OpenMP's thread pool does not survive fork (faithbench.benchmark.core.isolation): one thread
    torch.set_num_threads(1)
    die_with_parent(parent_pid)  # a killed driver takes its workers (and their jobs) along


def _call(job: Any) -> Any:
    assert _FN is not None, "a pool worker runs only after _FN is set"
    return _FN(job)


class ProcessPoolExecutor:
    """Runs jobs on forked worker processes, one torch thread each. The job function
    reaches the workers by fork, not by pickling, so closures work; jobs and results
    are pickled. The workers are not daemons, so a job may start processes of its own
    (an isolated explainer plugin). A job's exception is raised here."""

    name = "pool"

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any], on_done: Callback = None
            ) -> list[Any]:
        global _FN
        jobs = list(jobs)
        if not jobs:
            return []
        _FN = fn  # set before the pool forks its workers
        try:
            ctx = multiprocessing.get_context("fork")
            with futures.ProcessPoolExecutor(min(self.workers, len(jobs)), mp_context=ctx,
                                             initializer=_start_worker,
                                             initargs=(os.getpid(),)) as pool:
                pending = {pool.submit(_call, job): i for i, job in enumerate(jobs)}
                return _collect(pending, futures.as_completed(pending), on_done, len(jobs))
        finally:
            _FN = None


def _collect(index_of: dict, finished: Iterable, on_done: Callback, n: int) -> list[Any]:
    """Results in job order from futures in finishing order (the first error raised)."""
    out: list[Any] = [None] * n
    for future in finished:
        i = index_of[future]
        out[i] = future.result()
        if on_done is not None:
            on_done(i, out[i])
    return out


def _ray_job(fn: Callable[[Any], Any], job: Any) -> Any:
    return one_thread(fn, job)


class RayExecutor:
    """Runs each job as a Ray task of one CPU on the cluster at ``address`` (``None``:
    a new local cluster of ``workers`` CPUs, started here and stopped after ``map``).
    The job function and jobs are pickled (cloudpickle, so closures work); every node
    needs this project installed and the data directory at the same path. A job's
    exception is raised here (Ray's error type subclasses the job's own)."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None,
                 gpus: float = 0):
        self.address, self.workers, self.gpus = address, workers, gpus

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any], on_done: Callback = None
            ) -> list[Any]:
        import ray  # optional: pip install -e ".[ray]"

        jobs = list(jobs)
        if not jobs:
            return []
        connect = not ray.is_initialized()
        if connect:
            ray.init(address=self.address, num_cpus=None if self.address else self.workers,
                     include_dashboard=False, log_to_driver=False, configure_logging=False)
        try:
            # a job on a GPU asks Ray for one, which sets the task's CUDA_VISIBLE_DEVICES
            # to it (so it is the job's cuda:0)
            remote = ray.remote(num_cpus=1, num_gpus=self.gpus, max_retries=0)(_ray_job)
            fn_ref = ray.put(fn)
            refs = [remote.remote(fn_ref, job) for job in jobs]
            index_of = {ref: i for i, ref in enumerate(refs)}
            out: list[Any] = [None] * len(jobs)
            waiting = list(refs)
            while waiting:
                [ready], waiting = ray.wait(waiting, num_returns=1)
                i = index_of[ready]
                out[i] = ray.get(ready)
                if on_done is not None:
                    on_done(i, out[i])
            return out
        finally:
            if connect:
                ray.shutdown()


def make_executor(name: str = "in-process", *, workers: int | None = None,
                  address: str | None = None, device: str = "cpu"):
    """The executor ``name`` (one of ``EXECUTORS``) for jobs whose models run on
    ``device``: the pool forks, and a forked process cannot use CUDA once its parent
    has, so it takes CPU jobs only; Ray gives each GPU job a GPU of its own."""
    kind = torch.device(device).type
    if name == "in-process":
        return InProcessExecutor()
    if name == "pool":
        if kind != "cpu":
            raise InputError(f"--executor pool forks its workers, and a forked process "
                             f"cannot use {kind.upper()} once its parent has: with --device "
                             f"{device} run in-process (one GPU) or on Ray (--executor ray, a "
                             "GPU per job); or give --device cpu to use the pool")
        return ProcessPoolExecutor(workers)
    if name == "ray":
        if kind == "mps" or torch.device(device).index not in (None, 0):
            raise InputError(f"--executor ray with --device {device}: Ray assigns each job "
                             "its GPU; give --device cuda (or cpu)")
        return RayExecutor(address, workers, gpus=1 if kind == "cuda" else 0)
    raise InputError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
