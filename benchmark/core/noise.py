"""Gradients at noisy copies of an input, the noise drawn per example: the building
block of SmoothGrad, VarGrad and GradientSHAP (``faithbench.submissions.smoothgrad``,
``.vargrad``, ``.gradient_shap``) and of any plugin that averages over input noise
(``faithbench.api.noisy_gradients``, ``noisy_embeddings``, ``gradients_at``). Each
example draws from its own generator (``example_generator``), so its gradients are the
same alone and in any batch; the draws come in the order Captum's ``NoiseTunnel``
draws them for one example."""

from __future__ import annotations

import torch

from faithbench.benchmark.core.api import Batch, ExplainableModel, Target, example_generator


def noisy_embeddings(model: ExplainableModel, batch: Batch, rng: torch.Generator,
                     n_samples: int, noise: float
                     ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Generator]]:
    """The (B, T, D) embeddings, (B, n_samples, T, D) noisy copies of them, and each
    row's generator after its noise was drawn (for further draws of that row).

    Noise N(0, σ_b²), σ_b = noise · (range of row b's real-token embedding values), is
    drawn from the row's own generator over its real tokens only, in the order Captum
    draws it for one example ((n_samples, L_b, D) at once); padding stays as it is."""
    embeds = model.embed(batch).detach()  # (B, T, D)
    rows, _, dim = embeds.shape
    noisy = embeds.unsqueeze(1).repeat(1, n_samples, 1, 1)  # (B, n, T, D)
    generators = []
    for b in range(rows):
        n = int(batch.mask[b].sum())
        real = embeds[b, :n]
        sigma = noise * float(real.max() - real.min()) if n else 0.0
        generator = example_generator(rng, batch.example_ids[b])
        draws = torch.normal(0.0, sigma, (n_samples, n, dim), generator=generator,
                             dtype=embeds.dtype)
        noisy[b, :, :n] += draws.to(embeds.device)
        generators.append(generator)
    return embeds, noisy, generators


def gradients_at(model: ExplainableModel, batch: Batch, target: Target, points: torch.Tensor,
                 rows_per_pass: int = 512) -> torch.Tensor:
    """(B, n, T, D) gradients of the target logit of row b at each of its n embedding
    ``points`` (B, n, T, D), as many rows per pass as the model allows."""
    rows, n_samples, width, dim = points.shape
    per_pass = max(1, min(rows_per_pass, getattr(model, "max_rows_per_pass", rows_per_pass))
                   // n_samples)
    grads = torch.zeros_like(points)
    for start in range(0, rows, per_pass):
        pick = torch.arange(start, min(start + per_pass, rows))
        repeated = pick.repeat_interleave(n_samples)
        sub = batch.select(repeated)
        with torch.enable_grad():
            x = points[pick].reshape(-1, width, dim).requires_grad_(True)
            logits = model.logits_from_embeddings(x, sub)
            picked = logits.gather(1, target[repeated].view(-1, 1).to(logits.device)).sum()
            (g,) = torch.autograd.grad(picked, x)
        grads[pick] = g.reshape(len(pick), n_samples, width, dim)
    return grads


def noisy_gradients(model: ExplainableModel, batch: Batch, target: Target, rng: torch.Generator,
                    n_samples: int, noise: float, rows_per_pass: int = 512) -> torch.Tensor:
    """(B, n_samples, T, D) gradients of the target logit wrt noisy copies of each row's
    embeddings (``noisy_embeddings``)."""
    _, noisy, _ = noisy_embeddings(model, batch, rng, n_samples, noise)
    return gradients_at(model, batch, target, noisy, rows_per_pass)
