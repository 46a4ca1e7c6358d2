"""Broken plugin: adds 1 to every embedding weight of the model it was handed."""

import torch

from faithbench.api import ExplainerSpec


class ChangesWeights:
    spec = ExplainerSpec(name="broken_weights", version="1")

    def explain(self, model, batch, target, *, rng):
        with torch.no_grad():
            model.embedding.weight.add_(1.0)
        return batch.mask.float()


EXPLAINER = ChangesWeights()
