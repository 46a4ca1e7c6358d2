"""GradientSHAP (Lundberg & Lee 2017; Erion et al. 2021, expected gradients) over
input embeddings: the expectation, over noisy copies x̃ = x + ε of the input and points
x' + α (x̃ − x') with α ~ U(0, 1) on the straight line from the baseline, of
(x̃ − x') · ∂ logit_target / ∂x at that point, summed over the embedding dimension;
signed. It estimates integrated gradients averaged over the noise by ``n_samples``
Monte-Carlo draws (one α per draw). The baseline x' is integrated gradients' (the
``baseline_id`` embedding at real tokens; x itself at padding, which so gets zero).

Captum's definition (``captum.attr.GradientShap`` with one baseline: its noise
tunnel's ``smoothgrad`` draws, then one α per draw) with two choices of ours: ε has
standard deviation ``noise`` times the range of the example's own embedding values
(as SmoothGrad's), and each example draws ε and then α from its own generator
(``faithbench.api.noisy_embeddings``), so its scores are the same alone and in any
batch. ``tests/test_gradient_shap.py`` checks them against Captum's ``GradientShap``
fed the same draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import (
    EMBEDDINGS,
    GRADIENTS,
    Batch,
    ExplainableModel,
    ExplainerSpec,
    Target,
    baseline_embeddings,
    gradients_at,
    noisy_embeddings,
)


@dataclass(frozen=True)
class GradientShapExplainer:
    n_samples: int = 20
    noise: float = 0.15
    spec: ExplainerSpec = field(init=False)  # derived from n_samples and noise

    def __post_init__(self):
        object.__setattr__(self, "spec", ExplainerSpec(
            name="gradient_shap",
            version="1",
            requires=frozenset({GRADIENTS, EMBEDDINGS}),
            params=(("baseline", "baseline_id"), ("n_samples", self.n_samples),
                    ("noise", self.noise)),
            deterministic=True,
            cost=f"{self.n_samples} fwd + {self.n_samples} bwd (n_samples)",
            citation="Lundberg & Lee 2017, A unified approach to interpreting model "
                     "predictions (GradientSHAP as in Captum)",
            description="Mean over noisy copies and random points on the path from the "
                        "baseline of (input - baseline) x gradient, summed over the "
                        "embedding (Captum GradientShap).",
        ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) signed attributions; zero at padding."""
        embeds, noisy, generators = noisy_embeddings(model, batch, rng, self.n_samples,
                                                     self.noise)
        base = baseline_embeddings(model, batch, embeds).unsqueeze(1)  # (B, 1, T, D)
        alpha = torch.stack([torch.rand(self.n_samples, generator=g, dtype=embeds.dtype)
                             for g in generators]).to(embeds.device)  # (B, n)
        alpha = alpha.view(len(batch), self.n_samples, 1, 1)
        grads = gradients_at(model, batch, target, alpha * noisy + (1 - alpha) * base)
        scores = ((noisy - base) * grads).mean(dim=1).sum(dim=-1)  # (B, T)
        return scores.float().masked_fill(~batch.mask, 0.0)


EXPLAINER = GradientShapExplainer()
