"""Where a model runs (``--device``) and at which precision (``--precision``).

The model is the only thing that moves. On the CPU at fp32 nothing is wrapped, so a
CPU run is the same code, bit for bit, as before devices existed. Anywhere else the
model is placed behind ``OnDevice``: its weights live on the device, and every method
of the model surface (``SURFACE``: the forward methods, ``embed``,
``teacher_forced_logits``) takes CPU tensors, moves them there, runs (under
``torch.autocast`` at bf16) and hands back CPU float32 tensors, still attached to the
autograd graph, so gradients flow back through the copies to the device. Explainers,
metrics, the perturbation engine and plugins keep working on the CPU; the work that
costs (the model's passes, forward and backward) happens on the device.

The device is not part of a suite: a model trained on a GPU is another checkpoint
(its cache key says where it was trained, ``Placement.key``), and results say where
they ran (``Provenance.device``). bf16 changes every value, so it is part of the
task id (a suite of its own) and of every unit's key.
"""

from __future__ import annotations

import functools
import re
from contextlib import nullcontext
from dataclasses import dataclass, fields
from typing import Any

import torch

from faithbench.benchmark.core.api import Batch
from faithbench.benchmark.core.cost import FORWARD_METHODS
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.proxy import ModelProxy

DEVICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
PRECISIONS = ("fp32", "bf16")
SURFACE = FORWARD_METHODS | {"embed", "teacher_forced_logits", "training_loss", "attention_mass"}
_SPEC = re.compile(r"(auto|cpu|mps|cuda)(?::(\d+))?")


def resolve(spec: str | None) -> torch.device:
    """The device ``spec`` names, checked to exist here: ``auto`` (None) is CUDA when
    available, else the CPU.

    >>> resolve("cpu")
    device(type='cpu')
    >>> resolve("tpu")
    Traceback (most recent call last):
    ...
    faithbench.benchmark.core.errors.InputError: --device 'tpu': choose auto, cpu, cuda, cuda:N or mps
    """
    spec = "auto" if spec is None else spec.strip().lower()
    m = _SPEC.fullmatch(spec)
    if m is None or (m.group(2) is not None and m.group(1) != "cuda"):
        raise InputError(f"--device {spec!r}: choose {', '.join(DEVICES[:-1])} or {DEVICES[-1]}")
    kind = m.group(1)
    if kind == "auto":
        return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    if kind == "cpu":
        return torch.device("cpu")
    if kind == "mps":
        if not torch.backends.mps.is_available():
            raise InputError(f"--device mps: no Apple GPU (MPS) is available here (torch "
                             f"{torch.__version__}); use --device cpu")
        return torch.device("mps")
    if not torch.cuda.is_available():
        why = ("this torch is built without CUDA" if torch.version.cuda is None
               else "no CUDA GPU is visible (CUDA_VISIBLE_DEVICES, driver)")
        raise InputError(f"--device {spec}: CUDA is not available: {why} (torch "
                         f"{torch.__version__}); use --device cpu, or auto to take a GPU "
                         "only where there is one")
    index = int(m.group(2) or 0)
    if index >= torch.cuda.device_count():
        raise InputError(f"--device {spec}: this machine has {torch.cuda.device_count()} "
                         f"CUDA device(s), cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return torch.device("cuda", index)


@dataclass(frozen=True)
class Placement:
    """Where the model runs and at which precision. ``Placement()`` is the CPU at fp32:
    nothing is wrapped, and no key changes."""

    device: str = "cpu"  # a torch device string: cpu, cuda:0, mps
    precision: str = "fp32"  # fp32 | bf16 (autocast of the model's passes)

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise InputError(f"--precision {self.precision!r}: choose "
                             f"{' or '.join(PRECISIONS)}")

    @classmethod
    def of(cls, options: Any) -> Placement:
        """The placement a ``TaskOptions`` asks for."""
        return cls(options.device, options.precision)

    @property
    def default(self) -> bool:
        return self.device == "cpu" and self.precision == "fp32"

    @property
    def key(self) -> str:
        """What a model trained here adds to its cache key ("" on the CPU at fp32):
        the device type (another device rounds differently, so trains another model),
        and bf16."""
        kind = torch.device(self.device).type
        return "+".join(p for p in (None if kind == "cpu" else kind,
                                    None if self.precision == "fp32" else self.precision) if p)

    def describe(self) -> str:
        """The device as a record names it: ``cpu``, ``cuda:0 (NVIDIA H100 80GB HBM3)``."""
        device = torch.device(self.device)
        if device.type == "cuda" and torch.cuda.is_available():
            return f"{self.device} ({torch.cuda.get_device_name(device)})"
        return self.device

    def autocast(self):
        """The context the model's passes run in (bf16: autocast; fp32: none)."""
        if self.precision == "fp32":
            return nullcontext()
        return torch.autocast(torch.device(self.device).type, dtype=torch.bfloat16)


def place(model: Any, placement: Placement | None, *, force: bool = False) -> Any:
    """``model`` where ``placement`` says: itself on the CPU at fp32 (unless ``force``:
    the tests run the wrapper on the CPU), else behind ``OnDevice``. Idempotent."""
    if getattr(model, "placement", None) is not None or placement is None \
            or (placement.default and not force):
        return model
    return OnDevice(model, placement)


def unplaced(model: Any) -> Any:
    """The model object itself, behind any ``OnDevice`` (and any proxy around that)."""
    while isinstance(model, ModelProxy):  # type(), not __class__: proxies only
        model = object.__getattribute__(model, "_inner")
    return model


def _to(value: Any, device: torch.device) -> Any:
    """``value`` with its tensors (a Batch's fields too) on ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, Batch):
        changes = {f.name: getattr(value, f.name).to(device) for f in fields(value)
                   if isinstance(getattr(value, f.name), torch.Tensor)}
        return value.replace(**changes)
    if isinstance(value, (tuple, list)):
        return type(value)(_to(v, device) for v in value)
    return value


def _back(value: Any) -> Any:
    """``value`` with its tensors on the CPU, floating ones as float32 (bf16 outputs)."""
    if isinstance(value, torch.Tensor):
        value = value.to("cpu")
        return value.float() if value.is_floating_point() and value.dtype != torch.float32 \
            and value.dtype != torch.float64 else value
    if isinstance(value, Batch):
        return _to(value, torch.device("cpu"))
    if isinstance(value, (tuple, list)):
        return type(value)(_back(v) for v in value)
    return value


class OnDevice(ModelProxy):
    """The model on a device, seen from the CPU (see the module docstring). Every other
    attribute is the model's own (``ModelProxy``: ``capabilities``, ``pad_id``,
    ``eval()``, ``parameters()``, ``modules()`` ...); ``state_dict()`` is a CPU copy
    (weights hashes, checkpoints). Pickled, it is the model and its placement: a plugin
    worker (a fresh process, never a fork) loads the weights on the CPU and places them
    on the device itself."""

    __slots__ = ("_device", "_placement")

    def __init__(self, model: Any, placement: Placement):
        device = torch.device(placement.device)
        super().__init__(model.to(device))
        object.__setattr__(self, "_placement", placement)
        object.__setattr__(self, "_device", device)

    @property
    def placement(self) -> Placement:
        return self._placement

    def _wrapped(self, name: str, value: Any) -> Any:
        return self._across(value) if name in SURFACE and callable(value) else value

    def _across(self, method):
        device, placement = self._device, self._placement

        def across(*args, **kwargs):
            args, kwargs = _to(args, device), {k: _to(v, device) for k, v in kwargs.items()}
            with placement.autocast():
                out = method(*args, **kwargs)
            return _back(out)

        return functools.update_wrapper(across, method, updated=())

    def __call__(self, *args, **kwargs):
        return self._across(self._inner)(*args, **kwargs)

    def state_dict(self, *args, **kwargs) -> dict:
        return {k: v.detach().to("cpu") for k, v in
                self._inner.state_dict(*args, **kwargs).items()}

    def to(self, *args, **kwargs):  # the placement decides where the weights are
        return self

    def train(self, mode: bool = True):  # the module's return ``self``: this proxy, not it
        self._inner.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def __reduce_ex__(self, protocol):
        return OnDevice, (self._inner, self._placement)

    def __repr__(self) -> str:
        return f"OnDevice({self._placement.device}, {self._placement.precision}): " \
               f"{self._inner!r}"
