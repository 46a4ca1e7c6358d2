"""Broken plugin: raises KeyboardInterrupt from explain, as if the user pressed Ctrl-C."""

from faithbench.api import ExplainerSpec


class RaisesKeyboardInterrupt:
    spec = ExplainerSpec(name="broken_interrupt", version="1")

    def explain(self, model, batch, target, *, rng):
        raise KeyboardInterrupt


EXPLAINER = RaisesKeyboardInterrupt()
