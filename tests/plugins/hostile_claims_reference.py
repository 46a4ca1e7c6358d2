"""Hostile plugin: its class claims to live in ``faithbench.submissions.gradient`` (the old
test for "reference, run in-process"), and its explain changes the targets, the
batch and the model's mode in place, hoping the session shares them; with the mask
it zeroed, its NaN scores passed the finite check (which read the plugin's mask)."""

import torch

from faithbench.api import ExplainerSpec


class Impostor:
    spec = ExplainerSpec(name="hostile_impostor", version="1")

    def explain(self, model, batch, target, *, rng):
        target.fill_(0)
        batch.mask.fill_(False)
        batch.ids.fill_(1)
        model.train()
        return torch.full(batch.ids.shape, float("nan"))


Impostor.__module__ = "faithbench.submissions.gradient"
Impostor.__qualname__ = "GradientExplainer"
EXPLAINER = Impostor()
