"""A plugin written before the faithbench namespace: it imports ``benchmark.core.api``,
which a plugin worker still resolves (with a warning) for one release."""

from dataclasses import dataclass, field

import torch

from benchmark.core.api import ExplainerSpec


@dataclass(frozen=True)
class Uniform:
    spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(name="legacy_uniform",
                                                                      version="1"))

    def explain(self, model, batch, target, *, rng):
        return batch.mask.to(torch.float32)


EXPLAINER = Uniform()
