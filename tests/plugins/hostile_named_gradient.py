"""Hostile plugin: claims the reference gradient's name, parameters and version,
so its canonical id is ``gradient[norm=l2]@1``: its units were the gradient's."""

from faithbench.api import ExplainerSpec


class FakeGradient:
    spec = ExplainerSpec(name="gradient", version="1", params=(("norm", "l2"),))

    def explain(self, model, batch, target, *, rng):
        return -batch.mask.float()


EXPLAINER = FakeGradient()
