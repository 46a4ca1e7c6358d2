"""What explaining costs: rows through the model, forward and backward, and memory.

Every explain call (``validation.call_plugin``: in this process for the reference
explainers, in the worker for a plugin) hands the explainer a ``CountingModel``, a
thin proxy of the model that counts

- **forward rows**: the rows (examples, or noisy/scaled/erased variants of them) of
  every call of a forward method of the model surface (``FORWARD_METHODS``:
  ``logits``, ``logits_from_embeddings``, ``lrp_logits``, ``attention``,
  ``attention_maps``, ``attention_vectors``, ``attention_leaf``,
  ``logits_from_attention``, ``value_zeroing_maps``, and ``forward`` / calling the
  model), and the rows the perturbation engine shared with the metrics
  (``perturb.engine_for``) forwards on the explainer's behalf (a variant some metric or
  explainer forwarded before is answered from memory and costs nothing). ``embed`` is a
  table lookup, not a pass through the model, and is not counted; nor is
  ``retokenize``.
- **backward rows**: the rows of such a forward whose output autograd later
  differentiates through: a hook on the output's ``grad_fn`` adds the forward's rows
  each time a backward pass (``torch.autograd.grad`` or ``.backward()``) runs through
  it. A forward taken with gradients on but never differentiated counts no backward.

**Forward-equivalents** = forward rows + ``BACKWARD_COST`` (2) × backward rows: the
usual convention that a backward pass costs about two forward passes (per layer, one
product for the gradient wrt its input and one for that wrt its weights; an explainer
that needs the input's gradient only may pay less, so it is a convention, not a
measurement). Per example: divide by the number of examples explained.

**Peak memory** (``PeakMemory``), the increase during explaining above the memory in
use at its start, in MiB, and how it was measured (``PEAK_METHODS``):

- ``cuda_max_allocated``: the model is on a CUDA device: ``torch.cuda.max_memory_allocated``
  after ``reset_peak_memory_stats``, less the memory allocated at the start;
- ``rss_hwm``: on Linux, the kernel's own peak of the resident set (``VmHWM`` in
  ``/proc/self/status``), reset at the start by writing 5 to ``/proc/self/clear_refs``:
  exact, no sampling (it resets the process's peak-RSS counter, which ``getrusage``'s
  ``ru_maxrss`` also reports; faithbench reads neither elsewhere);
- ``rss_sampled``: where ``clear_refs`` cannot be written, a background thread reads the
  resident set (``/proc/self/statm``) every ``SAMPLE_S`` seconds and keeps the highest,
  so a peak shorter than that may be missed;
- None: no ``/proc`` (not Linux): no peak is reported.

The resident set counts what the process holds in memory: memory it freed earlier
but kept (the allocator's caches) can be reused without raising it, so the increase
is a lower bound of what the explainer allocated, and a fair one between explainers
run by the same process on the same model. A plugin's counts and peak are measured
in its worker (whose code the plugin could change) and sent back with its scores,
like its time.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import torch

from faithbench.benchmark.core.proxy import ModelProxy
from faithbench.benchmark.core.records import BACKWARD_COST

FORWARD_METHODS = frozenset({
    "logits", "logits_from_embeddings", "lrp_logits", "attention", "attention_maps", "forward",
    # the attention explainers' surface (``ATTENTION_VECTORS``, ``ATTENTION_GRADIENT``,
    # ``VALUE_ZEROING``): each runs the model over its rows
    "attention_vectors", "attention_leaf", "logits_from_attention", "value_zeroing_maps"})
PEAK_METHODS = ("cuda_max_allocated", "rss_hwm", "rss_sampled")
SAMPLE_S = 0.002  # the sampling thread's interval (``rss_sampled``)
_MIB = 2 ** 20

__all__ = ["BACKWARD_COST", "FORWARD_METHODS", "PEAK_METHODS", "UNKNOWN", "Cost",
           "CountingModel", "Counts", "PeakMemory", "device_of", "shared_engine"]


@dataclass(frozen=True)
class Cost:
    """What explaining some examples cost: rows forwarded and backwarded through the
    model, and the peak memory increase (MiB) with the method that measured it. None:
    not known (e.g. an explanation cached before faithbench counted)."""

    forward_rows: int | None = None
    backward_rows: int | None = None
    peak_mib: float | None = None
    peak_method: str | None = None
    # rows asked of the model: those forwarded, and those the engine shared with the
    # metrics answered from memory (forwarded earlier for a metric or another explainer)
    requested_rows: int | None = None

    FIELDS: ClassVar[tuple[str, ...]] = ("forward_rows", "backward_rows", "peak_mib",
                                         "peak_method", "requested_rows")

    @property
    def forward_equivalents(self) -> int | None:
        """forward rows + ``BACKWARD_COST`` × backward rows (None if either is unknown)."""
        if self.forward_rows is None or self.backward_rows is None:
            return None
        return self.forward_rows + BACKWARD_COST * self.backward_rows

    @classmethod
    def total(cls, parts: list[Cost]) -> Cost:
        """The cost of all ``parts`` (e.g. an explanation's batches): rows summed, the
        largest peak with its method; a field is unknown if it is unknown in any part."""
        def summed(key: str) -> int | None:
            values = [getattr(p, key) for p in parts]
            return None if None in values else sum(values)

        peak: float | None = None
        method: str | None = None
        if parts and all(p.peak_mib is not None for p in parts):
            top = max(parts, key=lambda p: p.peak_mib or 0.0)
            peak, method = top.peak_mib, top.peak_method
        return cls(summed("forward_rows"), summed("backward_rows"), peak, method,
                   summed("requested_rows"))

    def as_dict(self) -> dict:
        """The known fields (a cache line or a worker's answer carries these)."""
        return {k: getattr(self, k) for k in self.FIELDS if getattr(self, k) is not None}

    @classmethod
    def from_dict(cls, data: Any) -> Cost:
        """The fields of ``data`` (a cache line, or a worker's answer, which is not
        trusted): a value of the wrong type or range is unknown (None)."""
        data = data if isinstance(data, dict) else {}
        rows = lambda v: v if type(v) is int and v >= 0 else None
        peak = data.get("peak_mib")
        peak = float(peak) if (type(peak) in (int, float) and math.isfinite(peak)
                               and peak >= 0) else None
        method = data.get("peak_method")
        if peak is None or method not in PEAK_METHODS:  # a peak says how it was measured
            peak, method = None, None
        return cls(rows(data.get("forward_rows")), rows(data.get("backward_rows")), peak, method,
                   rows(data.get("requested_rows")))


UNKNOWN = Cost()  # nothing known (e.g. an explanation cached before faithbench counted)


class Counts:
    """Rows counted by a ``CountingModel`` (the proxy adds to ``proxied_rows`` and
    ``backward_rows``), plus those that the perturbation engine shared with the metrics
    (``shared_engine``) forwards through the model itself meanwhile (``watch``)."""

    __slots__ = ("_engine", "_engine_asked", "_engine_start", "backward_rows", "proxied_rows")

    def __init__(self) -> None:
        self.proxied_rows = 0
        self.backward_rows = 0
        self.watch(None)

    def watch(self, engine: Any) -> None:
        """Count, from now on, the rows ``engine`` forwards (None: no engine)."""
        self._engine = engine
        self._engine_start = _engine_rows(engine)
        self._engine_asked = _engine_rows(engine, "rows_requested")

    @property
    def forward_rows(self) -> int:
        """Rows through the proxy, and through the shared engine since ``__init__``."""
        return self.proxied_rows + _engine_rows(self._engine) - self._engine_start

    @property
    def requested_rows(self) -> int:
        """Rows through the proxy, and every row asked of the shared engine since
        ``watch`` (forwarded, or answered from memory)."""
        return (self.proxied_rows + _engine_rows(self._engine, "rows_requested")
                - self._engine_asked)


def _engine_rows(engine, what: str = "rows_forwarded") -> int:
    rows = getattr(engine, what, 0) if engine is not None else 0
    return rows if type(rows) is int else 0


@contextmanager
def shared_engine(model: Any, proxy: CountingModel) -> Iterator[Any]:
    """The perturbation engine registered for ``model`` (``perturb.share_engine``: an
    evaluation session shares its metrics' engine), or None; meanwhile ``proxy`` reaches
    the same engine through ``perturb.engine_for``. An engine made for the proxy itself
    (none was registered; it forwards through the proxy, so its rows count there) is
    dropped afterwards: each call has its own proxy."""
    from faithbench.benchmark.core import perturb

    engine = perturb.registered_engine(model)
    if engine is not None:
        perturb.share_engine(proxy, engine)
    try:
        yield engine
    finally:
        perturb.forget_engine(proxy)


class CountingModel(ModelProxy):
    """The model as an explainer sees it: every attribute is the model's own
    (``ModelProxy``, so ``capabilities(model)``, ``pad_id``, ``max_rows_per_pass``,
    ``retokenize``, ``eval()``, ``parameters()`` ... are as before, and
    ``isinstance(model, torch.nn.Module)`` still holds), except that the forward
    methods (``FORWARD_METHODS``) count their rows into ``counts`` and hook their output
    to count the backward passes through it."""

    __slots__ = ("_counts",)

    def __init__(self, model: Any, counts: Counts):
        super().__init__(model)
        object.__setattr__(self, "_counts", counts)

    def _wrapped(self, name: str, value: Any) -> Any:
        if name in FORWARD_METHODS and callable(value):
            return _counting(value, self._counts)
        return value

    def __call__(self, *args, **kwargs):
        return _counting(self._inner, self._counts)(*args, **kwargs)

    def __reduce_ex__(self, protocol):  # pickled or copied, it is the model (uncounted)
        return self._inner.__reduce_ex__(protocol)


def _counting(method, counts: Counts):
    def counted(*args, **kwargs):
        out = method(*args, **kwargs)
        rows = _rows(args, kwargs, out)
        counts.proxied_rows += rows
        watched = _differentiable(out)
        if watched is not None:
            def backward(grad_outputs):
                counts.backward_rows += rows

            watched.grad_fn.register_prehook(backward)
        return out

    # name, doc and signature of the method (not a module's __dict__: updated=())
    return functools.update_wrapper(counted, method, updated=())


def _rows(args, kwargs, out) -> int:
    """Rows of one forward call: of its input (embeddings (R, T, D), or a batch), else
    of its output's first tensor."""
    for given in (*args[:1], kwargs.get("embeds"), kwargs.get("batch")):
        if isinstance(given, torch.Tensor) and given.dim() >= 1:
            return int(given.shape[0])
        ids = getattr(given, "ids", None)
        if isinstance(ids, torch.Tensor) and ids.dim() >= 1:
            return int(ids.shape[0])
    first = _tensors(out)
    return int(first[0].shape[0]) if first and first[0].dim() >= 1 else 1


def _tensors(out) -> list[torch.Tensor]:
    items = out if isinstance(out, (tuple, list)) else (out,)
    return [t for t in items if isinstance(t, torch.Tensor)]


def _differentiable(out) -> torch.Tensor | None:
    """The output tensor a backward pass would run through (one per call)."""
    for t in _tensors(out):
        if t.requires_grad and t.grad_fn is not None:
            return t
    return None


def device_of(model) -> torch.device:
    """Where the model's weights are (CPU for a model without tensors)."""
    if isinstance(model, torch.nn.Module):
        for p in model.parameters():
            return p.device
        for b in model.buffers():
            return b.device
    return torch.device("cpu")


class PeakMemory:
    """``with PeakMemory(device) as peak:`` ... then ``peak.mib`` (the increase above
    the start, None if not measurable here) and ``peak.method`` (``PEAK_METHODS``)."""

    def __init__(self, device: torch.device | str = "cpu", *, sample: bool = False):
        self.device = torch.device(device)
        self.sample = sample  # force the sampling thread (tests; clear_refs refused)
        self.mib: float | None = None
        self.method: str | None = None
        self._start = 0
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._high = 0

    def __enter__(self) -> Self:
        if self.device.type == "cuda":
            self.method = "cuda_max_allocated"
            self._start = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        elif not self.sample and _reset_hwm():
            self.method = "rss_hwm"
            self._start = _status_kib("VmRSS:") * 1024
        elif (start := _rss_bytes()) is not None:
            self.method = "rss_sampled"
            self._start = self._high = start
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._watch, name="faithbench-peak-rss",
                                            daemon=True)
            self._thread.start()
        return self

    def _watch(self) -> None:
        assert self._stop is not None
        while not self._stop.wait(SAMPLE_S):
            now = _rss_bytes()
            if now is not None and now > self._high:
                self._high = now

    def __exit__(self, *exc) -> None:
        if self.method == "cuda_max_allocated":
            high = torch.cuda.max_memory_allocated(self.device)
        elif self.method == "rss_hwm":
            high = _status_kib("VmHWM:") * 1024
        elif self.method == "rss_sampled":
            assert self._stop is not None and self._thread is not None
            self._stop.set()
            self._thread.join()
            now = _rss_bytes()
            high = max(self._high, now if now is not None else 0)
        else:
            return
        self.mib = max(high - self._start, 0) / _MIB


# -- Linux /proc ------------------------------------------------------------------------

_CLEAR_REFS: dict[int, int | None] = {}  # pid -> an open fd of its clear_refs (None: refused)


def open_clear_refs() -> bool:
    """Open this process's ``/proc/self/clear_refs`` for writing, once (a plugin worker
    does it before its Landlock domain forbids the write); whether it could."""
    pid = os.getpid()  # a forked child opens its own: the fd names the opener's file
    if pid not in _CLEAR_REFS:
        try:
            _CLEAR_REFS[pid] = os.open("/proc/self/clear_refs", os.O_WRONLY)
        except OSError:
            _CLEAR_REFS[pid] = None
    return _CLEAR_REFS[pid] is not None


def _reset_hwm() -> bool:
    """Reset the peak resident set (VmHWM) to the current one; False where refused."""
    if not open_clear_refs() or _status_kib("VmHWM:") < 0:
        return False
    fd = _CLEAR_REFS[os.getpid()]
    assert fd is not None
    try:
        os.write(fd, b"5")
    except OSError:
        _CLEAR_REFS[os.getpid()] = None
        return False
    return True


def _status_kib(key: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` (-1 where there is none)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return -1


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss_bytes() -> int | None:
    """The resident set now (``/proc/self/statm``), None where there is no /proc."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None
