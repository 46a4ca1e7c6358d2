"""SmoothGrad (Smilkov, Thorat, Kim, Viégas & Wattenberg 2017): the gradient of the
target logit wrt the input embeddings, averaged over ``n_samples`` copies of the input
with Gaussian noise added to its tokens' embeddings; a token's score is the L2 norm of
that average over the embedding dimension (as ``gradient`` scores one gradient).

Captum's definition (``NoiseTunnel(Saliency)``, ``nt_type="smoothgrad"``, ``abs=False``)
with two choices of ours: the noise's standard deviation is ``noise`` times the range
(max − min) of the example's own embedding values (Smilkov et al.'s noise level), and
each example draws its noise from its own generator (``faithbench.api.example_generator``),
so its scores are the same alone and in any batch. ``tests/test_smoothgrad.py`` checks
them against Captum's ``NoiseTunnel`` fed the same draws.
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
class SmoothGradExplainer:
    n_samples: int = 20
    noise: float = 0.15
    spec: ExplainerSpec = field(init=False)  # derived from n_samples and noise

    def __post_init__(self):
        object.__setattr__(self, "spec", ExplainerSpec(
            name="smoothgrad",
            version="1",
            requires=frozenset({GRADIENTS, EMBEDDINGS}),
            params=(("n_samples", self.n_samples), ("noise", self.noise)),
            deterministic=True,
            citation="Smilkov, Thorat, Kim, Viégas & Wattenberg 2017, SmoothGrad: removing "
                     "noise by adding noise",
            description="L2 norm over the embedding of the target-logit gradient averaged "
                        "over noisy copies of the input (Captum NoiseTunnel smoothgrad).",
            cost=f"{self.n_samples} fwd + {self.n_samples} bwd (n_samples)",
        ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) norms of the mean gradient; zero at padding."""
        grads = noisy_gradients(model, batch, target, rng, self.n_samples, self.noise)
        return grads.mean(dim=1).norm(dim=-1).float().masked_fill(~batch.mask, 0.0)


EXPLAINER = SmoothGradExplainer()
