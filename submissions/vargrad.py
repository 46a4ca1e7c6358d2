"""VarGrad (Adebayo, Gilmer, Goodfellow & Kim 2018, "Local explanation methods for deep
neural networks lack sensitivity to parameter values"): the variance, over noisy copies
of the input, of the target logit's gradient wrt the embeddings, summed over the
embedding dimension per token. Captum's definition (``NoiseTunnel(Saliency)``,
``nt_type="vargrad"``, ``abs=False``: mean of squares minus the square of the mean),
with SmoothGrad's noise (``faithbench.api.noisy_gradients``): σ = ``noise`` times the
range of the example's embedding values, drawn from the example's own generator.
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
    noisy_gradients,
)


@dataclass(frozen=True)
class VarGradExplainer:
    n_samples: int = 20
    noise: float = 0.15
    spec: ExplainerSpec = field(init=False)  # derived from n_samples and noise

    def __post_init__(self):
        object.__setattr__(self, "spec", ExplainerSpec(
            name="vargrad",
            version="1",
            requires=frozenset({GRADIENTS, EMBEDDINGS}),
            params=(("n_samples", self.n_samples), ("noise", self.noise)),
            deterministic=True,
            citation="Adebayo, Gilmer, Goodfellow & Kim 2018, Local explanation methods for "
                     "deep neural networks lack sensitivity to parameter values",
            description="Variance of the target-logit gradient over noisy copies of the "
                        "input, summed over the embedding (Captum NoiseTunnel vargrad).",
            cost=f"{self.n_samples} fwd + {self.n_samples} bwd (n_samples)",
        ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) summed variances; zero at padding."""
        grads = noisy_gradients(model, batch, target, rng, self.n_samples, self.noise)
        var = (grads ** 2).mean(dim=1) - grads.mean(dim=1) ** 2
        return var.sum(dim=-1).float().masked_fill(~batch.mask, 0.0)


EXPLAINER = VarGradExplainer()
