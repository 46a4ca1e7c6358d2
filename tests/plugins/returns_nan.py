"""Broken plugin: NaN at the real tokens of the second row only."""

import torch

from faithbench.api import ExplainerSpec


class ReturnsNaN:
    spec = ExplainerSpec(name="broken_nan", version="1")

    def explain(self, model, batch, target, *, rng):
        scores = torch.zeros(batch.ids.shape)
        if len(batch) > 1:
            scores[1] = float("nan")
        return scores


EXPLAINER = ReturnsNaN()
