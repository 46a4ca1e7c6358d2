"""Broken plugin: defines an explainer but forgets to expose it as EXPLAINER."""

import torch

from faithbench.api import ExplainerSpec


class Forgotten:
    spec = ExplainerSpec(name="broken_forgotten", version="1")

    def explain(self, model, batch, target, *, rng):
        return torch.zeros(batch.ids.shape)


explainer = Forgotten()
