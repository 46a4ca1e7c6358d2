"""Broken plugin: ``spec`` is a dict, not an ExplainerSpec."""

import torch


class DictSpec:
    def __init__(self):
        self.spec = {"name": "broken_spec", "version": "1"}

    def explain(self, model, batch, target, *, rng):
        return torch.zeros(batch.ids.shape)


EXPLAINER = DictSpec()
