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
    example_generator,
)


def noisy_gradients(model: ExplainableModel, batch: Batch, target: Target, rng: torch.Generator,
                    n_samples: int, noise: float, rows_per_pass: int = 512) -> torch.Tensor:
    """(B, n_samples, T, D) gradients of the target logit wrt noisy copies of each row's
    embeddings: noise N(0, σ_b²), σ_b = noise · (range of row b's real-token embedding
    values), drawn from the row's own generator over its real tokens only, in the order
    Captum draws it for one example ((n_samples, L_b, D) at once)."""
    embeds = model.embed(batch).detach()  # (B, T, D)
    rows, width, dim = embeds.shape
    noisy = embeds.unsqueeze(1).repeat(1, n_samples, 1, 1)  # (B, n, T, D)
    for b in range(rows):
        n = int(batch.mask[b].sum())
        real = embeds[b, :n]
        sigma = noise * float(real.max() - real.min()) if n else 0.0
        draws = torch.normal(0.0, sigma, (n_samples, n, dim),
                             generator=example_generator(rng, batch.example_ids[b]),
                             dtype=embeds.dtype)
        noisy[b, :, :n] += draws.to(embeds.device)
    per_pass = max(1, min(rows_per_pass, getattr(model, "max_rows_per_pass", rows_per_pass))
                   // n_samples)
    grads = torch.zeros_like(noisy)
    for start in range(0, rows, per_pass):
        pick = torch.arange(start, min(start + per_pass, rows))
        repeated = pick.repeat_interleave(n_samples)
        sub = batch.select(repeated)
        with torch.enable_grad():
            x = noisy[pick].reshape(-1, width, dim).requires_grad_(True)
            logits = model.logits_from_embeddings(x, sub)
            picked = logits.gather(1, target[repeated].view(-1, 1).to(logits.device)).sum()
            (g,) = torch.autograd.grad(picked, x)
        grads[pick] = g.reshape(len(pick), n_samples, width, dim)
    return grads


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
        ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) norms of the mean gradient; zero at padding."""
        grads = noisy_gradients(model, batch, target, rng, self.n_samples, self.noise)
        return grads.mean(dim=1).norm(dim=-1).float().masked_fill(~batch.mask, 0.0)


EXPLAINER = SmoothGradExplainer()
