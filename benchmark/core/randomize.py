"""Model-parameter randomization for the sanity checks (Adebayo et al. 2018): a deep
copy of a model with some of its layer groups re-initialized from the initializer,
the evaluated model never touched.

A task model lists its layer groups, output first (``layer_groups()``: (name,
modules) pairs, e.g. the classifier's ``out``, ``attention``, ``encoder``,
``embedding``). A group is re-initialized by its modules' own ``reset_parameters()``
(PyTorch's initializer, the one that built the model before training), or by the
model's ``init_module(module)`` where it has one (the Transformer adapter: BERT's
initializer). Each group draws from its own generator seed, derived from the run's
seed and the group's name (``group_seed``), under ``torch.random.fork_rng``: the
global generator is left as it was, and a group gets the same fresh weights whichever
other groups are randomized with it (cascading depth k re-initializes the first k
groups exactly as k independent randomizations would).

>>> from faithbench.testing import tiny_classifier
>>> model = tiny_classifier()
>>> [name for name, _ in layer_groups(model)]
['out', 'attention', 'encoder', 'embedding']
>>> copy = randomized(model, ["out"], seed=0)
>>> torch.equal(copy.out.weight, model.out.weight)
False
>>> torch.equal(copy.attn.v.weight, model.attn.v.weight)  # another group: untouched
True
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from faithbench.benchmark.core.device import place, unplaced
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.files import content_hash

Groups = list[tuple[str, list[nn.Module]]]


def layer_groups(model: Any) -> Groups:
    """The model's layer groups, output first; an InputError for a model without any."""
    method = getattr(model, "layer_groups", None)
    if method is None or not isinstance(model, nn.Module):
        raise InputError(f"model {type(model).__name__} lists no layer groups "
                         "(layer_groups()): parameter randomization cannot re-initialize it")
    groups: Groups = method()
    return groups


def group_names(model: Any) -> list[str]:
    return [name for name, _ in layer_groups(model)]


def group_seed(seed: int, name: str) -> int:
    """The generator seed of group ``name`` under the run's ``seed``.

    >>> group_seed(0, "out") == group_seed(0, "out") != group_seed(1, "out")
    True
    """
    return int(content_hash({"randomize": name, "seed": int(seed)}), 16) % 2 ** 63


def pick(model: Any, names: Sequence[str]) -> Groups:
    """The groups named ``names`` (an InputError listing the model's groups otherwise)."""
    groups = dict(layer_groups(model))
    unknown = [n for n in names if n not in groups]
    if unknown:
        raise InputError(f"model {type(model).__name__} has no layer group "
                         f"{', '.join(map(repr, unknown))} (its groups, output first: "
                         f"{', '.join(groups)})")
    return [(n, groups[n]) for n in names]


def reinitialize(model: nn.Module, modules: Sequence[nn.Module], seed: int) -> None:
    """Re-initialize ``modules`` (parts of ``model``) in place from the initializer,
    drawing from ``torch.manual_seed(seed)`` inside ``fork_rng``. Every parameter of
    the modules must be reached by an initializer (its own module's
    ``reset_parameters``, or ``model.init_module`` returning True): one that is not is
    an error, never a trained weight silently kept."""
    init = getattr(model, "init_module", None)
    parts = list({id(m): m for m in modules}.values())  # a shared module once
    reached: set[int] = set()
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for part in parts:
            for sub in part.modules():
                done = init(sub) if init is not None else hasattr(sub, "reset_parameters")
                if init is None and done:
                    sub.reset_parameters()  # type: ignore[operator]
                if done:
                    reached.update(id(p) for p in sub.parameters(recurse=False))
    missed = sorted({name for m in parts for name, p in m.named_parameters()
                     if id(p) not in reached})
    if missed:
        raise ValueError(f"{type(model).__name__}: no initializer reaches "
                         f"{', '.join(missed)}; parameter randomization would keep them trained")


def randomized(model: Any, names: Sequence[str], seed: int) -> nn.Module:
    """A deep copy of ``model`` whose groups ``names`` are re-initialized (each from
    ``group_seed(seed, name)``), in eval mode; ``model`` itself is left untouched. The
    draws are made on the CPU and the copy placed where ``model`` is, so a GPU run
    randomizes to the same weights as a CPU run."""
    chosen = [n for n, _ in pick(model, names)]
    twin = copy.deepcopy(unplaced(model)).to("cpu")
    for name, modules in pick(twin, chosen):
        reinitialize(twin, modules, group_seed(seed, name))
    return place(twin, getattr(model, "placement", None)).eval()
