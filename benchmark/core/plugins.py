"""Loading explainer plugins by file path, module name, or entry point in the
group ``faithbench.explainers``. A plugin module exposes one ``EXPLAINER`` object."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from importlib.metadata import entry_points
from pathlib import Path

from benchmark.core.api import Explainer, ExplainerSpec
from benchmark.core.errors import PluginError

ENTRY_POINT_GROUP = "faithbench.explainers"


def load_explainer(ref: str) -> Explainer:
    """``ref`` is a path to a .py file, a dotted module name, or an entry-point name."""
    obj = _resolve(ref)
    spec = getattr(obj, "spec", None)
    if not isinstance(spec, ExplainerSpec):
        raise PluginError(ref, "load", "EXPLAINER has no `spec` of type benchmark.core.api.ExplainerSpec")
    if not callable(getattr(obj, "explain", None)):
        raise PluginError(ref, "load", "EXPLAINER has no callable `explain(model, batch, target, *, rng)`")
    return obj


def _resolve(ref: str):
    path = Path(ref)
    if ref.endswith(".py"):
        if not path.is_file():
            raise PluginError(ref, "load", f"no such file: {path}")
        name = f"faithbench_plugin_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:  # a broken plugin file must not crash the caller
            raise PluginError(ref, "load", f"importing {path} raised {type(exc).__name__}: {exc}") from exc
        return _explainer_of(module, ref)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == ref:
            try:
                loaded = ep.load()
            except Exception as exc:  # as above
                raise PluginError(ref, "load", f"entry point raised {type(exc).__name__}: {exc}") from exc
            return getattr(loaded, "EXPLAINER", loaded)
    try:
        module = importlib.import_module(ref)
    except ModuleNotFoundError as exc:
        raise PluginError(ref, "load", f"not a .py file, entry point in {ENTRY_POINT_GROUP!r}, "
                          f"or importable module ({exc})") from exc
    except Exception as exc:  # as above
        raise PluginError(ref, "load", f"importing raised {type(exc).__name__}: {exc}") from exc
    return _explainer_of(module, ref)


def _explainer_of(module, ref: str):
    if not hasattr(module, "EXPLAINER"):
        raise PluginError(ref, "load", "module defines no EXPLAINER object")
    return module.EXPLAINER
