"""Where a plugin's ``explain`` runs: in this process, or in a worker process.

Every call, wherever it runs, goes through ``validation.call_plugin``: the model is
put in eval mode, and a plugin that changes a weight, leaves a thread running,
raises (``SystemExit`` included), or returns bad scores fails with a PluginError.

In-process code cannot survive ``os._exit``, a hang in C code that no signal
interrupts, or a thread that never ends. So outside plugins run in a worker: a
forked process that inherits the model and the loaded plugin (nothing is copied up
front; the fork shares the memory read-only until written), receives pickled
batches, and sends scores back. The parent enforces the time budget by waiting at
most that long for the answer and then killing the worker; a worker that dies
(``sys.exit``, ``os._exit``, a crash) is an EOF on the pipe, reported with its exit
code. Whatever the plugin does to its copy of the model, the parent's model is
untouched, and the worker is killed when the explainer is done, threads and all.

The reference explainers (modules under ``submissions.``) are this project's own
code and run in-process by default (``isolation="auto"``): the worker costs a fork
per explainer and a pickle round trip per batch (measured in the README).

The time budget guards against a plugin that hangs; it is not a speed contest. So it
applies to outside plugins only (a reference explainer's cost is known and measured,
and integrated gradients on a long review legitimately takes minutes), and it scales
with length: ``time_budget_s`` per example of up to ``BUDGET_TOKENS`` tokens, and as
much again per ``BUDGET_TOKENS`` tokens of a longer one (``batch_limit``).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import signal
from contextlib import contextmanager

import torch

from benchmark.core.api import Batch, ExplainableModel, Explainer, capabilities
from benchmark.core.errors import InputError, PluginError
from benchmark.core.validation import call_plugin, deadline

log = logging.getLogger(__name__)

ISOLATION = ("auto", "process", "none")
TRUSTED_PACKAGE = "submissions."  # the reference explainers
BUDGET_TOKENS = 32  # the time budget covers an example of up to this many tokens
_CLOSE_WAIT_S = 2.0


def is_reference(explainer: Explainer) -> bool:
    """True for the project's own explainers (their class lives in ``submissions``)."""
    return type(explainer).__module__.startswith(TRUSTED_PACKAGE)


def batch_limit(time_budget_s: float | None, batch: Batch) -> float | None:
    """Seconds a batch may take: ``time_budget_s`` per example, counted once per
    ``BUDGET_TOKENS`` tokens for a longer example (a 320-token review gets ten budgets),
    since an explainer's cost grows with length.

    >>> from benchmark.core.vocab import collate
    >>> batch_limit(2.0, collate([[5] * 10, [5] * 64, [5] * 80], ["a", "b", "c"]))
    11.0
    """
    if time_budget_s is None:
        return None
    units = torch.clamp(batch.lengths.double() / BUDGET_TOKENS, min=1.0).sum()
    return time_budget_s * float(units)


def over_budget(name: str, time_budget_s: float | None, batch: Batch) -> PluginError:
    limit = batch_limit(time_budget_s, batch)
    return PluginError(name, "explain", f"exceeded its time budget of {time_budget_s}s per "
                       f"example ({limit:.3g}s for a batch of {len(batch)} examples with "
                       f"{int(batch.lengths.sum())} tokens; an example of more than "
                       f"{BUDGET_TOKENS} tokens gets it once per {BUDGET_TOKENS})",
                       batch.example_ids)


class InProcess:
    """Calls the plugin here, stopped by SIGALRM after its budget (main thread only)."""

    def __init__(self, explainer: Explainer, model: ExplainableModel,
                 time_budget_s: float | None):
        self.explainer, self.model, self.time_budget_s = explainer, model, time_budget_s

    def explain(self, batch: Batch, target: torch.Tensor, *, seed: int) -> torch.Tensor:
        limit = batch_limit(self.time_budget_s, batch)
        error = None if limit is None else over_budget(self.explainer.spec.name,
                                                       self.time_budget_s, batch)
        with deadline(limit, error):
            return call_plugin(self.explainer, self.model, batch, target, seed=seed,
                               time_limit=limit)

    def close(self) -> None:
        pass


class Worker:
    """Calls the plugin in a forked worker process, started at the first call."""

    def __init__(self, explainer: Explainer, model: ExplainableModel,
                 time_budget_s: float | None):
        self.explainer, self.model, self.time_budget_s = explainer, model, time_budget_s
        self.name = explainer.spec.name
        self.process = self.conn = None

    def _start(self) -> None:
        ctx = multiprocessing.get_context("fork")
        parent, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, daemon=True, name=f"faithbench-{self.name}",
                                   args=(child, self.explainer, self.model))
        self.process.start()
        child.close()
        self.conn = parent

    def explain(self, batch: Batch, target: torch.Tensor, *, seed: int) -> torch.Tensor:
        if self.process is None or not self.process.is_alive():
            self._start()
        limit = batch_limit(self.time_budget_s, batch)
        try:
            self.conn.send_bytes(pickle.dumps((batch, target, seed)))
            if not self.conn.poll(limit):
                self.close()
                raise over_budget(self.name, self.time_budget_s, batch)
            status, payload = pickle.loads(self.conn.recv_bytes())
        except (EOFError, BrokenPipeError, ConnectionResetError):
            code = self._reap()
            raise PluginError(self.name, "explain", f"its worker process died (exit code "
                              f"{code}): the plugin exited (sys.exit, os._exit) or crashed",
                              batch.example_ids) from None
        if status == "error":
            stage, problem, ids = payload
            raise PluginError(self.name, stage, problem, ids)
        return payload

    def _reap(self) -> int | None:
        self.process.join(_CLOSE_WAIT_S)
        code = self.process.exitcode
        self.close()
        return code

    def close(self) -> None:
        """Stop the worker (and any thread the plugin left in it)."""
        if self.process is None:
            return
        try:
            if self.process.is_alive():
                try:
                    self.conn.send_bytes(pickle.dumps(None))
                except OSError:
                    pass
                self.process.join(_CLOSE_WAIT_S)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        finally:
            self.conn.close()
            self.process = self.conn = None


def _serve(conn, explainer: Explainer, model: ExplainableModel) -> None:
    """The worker's loop: one (batch, target, seed) in, one ("ok", scores) or
    ("error", (stage, problem, example ids)) out, until ``None`` arrives."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the user's Ctrl-C is for the parent
    # OpenMP's thread pool does not survive fork: a child that uses it after the parent
    # ran multi-threaded ops hangs. One thread, as PyTorch's own DataLoader workers do.
    torch.set_num_threads(1)
    while True:
        try:
            request = pickle.loads(conn.recv_bytes())
        except EOFError:
            break
        if request is None:
            break
        batch, target, seed = request
        try:
            answer = ("ok", call_plugin(explainer, model, batch, target, seed=seed,
                                        catch=BaseException))
        except PluginError as exc:
            answer = ("error", (exc.stage, exc.problem, exc.example_ids))
        conn.send_bytes(pickle.dumps(answer))
    conn.close()
    os._exit(0)  # no atexit hooks, no waiting on threads the plugin left behind


def check_isolation(isolation: str) -> None:
    if isolation not in ISOLATION:
        raise InputError(f"unknown isolation {isolation!r}; choose one of {', '.join(ISOLATION)}")


@contextmanager
def plugin_caller(explainer: Explainer, model: ExplainableModel, *,
                  time_budget_s: float | None, isolation: str = "auto"):
    """The object whose ``explain(batch, target, seed=)`` every caller uses; closed after.
    A reference explainer runs without a time budget (module docstring)."""
    check_isolation(isolation)
    missing = explainer.spec.requires - capabilities(model)
    if missing:
        raise PluginError(explainer.spec.name, "capabilities",
                          f"needs {', '.join(sorted(missing))}, which model "
                          f"{type(model).__name__} does not offer (it has: "
                          f"{', '.join(sorted(capabilities(model)))}); e.g. attention_rollout "
                          "needs every layer's attention, which only a Transformer exposes")
    in_worker = isolation == "process" or (isolation == "auto" and not is_reference(explainer))
    if in_worker and "fork" not in multiprocessing.get_all_start_methods():
        log.warning("%s: this platform cannot fork; running the plugin in-process",
                    explainer.spec.name)
        in_worker = False
    budget = None if is_reference(explainer) else time_budget_s
    caller = (Worker if in_worker else InProcess)(explainer, model, budget)
    try:
        yield caller
    finally:
        caller.close()
