"""Explainer plugins by file path, module name, or entry point in the group
``faithbench.explainers``. A plugin module exposes one ``EXPLAINER`` object.

faithbench never imports a plugin itself: ``load_explainer`` starts a worker
(``faithbench.benchmark.core.isolation``) that imports it, and receives its spec as plain data,
checked here. What this process holds is a ``PluginExplainer``: that spec and the
reference, whose ``explain`` runs only in a worker. So nothing a plugin file does
at import (patching torch or a metric, ``atexit`` or signal handlers, claiming a
reference explainer's module, ``sys.exit``) reaches this process.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

from faithbench.benchmark.core import legacy
from faithbench.benchmark.core.api import Explainer, ExplainerSpec
from faithbench.benchmark.core.errors import PluginError

ENTRY_POINT_GROUP = "faithbench.explainers"


@dataclass(frozen=True)
class PluginExplainer:
    """A loaded plugin as this process knows it: its spec (data) and its reference."""

    spec: ExplainerSpec
    ref: str

    def explain(self, model, batch, target, *, rng):
        raise PluginError(self.spec.name, "explain", "a plugin runs only in a worker process "
                          "(faithbench.benchmark.core.isolation.plugin_caller), never in faithbench's own")


def load_explainer(ref: str, box=None) -> PluginExplainer:
    """``ref`` is a path to a .py file, a dotted module name, or an entry-point name;
    it is imported in a worker confined by ``box`` (an ``isolation.Confinement``)."""
    from faithbench.benchmark.core.isolation import Confinement, load_spec

    if ref.endswith(".py"):
        if not Path(ref).is_file():
            raise PluginError(ref, "load", f"no such file: {ref}")
        ref = str(Path(ref).resolve())
    data = load_spec(ref, box or Confinement())
    return PluginExplainer(spec_from_data(data, ref), ref)


def spec_from_data(data, ref: str) -> ExplainerSpec:
    """An ``ExplainerSpec`` from what a worker sent, every field checked (names by
    ``ExplainerSpec`` itself); anything else is a load failure naming the plugin."""
    fields = {"name": str, "version": str, "requires": list, "params": list,
              "deterministic": bool, "citation": str, "description": str, "cost": str}
    if not isinstance(data, dict) or set(data) != set(fields):
        raise PluginError(ref, "load", f"the worker sent a spec with fields {sorted(data)!r}"
                          if isinstance(data, dict) else "the worker sent no spec")
    for key, kind in fields.items():
        if type(data[key]) is not kind:
            raise PluginError(ref, "load", f"spec field {key!r} is {type(data[key]).__name__}, "
                              f"expected {kind.__name__}")
    try:
        params = tuple((_key(p), _value(p[1])) for p in data["params"])
        return ExplainerSpec(name=data["name"], version=data["version"],
                             requires=frozenset(_str(r) for r in data["requires"]),
                             params=params, deterministic=data["deterministic"],
                             citation=data["citation"], description=data["description"],
                             cost=data["cost"])
    except (TypeError, ValueError) as exc:
        raise PluginError(ref, "load", f"bad spec: {exc}") from None


def _key(pair) -> str:
    if not isinstance(pair, list) or len(pair) != 2:
        raise TypeError(f"parameter {pair!r} is not a (key, value) pair")
    return _str(pair[0])


def _str(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value


def _value(value):
    if isinstance(value, list):
        return tuple(_value(v) for v in value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"parameter value {value!r} is not a string, number, bool or list")


# ------------------------------------------------------------------ in the worker only

def resolve_in_worker(ref: str):
    """Import ``ref`` and return its EXPLAINER. Runs plugin code: worker only."""
    legacy.install()
    path = Path(ref)
    if ref.endswith(".py"):
        if not path.is_file():
            raise PluginError(ref, "load", f"no such file: {path}")
        name = f"faithbench_plugin_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise PluginError(ref, "load", f"cannot import {path} as a Python module")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
        return _explainer_of(module, ref)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == ref:
            loaded = ep.load()
            return getattr(loaded, "EXPLAINER", loaded)
    try:
        module = importlib.import_module(ref)
    except ModuleNotFoundError as exc:
        raise PluginError(ref, "load", f"not a .py file, entry point in {ENTRY_POINT_GROUP!r}, "
                          f"or importable module ({exc})") from exc
    return _explainer_of(module, ref)


def _explainer_of(module, ref: str):
    if not hasattr(module, "EXPLAINER"):
        raise PluginError(ref, "load", "module defines no EXPLAINER object")
    return module.EXPLAINER


def check_loaded(obj, ref: str) -> Explainer:
    spec = getattr(obj, "spec", None)
    if not isinstance(spec, ExplainerSpec):
        raise PluginError(ref, "load", "EXPLAINER has no `spec` of type faithbench.api.ExplainerSpec")
    if not callable(getattr(obj, "explain", None)):
        raise PluginError(ref, "load", "EXPLAINER has no callable `explain(model, batch, target, *, rng)`")
    return obj
