"""Broken plugin: calls sys.exit (raises SystemExit) from explain."""

import sys

from faithbench.api import ExplainerSpec


class CallsSysExit:
    spec = ExplainerSpec(name="broken_sys_exit", version="1")

    def explain(self, model, batch, target, *, rng):
        sys.exit(3)


EXPLAINER = CallsSysExit()
