"""Broken plugin: explain raises."""

from faithbench.api import ExplainerSpec


class Raises:
    spec = ExplainerSpec(name="broken_raises", version="1")

    def explain(self, model, batch, target, *, rng):
        raise ValueError("boom: this plugin always fails")


EXPLAINER = Raises()
