"""Broken plugin: one score too many per row."""

import torch

from faithbench.api import ExplainerSpec


class WrongShape:
    spec = ExplainerSpec(name="broken_shape", version="1")

    def explain(self, model, batch, target, *, rng):
        return torch.zeros(batch.ids.shape[0], batch.ids.shape[1] + 1)


EXPLAINER = WrongShape()
