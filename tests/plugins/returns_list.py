"""Broken plugin: a nested list instead of a tensor."""

from faithbench.api import ExplainerSpec


class ReturnsList:
    spec = ExplainerSpec(name="broken_list", version="1")

    def explain(self, model, batch, target, *, rng):
        return batch.mask.float().tolist()


EXPLAINER = ReturnsList()
