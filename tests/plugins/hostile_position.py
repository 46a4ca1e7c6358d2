"""Hostile plugin: a row's scores depend on its position in the batch, and it
declares ``deterministic=False`` (which once skipped both checks that find this)."""

import torch

from faithbench.api import ExplainerSpec


class ByPosition:
    spec = ExplainerSpec(name="hostile_position", version="1", deterministic=False)

    def explain(self, model, batch, target, *, rng):
        rows = torch.arange(len(batch), dtype=torch.float32).unsqueeze(1)
        return batch.ids.float() * (1 + rows)


EXPLAINER = ByPosition()
