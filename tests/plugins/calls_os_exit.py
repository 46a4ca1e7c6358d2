"""Broken plugin: ends its process with os._exit, which no except clause can catch."""

import os

from faithbench.api import ExplainerSpec


class CallsOsExit:
    spec = ExplainerSpec(name="broken_os_exit", version="1")

    def explain(self, model, batch, target, *, rng):
        os._exit(7)


EXPLAINER = CallsOsExit()
