"""Hostile plugin: returns a tensor the checks cannot read (on the meta device)."""

import torch

from faithbench.api import ExplainerSpec


class Meta:
    spec = ExplainerSpec(name="hostile_meta", version="1")

    def explain(self, model, batch, target, *, rng):
        return torch.empty(batch.ids.shape, device="meta")


EXPLAINER = Meta()
