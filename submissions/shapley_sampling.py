"""Shapley value sampling (Castro, Gómez & Tejada 2009; Štrumbelj & Kononenko 2010)
with the words of the input as features: for each of ``n_samples`` random orderings
of the words, the words are added one by one to the empty input (removed words erased
by the task's ``eraser``), and a word's score is its mean marginal gain in p(target)
(on a subword model shared equally among its pieces). Every ordering's gains sum to
p(target | x) − p(target | empty input) exactly, so the scores of an example do too.

Captum's definition (``captum.attr.ShapleyValueSampling``); every model call goes
through the shared perturbation engine (``faithbench.api.feature_attributions``):
every ordering's prefixes go to it in one call, and the empty and the full input, and
every prefix two orderings share, are forwarded once. Each example draws its orderings from its own seeded generator.
``tests/test_perturbation_explainers.py`` checks the scores against Captum's
``ShapleyValueSampling`` called directly on the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import Batch, ExplainableModel, ExplainerSpec, Target, feature_attributions


@dataclass(frozen=True)
class ShapleySamplingExplainer:
    n_samples: int = 25
    eraser: str = "delete"
    spec: ExplainerSpec = field(init=False)  # derived from n_samples and eraser

    def __post_init__(self):
        object.__setattr__(self, "spec", ExplainerSpec(
            name="shapley_sampling",
            version="1",
            requires=frozenset(),
            params=(("eraser", self.eraser), ("n_samples", self.n_samples)),
            deterministic=True,
            cost=f"<= {self.n_samples} x W + 1 fwd (n_samples orderings of W words; distinct "
                 "subsets only)",
            citation="Castro, Gómez & Tejada 2009, Polynomial calculation of the Shapley "
                     "value based on sampling",
            description="Mean marginal gain in p(target) of each word over random orderings "
                        "of the words (Captum ShapleyValueSampling), removed words erased.",
        ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) sampled Shapley values; zero at padding."""
        return feature_attributions(model, batch, target, rng, self.attribute,
                                    eraser=self.eraser)

    def attribute(self, forward, inputs, baselines, target, feature_mask) -> torch.Tensor:
        """Captum's ShapleyValueSampling on one example's presence vector, with every
        ordering's prefixes in one forward call instead of one call per ordering: the
        orderings are Captum's (``torch.randperm`` per sample from the global
        generator), prefix j of an ordering keeps its first j + 1 words, and a word's
        gain in an ordering is its prefix's p(target) minus the previous prefix's (the
        empty input before the first). ``tests/test_perturbation_explainers.py``
        compares the result with Captum's class."""
        m, n = inputs.shape[1], self.n_samples
        orders = torch.stack([torch.randperm(m) for _ in range(n)])  # (n, m)
        ranks = orders.argsort(dim=1)  # (n, m): the step at which each word is added
        prefixes = ranks.unsqueeze(1) <= torch.arange(m).view(1, m, 1)  # (n, step, word)
        p = forward(torch.cat([baselines, prefixes.reshape(n * m, m).float()]))[:, target]
        steps = p[1:].view(n, m)
        gains = steps - torch.cat([p[:1].expand(n, 1), steps[:, :-1]], dim=1)
        return gains.gather(1, ranks).mean(dim=0, keepdim=True)  # (1, m)


EXPLAINER = ShapleySamplingExplainer()
