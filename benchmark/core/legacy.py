"""Plugins written before the ``faithbench`` namespace import ``benchmark.core.api``.
For one release a plugin worker (the only place plugin code runs) resolves every
``benchmark.*`` import to the same module object under ``faithbench.benchmark.*`` and
warns once, naming the new import. Nothing named ``benchmark`` is installed: a script
of the user's own that imports ``benchmark.*`` must change to ``faithbench.*``."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

OLD = "benchmark"
MESSAGE = ("`import benchmark...` is deprecated and stops working in the next release: "
           "plugins import `faithbench.api` (e.g. `from faithbench.api import ExplainerSpec`)")


class LegacyImportWarning(DeprecationWarning):
    """Shown by default in plugin workers (Python hides plain DeprecationWarnings)."""


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    warned = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != OLD and not fullname.startswith(OLD + "."):
            return None
        new = importlib.util.find_spec("faithbench." + fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(
            fullname, self, is_package=new.submodule_search_locations is not None)

    def create_module(self, spec):
        if not _Alias.warned:
            _Alias.warned = True
            warnings.warn(MESSAGE, LegacyImportWarning, stacklevel=2)
        return importlib.import_module("faithbench." + spec.name)

    def exec_module(self, module) -> None:
        """The module is faithbench's own, already executed."""


def install() -> None:
    """Alias ``benchmark.*`` in this process (a plugin worker); idempotent."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        warnings.simplefilter("default", LegacyImportWarning)
        sys.meta_path.insert(0, _Alias())
