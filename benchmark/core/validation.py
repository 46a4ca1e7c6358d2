"""Checks on explainer output. Bad output is a ``PluginError`` naming the plugin,
stage and example ids — never a silent zero.

``call_plugin`` guards every call (in-process or in a worker, see
``faithbench.benchmark.core.isolation``): eval mode, the weights unchanged, no thread left
behind, its own time recorded (callers hold it to the budget), output checked by
``check_scores``. ``run_checks`` is what
``faithbench validate`` prints: shape, finite values, determinism, the same answer
alone, in another order and in batches of another size, and time per example;
``spot_check`` re-checks a sample of a run's own batches in a fresh worker.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from faithbench.benchmark.core.api import Batch, ExplainableModel, Explainer
from faithbench.benchmark.core.cost import (
    Cost,
    CountingModel,
    Counts,
    PeakMemory,
    device_of,
    shared_engine,
)
from faithbench.benchmark.core.errors import PluginError

BATCH_TOLERANCE = 1e-4  # relative; batched LSTM kernels differ in the last bits


def check_scores(name: str, scores, batch: Batch, stage: str = "explain") -> torch.Tensor:
    """Return ``scores`` as a plain float32 (B, T) tensor with padding zeroed, or raise
    PluginError. ``batch`` must be the caller's own (its mask decides which positions
    are real); a tensor subclass is refused (its methods are the plugin's code), and
    values are checked finite both as sent and as float32 (1e300 is finite in float64)."""
    if type(scores) is not torch.Tensor:
        kind = type(scores).__name__
        raise PluginError(name, stage, f"returned {kind}, expected a torch.Tensor" + (
            " (not a subclass)" if isinstance(scores, torch.Tensor) else ""), batch.example_ids)
    want = tuple(batch.ids.shape)
    if tuple(scores.shape) != want:
        raise PluginError(name, stage, f"returned shape {tuple(scores.shape)}, expected (B, T) = {want}",
                          batch.example_ids)
    if not (scores.is_floating_point() or scores.dtype in (torch.int32, torch.int64)):
        raise PluginError(name, stage, f"returned dtype {scores.dtype}, expected a float tensor",
                          batch.example_ids)
    sent = scores.detach().cpu()
    scores = sent.float()
    mask = batch.mask.cpu()
    bad = ((~torch.isfinite(sent) | ~torch.isfinite(scores)) & mask).any(dim=1)
    if bad.any():
        ids = [batch.example_ids[i] for i in bad.nonzero().flatten().tolist()]
        raise PluginError(name, stage, "returned NaN or infinite scores (or values beyond "
                          "float32's range) at real tokens", ids)
    return scores.masked_fill(~mask, 0.0).clone()


def copy_batch(batch: Batch) -> Batch:
    """The batch with tensors of its own: a caller's batch (its mask above all, which
    decides which scores are checked) is never an explainer's to change."""
    c = lambda t: None if t is None else t.clone()
    return Batch(ids=batch.ids.clone(), mask=batch.mask.clone(),
                 example_ids=tuple(batch.example_ids),
                 segments=c(batch.segments), prefix=c(batch.prefix),
                 prefix_mask=c(batch.prefix_mask), words=c(batch.words))


class _OverBudget(BaseException):
    """Raised inside a plugin call by the alarm; BaseException so plugins cannot swallow it
    with ``except Exception``."""


@contextmanager
def deadline(seconds: float | None, error: PluginError | None):
    """Raise ``error`` if the block runs longer than ``seconds`` (SIGALRM, main thread on
    Unix); elsewhere a no-op, and ``call_plugin`` checks the elapsed time afterwards."""
    if (seconds is None or error is None or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()):
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
                seed: int, catch: type[BaseException] | tuple = (Exception, SystemExit),
                timing: dict | None = None) -> torch.Tensor:
    """One guarded plugin call; any exception in ``catch``, a changed weight, a thread
    left running, an overrun or bad output becomes a PluginError.

    The model is in eval mode before and after the call (a plugin may switch it to
    train mode for itself, never for the explainers and metrics after it). Its
    parameters and buffers are compared with a snapshot afterwards; if the plugin
    changed any, they are restored and the call fails. ``KeyboardInterrupt`` is
    left to propagate in-process (it is the user's); a worker passes ``BaseException``.
    ``timing`` receives the call's own wall and CPU seconds (not the checks around it)
    and, when it returned, its cost (``core.cost``: ``forward_rows`` and
    ``backward_rows`` counted by the ``CountingModel`` the explainer is handed,
    ``peak_mib`` and ``peak_method``).
    """
    name = explainer.spec.name
    rng = torch.Generator().manual_seed(seed)
    model_eval(model)
    before = _snapshot(model)
    threads = set(threading.enumerate())
    timing = {} if timing is None else timing
    given = copy_batch(batch)  # the explainer's to change; the checks read ``batch``
    counts = Counts()
    counted = CountingModel(model, counts)  # the model, counting its forward and backward rows
    start, cpu = time.perf_counter(), time.process_time()
    try:
        # the peak's sampling thread (where it needs one) ends with the block
        with shared_engine(model, counted) as engine, PeakMemory(device_of(model)) as peak:
            counts.watch(engine)
            scores = explainer.explain(counted, given, target.clone(), rng=rng)
        timing.update(wall_s=time.perf_counter() - start, cpu_s=time.process_time() - cpu)
        timing.update(Cost(counts.forward_rows, counts.backward_rows, peak.mib,
                           peak.method, counts.requested_rows).as_dict())
    except (PluginError, _OverBudget):
        timing.update(wall_s=time.perf_counter() - start, cpu_s=time.process_time() - cpu)
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
    return check_scores(name, scores, batch)


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


def alone(batch: Batch, row: int) -> Batch:
    """Row ``row`` as a batch of one, cut to its own length (no padding at all)."""
    single = batch.select([row])
    width = int(single.lengths.max())
    cut = lambda t: None if t is None else t[:, :width]
    return single.replace(ids=cut(single.ids), mask=cut(single.mask),
                          segments=cut(single.segments), words=cut(single.words))


def contexts(batch: Batch, seed: int) -> list[tuple[str, list[int]]]:
    """Other batches the rows of ``batch`` are explained in, to compare with the first
    answer: all rows in a shuffled order, then chunks of three in reverse order (each row
    at another position, beside other rows, with other padding widths)."""
    n = len(batch)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    if n > 1 and order == list(range(n)):
        order = order[::-1]
    backwards = list(range(n))[::-1]
    chunks = [backwards[i:i + 3] for i in range(0, n, 3)]
    return [("shuffled", order)] + [("batch of 3", c) for c in chunks if len(c) < n]


def compare_rows(name: str, stage: str, want: torch.Tensor, batch: Batch, rows: list[int],
                 got: torch.Tensor, where: str) -> None:
    """``got`` (the rows ``rows`` of ``batch`` explained elsewhere) must equal ``want``
    (the first answer for the whole batch) within ``BATCH_TOLERANCE``."""
    for i, row in enumerate(rows):
        n = int(batch.lengths[row])
        a, b = want[row, :n], got[i, :n]
        if not torch.allclose(b, a, rtol=BATCH_TOLERANCE, atol=1e-5):
            diff = (a - b).abs().max().item()
            raise PluginError(name, stage, f"example {batch.example_ids[row]}'s scores differ by "
                              f"up to {diff:.3g} {where} (an explainer must be a deterministic "
                              "function of model, example and seed: randomness only from "
                              "api.example_generator, one generator per example, not noise "
                              "drawn for the whole batch (api.noisy_gradients draws input "
                              "noise per example; see submissions/TEMPLATE.py); no dependence "
                              "on the other rows, the position or the padding)",
                              (batch.example_ids[row],))


def check_invariance(name: str, caller, batch: Batch, target, want: torch.Tensor, *,
                     seed: int, singles: list[int], stage: str, order_seed: int = 0) -> str:
    """Explain ``batch``'s rows again in other batches (``contexts``) and the rows
    ``singles`` alone, with ``caller``; raise PluginError at the first disagreement."""
    for label, rows in contexts(batch, order_seed):
        sub = batch.select(rows)
        width = int(sub.lengths.max())
        sub = alone(sub, 0) if len(rows) == 1 else sub.replace(
            **{k: getattr(sub, k)[:, :width] for k in ("ids", "mask", "segments", "words")
               if getattr(sub, k) is not None})
        got = caller.explain(sub, target[rows], seed=seed)
        compare_rows(name, stage, want, batch, rows, got, f"in a {label} ({len(rows)} rows)")
    for row in singles:
        got = caller.explain(alone(batch, row), target[row : row + 1], seed=seed)
        compare_rows(name, stage, want, batch, [row], got, "alone")
    return f"{len(batch)} examples agree in a shuffled batch and in batches of 3; " \
           f"{len(singles)} alone"


def run_checks(explainer: Explainer, caller, batch: Batch, target, *,
               time_budget_s: float = 1.0, fresh=None) -> list[CheckResult]:
    """All plugin checks on one batch; every check runs even if an earlier one fails.

    ``caller`` is the ``faithbench.benchmark.core.isolation`` object that runs the explainer, so
    every call here is under the same time budget (and isolation) as in a run;
    ``fresh`` (a context manager factory for another caller, default ``caller``) runs
    the invariance check in a new worker that has not seen the first calls. Every
    explainer is checked for determinism and for the same answer alone, in another
    order and in batches of another size (inseq dropped a method that failed this).
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

    def needs_first():
        if first.get("scores") is None:
            raise AssertionError("no output to compare (shape check failed)")
        return first["scores"]

    def determinism():
        a = needs_first()
        b = caller.explain(batch, target, seed=0)
        compare_rows(spec.name, "determinism", a, batch, list(range(len(batch))), b,
                     "on a second call with the same seed")
        return "same output on a second call"

    attempt("determinism", determinism)

    def batch_invariance():
        want = needs_first()
        with (fresh() if fresh is not None else _same(caller)) as other:
            return check_invariance(spec.name, other, batch, target, want, seed=0,
                                    singles=list(range(len(batch))), stage="alone_vs_batch")

    attempt("alone_vs_batch", batch_invariance)

    def timing():
        needs_first()  # a call that overran once is not timed again
        start = time.perf_counter()
        caller.explain(batch, target, seed=0)
        per = (time.perf_counter() - start) / len(batch)
        if per > time_budget_s:
            raise AssertionError(f"{per * 1000:.1f} ms per example, over the {time_budget_s}s budget")
        return f"{per * 1000:.2f} ms per example"

    attempt("time_per_example", timing)
    return results


@contextmanager
def _same(caller):
    yield caller


def spot_check(name: str, fresh, batches: list[Batch], targets: list, scores: list, *,
               seed: int, sample_seed: int, n_batches: int = 2, n_alone: int = 2) -> int:
    """Re-explain a seeded sample of a run's batches in a new worker (``fresh()``): each
    in another order and in batches of 3, and ``n_alone`` of its rows alone; a PluginError
    (stage ``spot_check``) at the first row that differs from ``scores`` (the run's
    (B, T) answer per batch, explained with ``seed``; ``sample_seed`` picks the batches). A plugin that behaves on ``validate``'s examples and not
    in the run, or whose rows depend on their batch, fails here. Returns rows checked."""
    if not batches:
        return 0
    g = torch.Generator().manual_seed(sample_seed)
    picked = torch.randperm(len(batches), generator=g)[:n_batches].tolist()
    checked = 0
    with fresh() as caller:
        for i in sorted(picked):
            batch = batches[i]
            singles = torch.randperm(len(batch), generator=g)[:n_alone].tolist()
            check_invariance(name, caller, batch, targets[i], scores[i], seed=seed,
                             singles=singles, stage="spot_check", order_seed=sample_seed + i)
            checked += len(batch)
    return checked


def _check_spec(explainer) -> str:
    spec = getattr(explainer, "spec", None)
    if spec is None or not hasattr(spec, "id"):
        raise AssertionError("the EXPLAINER object has no `spec` (an ExplainerSpec)")
    if not callable(getattr(explainer, "explain", None)):
        raise AssertionError("the EXPLAINER object has no callable `explain`")
    return spec.id
