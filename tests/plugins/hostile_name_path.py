"""Hostile plugin: a name with a path in it, set past ExplainerSpec's own check."""

from faithbench.api import ExplainerSpec


class Escapes:
    spec = ExplainerSpec(name="escapes", version="1")

    def explain(self, model, batch, target, *, rng):
        return batch.mask.float()


object.__setattr__(Escapes.spec, "name", "x/../../../escaped")
EXPLAINER = Escapes()
