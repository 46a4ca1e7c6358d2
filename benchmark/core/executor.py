"""Executors run independent jobs (e.g. the retraining jobs of a ROAR sweep). Every
executor returns results in job order and runs each job at one torch thread (the
thread count changes float summation order, so weights would depend on it): results
do not depend on which executor ran them. In-process is the default; a process pool
uses the cores of one machine and Ray a cluster, behind the same ``map``."""

from __future__ import annotations

import importlib
import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent import futures
from typing import Any, Protocol

import torch
from threadpoolctl import threadpool_limits

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
# ``then(i, result)``: jobs that job i's result makes possible, run by the same ``map``
# (numbered after every job given or added before them), so no worker waits for a round
FollowUps = Callable[[int, Any], Iterable[Any]] | None


class Executor(Protocol):
    """What every executor offers: a name for logs and an ordered ``map``."""

    name: str

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any], on_done: Callback = None,
            *, then: FollowUps = None) -> list[Any]: ...


class InProcessExecutor:
    """Runs jobs one after another in this process."""

    name = "in-process"

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any], on_done: Callback = None,
            *, then: FollowUps = None) -> list[Any]:
        """Every ``fn(job)``, in job order; ``on_done(i, result)`` as each one finishes
        (in finishing order), so a caller can store results before the rest are done;
        ``then(i, result)``'s jobs are appended and run too."""
        jobs, out = list(jobs), []
        for i, job in enumerate(jobs):  # grows while it runs: follow-ups are appended
            out.append(one_thread(fn, job))
            if on_done is not None:
                on_done(i, out[-1])
            if then is not None:
                jobs.extend(then(i, out[-1]))
        return out


_FN: Callable[[Any], Any] | None = None  # the job function, inherited by forked workers
# libraries that some explainers and metrics import on first use (kept out of every
# command's start-up), imported before a pool forks so that its workers inherit them
# instead of each importing them again (captum brings matplotlib: 0.9 s a worker)
INHERITED_IMPORTS = ("captum.attr", "scipy.stats")


def _start_worker(parent_pid: int) -> None:
    # OpenMP's thread pool does not survive fork (faithbench.benchmark.core.isolation): one
    # thread; numpy's and scipy's BLAS too, whose default (one thread per core) in every
    # worker oversubscribes the cores (LIME's and KernelSHAP's fits ran 1.5-2x slower)
    torch.set_num_threads(1)
    threadpool_limits(1)
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

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any], on_done: Callback = None,
            *, then: FollowUps = None) -> list[Any]:
        global _FN
        jobs = list(jobs)
        if not jobs:
            return []
        _FN = fn  # set before the pool forks its workers
        for name in INHERITED_IMPORTS:
            importlib.import_module(name)
        try:
            ctx = multiprocessing.get_context("fork")
            size = self.workers if then is not None else min(self.workers, len(jobs))
            with futures.ProcessPoolExecutor(size, mp_context=ctx, initializer=_start_worker,
                                             initargs=(os.getpid(),)) as pool:
                return _collect(jobs, lambda job: pool.submit(_call, job), _finished, on_done,
                                then)
        finally:
            _FN = None


def _finished(running: set) -> tuple[list, set]:
    done, left = futures.wait(running, return_when=futures.FIRST_COMPLETED)
    return list(done), left


def _collect(jobs: list, submit: Callable[[Any], Any], wait, on_done: Callback,
             then: FollowUps, result: Callable[[Any], Any] = lambda f: f.result()) -> list[Any]:
    """Results in job order (the first error raised): every job submitted, ``on_done``
    called as each finishes, and its follow-ups (``then``) submitted at once. ``wait``
    takes the running handles and returns (finished, still running)."""
    index_of = {submit(job): i for i, job in enumerate(jobs)}
    out: list[Any] = [None] * len(jobs)
    running = set(index_of)
    while running:
        finished, running = wait(running)
        for handle in finished:
            i = index_of[handle]
            out[i] = result(handle)
            if on_done is not None:
                on_done(i, out[i])
            for job in then(i, out[i]) if then is not None else ():
                index_of[new := submit(job)] = len(out)
                out.append(None)
                running = {*running, new}
    return out


def _ray_job(fn: Callable[[Any], Any], job: Any) -> Any:
    threadpool_limits(1)  # a task has one CPU (see _start_worker)
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

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any], on_done: Callback = None,
            *, then: FollowUps = None) -> list[Any]:
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

            def wait(running: set) -> tuple[list, set]:
                ready, _ = ray.wait(list(running), num_returns=1)
                return ready, running - set(ready)

            return _collect(jobs, lambda job: remote.remote(fn_ref, job), wait, on_done, then,
                            result=ray.get)
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
