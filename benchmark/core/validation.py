"""Checks on explainer output. Bad output is a ``PluginError`` naming the plugin,
stage and example ids — never a silent zero.

``call_plugin`` guards every call (in-process or in a worker, see
``benchmark.core.isolation``): eval mode, the weights unchanged, no thread left
behind, within budget, output checked by ``check_scores``. ``run_checks`` is what
``faithbench validate`` prints: shape, finite values, determinism (if declared),
the same answer alone and in a batch (inseq dropped a method that failed this),
and time per example.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from benchmark.core.api import Batch, ExplainableModel, Explainer
from benchmark.core.errors import PluginError

BATCH_TOLERANCE = 1e-4  # relative; batched LSTM kernels differ in the last bits


def check_scores(name: str, scores, batch: Batch, stage: str = "explain") -> torch.Tensor:
    """Return ``scores`` as float32 (B, T) with padding zeroed, or raise PluginError."""
    if not isinstance(scores, torch.Tensor):
        raise PluginError(name, stage, f"returned {type(scores).__name__}, expected a torch.Tensor",
                          batch.example_ids)
    want = tuple(batch.ids.shape)
    if tuple(scores.shape) != want:
        raise PluginError(name, stage, f"returned shape {tuple(scores.shape)}, expected (B, T) = {want}",
                          batch.example_ids)
    if not (scores.is_floating_point() or scores.dtype in (torch.int32, torch.int64)):
        raise PluginError(name, stage, f"returned dtype {scores.dtype}, expected a float tensor",
                          batch.example_ids)
    scores = scores.detach().float().cpu()
    bad = (~torch.isfinite(scores) & batch.mask.cpu()).any(dim=1)
    if bad.any():
        ids = [batch.example_ids[i] for i in bad.nonzero().flatten().tolist()]
        raise PluginError(name, stage, "returned NaN or infinite scores at real tokens", ids)
    return scores.masked_fill(~batch.mask.cpu(), 0.0)


class _OverBudget(BaseException):
    """Raised inside a plugin call by the alarm; BaseException so plugins cannot swallow it
    with ``except Exception``."""


def over_budget(name: str, time_budget_s: float | None, batch: Batch) -> PluginError:
    limit = None if time_budget_s is None else time_budget_s * len(batch)
    return PluginError(name, "explain", f"exceeded its time budget of {time_budget_s}s per "
                       f"example ({limit}s for a batch of {len(batch)})", batch.example_ids)


@contextmanager
def deadline(seconds: float | None, error: PluginError):
    """Raise ``error`` if the block runs longer than ``seconds`` (SIGALRM, main thread on
    Unix); elsewhere a no-op, and ``call_plugin`` checks the elapsed time afterwards."""
    usable = (seconds is not None and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def alarm(signum, frame):
        raise _OverBudget()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _OverBudget:
        raise error from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def call_plugin(explainer: Explainer, model: ExplainableModel, batch: Batch, target, *,
                seed: int, time_limit: float | None = None,
                catch: type[BaseException] | tuple = (Exception, SystemExit)) -> torch.Tensor:
    """One guarded plugin call; any exception in ``catch``, a changed weight, a thread
    left running, an overrun or bad output becomes a PluginError.

    The model is in eval mode before and after the call (a plugin may switch it to
    train mode for itself, never for the explainers and metrics after it). Its
    parameters and buffers are compared with a snapshot afterwards; if the plugin
    changed any, they are restored and the call fails. ``KeyboardInterrupt`` is
    left to propagate in-process (it is the user's); a worker passes ``BaseException``.
    """
    name = explainer.spec.name
    rng = torch.Generator().manual_seed(seed)
    model_eval(model)
    before = _snapshot(model)
    threads = set(threading.enumerate())
    start = time.perf_counter()
    try:
        scores = explainer.explain(model, batch, target, rng=rng)
    except (PluginError, _OverBudget):
        raise
    except catch as exc:  # a plugin may raise anything; report it, do not crash the run
        detail = f": {exc}" if str(exc) else ""
        raise PluginError(name, "explain", f"raised {type(exc).__name__}{detail}",
                          batch.example_ids) from None
    finally:
        model_eval(model)
        changed = _restore_changed(model, before)
    if changed:
        shown = ", ".join(changed[:3]) + (f" (+{len(changed) - 3} more)" if len(changed) > 3 else "")
        raise PluginError(name, "explain", f"changed the model's parameters ({shown}); they "
                          "were restored and the plugin's results are discarded", batch.example_ids)
    left = [t.name for t in threading.enumerate() if t not in threads and t.is_alive()]
    if left:
        raise PluginError(name, "explain", f"left {len(left)} thread(s) running "
                          f"({', '.join(left[:3])})", batch.example_ids)
    if time_limit is not None and time.perf_counter() - start > time_limit:
        raise over_budget(name, time_limit / max(len(batch), 1), batch)
    return check_scores(name, scores, batch)


def explain_checked(explainer: Explainer, model: ExplainableModel, batch: Batch, target, *,
                    seed: int, time_budget_s: float | None = None) -> torch.Tensor:
    """``call_plugin`` in this process under a time budget per example (B times it per call)."""
    limit = None if time_budget_s is None else time_budget_s * len(batch)
    with deadline(limit, over_budget(explainer.spec.name, time_budget_s, batch)):
        return call_plugin(explainer, model, batch, target, seed=seed, time_limit=limit)


def model_eval(model) -> None:
    """Eval mode (no dropout) for a torch model; other model objects are left alone."""
    if isinstance(model, torch.nn.Module):
        model.eval()


def _snapshot(model) -> dict[str, torch.Tensor]:
    if not isinstance(model, torch.nn.Module):
        return {}
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _restore_changed(model, before: dict[str, torch.Tensor]) -> list[str]:
    """Names of the tensors that differ from ``before`` (all restored if any does)."""
    if not before:
        return []
    now = model.state_dict()
    changed = [k for k, v in before.items()
               if k not in now or now[k].shape != v.shape or not torch.equal(now[k], v)]
    if changed:
        model.load_state_dict(before)
    return changed


@dataclass(frozen=True)
class CheckResult:
    check: str
    passed: bool
    detail: str


def run_checks(explainer: Explainer, caller, batch: Batch, target, *,
               time_budget_s: float = 1.0) -> list[CheckResult]:
    """All plugin checks on one batch; every check runs even if an earlier one fails.

    ``caller`` is the ``benchmark.core.isolation`` object that runs the plugin, so
    every call here is under the same time budget (and isolation) as in a run.
    """
    results: list[CheckResult] = []

    def attempt(check: str, fn):
        try:
            detail = fn()
            results.append(CheckResult(check, True, detail or "ok"))
        except Exception as exc:  # noqa: BLE001 — report the failure as this check's result
            results.append(CheckResult(check, False, str(exc)))

    spec = getattr(explainer, "spec", None)
    attempt("spec", lambda: _check_spec(explainer))
    if spec is None:
        return results
    first: dict[str, torch.Tensor] = {}

    def shape_and_finite():
        first["scores"] = caller.explain(batch, target, seed=0)
        return f"(B, T) = {tuple(batch.ids.shape)}, all finite"

    attempt("shape_and_finite", shape_and_finite)

    def determinism():
        if not spec.deterministic:
            return "skipped: spec declares deterministic=False"
        a = first.get("scores")
        if a is None:
            raise AssertionError("no output to compare (shape check failed)")
        b = caller.explain(batch, target, seed=0)
        if not torch.allclose(a, b, rtol=BATCH_TOLERANCE, atol=1e-6):
            diff = (a - b).abs().max().item()
            raise AssertionError(f"two calls with the same seed differ by up to {diff:.3g}")
        return "same output on a second call"

    attempt("determinism", determinism)

    def alone_vs_batch():
        if not spec.deterministic:
            return "skipped: spec declares deterministic=False"
        together = first.get("scores")
        if together is None:
            raise AssertionError("no output to compare (shape check failed)")
        for row in range(len(batch)):
            single = batch.select([row])
            width = int(single.lengths.max())
            single = single.replace(ids=single.ids[:, :width], mask=single.mask[:, :width],
                                    segments=None if single.segments is None else single.segments[:, :width],
                                    words=None if single.words is None else single.words[:, :width])
            alone = caller.explain(single, target[row : row + 1], seed=0)
            ref = together[row : row + 1, :width]
            if not torch.allclose(alone, ref, rtol=BATCH_TOLERANCE, atol=1e-5):
                diff = (alone - ref).abs().max().item()
                raise AssertionError(
                    f"example {batch.example_ids[row]} scores differ alone vs in a batch by {diff:.3g}")
        return f"{len(batch)} examples agree alone and batched"

    attempt("alone_vs_batch", alone_vs_batch)

    def timing():
        if first.get("scores") is None:  # a call that overran once is not timed again
            raise AssertionError("no output to time (shape check failed)")
        start = time.perf_counter()
        caller.explain(batch, target, seed=0)
        per = (time.perf_counter() - start) / len(batch)
        if per > time_budget_s:
            raise AssertionError(f"{per * 1000:.1f} ms per example, over the {time_budget_s}s budget")
        return f"{per * 1000:.2f} ms per example"

    attempt("time_per_example", timing)
    return results


def _check_spec(explainer) -> str:
    spec = getattr(explainer, "spec", None)
    if spec is None or not hasattr(spec, "id"):
        raise AssertionError("the EXPLAINER object has no `spec` (an ExplainerSpec)")
    if not callable(getattr(explainer, "explain", None)):
        raise AssertionError("the EXPLAINER object has no callable `explain`")
    return spec.id
