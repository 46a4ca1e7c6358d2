"""Hostile plugin: a name with table markup and a newline, set past ExplainerSpec's
own check."""

from faithbench.api import ExplainerSpec


class Markup:
    spec = ExplainerSpec(name="markup", version="1")

    def explain(self, model, batch, target, *, rng):
        return batch.mask.float()


object.__setattr__(Markup.spec, "name", "a|b\n| forged | 1.000 |")
EXPLAINER = Markup()
