"""Random scores, uniform on [0, 1): the baseline every metric is read against.
An explainer that does not beat it on a metric carries no signal there.

Deterministic given the seed: row b's scores come from the api's
``example_generator(rng, batch.example_ids[b])``, one draw per real token, so a row
gets the same scores alone, in any batch, at any padding width. That per-row seeding
is the one loop over rows here; it costs O(T) per row and calls no model. (This
module must not ``import random``: the name would refer to itself.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import Batch, ExplainableModel, ExplainerSpec, Target, example_generator


@dataclass(frozen=True)
class RandomExplainer:
    spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(
        name="random",
        version="1",
        requires=frozenset(),
        params=(("distribution", "uniform"),),
        deterministic=True,
        citation="Hooker, Erhan, Kindermans & Kim 2019, A benchmark for interpretability methods "
                 "in deep neural networks (random baseline)",
        description="Uniform random scores per token, seeded by the run seed and the example id.",
        cost="0 (calls no model)",
    ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) uniform scores at real tokens; zero at padding."""
        lengths = batch.mask.sum(dim=1).tolist()
        draws = [torch.rand(int(n), generator=example_generator(rng, eid))
                 for n, eid in zip(lengths, batch.example_ids)]
        scores = torch.zeros(batch.ids.shape, dtype=torch.float32)
        scores[batch.mask.cpu()] = torch.cat(draws) if draws else torch.empty(0)
        return scores.to(batch.ids.device)


EXPLAINER = RandomExplainer()
