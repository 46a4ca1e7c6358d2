"""Gradients at noisy copies of an input, the noise drawn per example: the building
block of SmoothGrad and VarGrad (``faithbench.submissions.smoothgrad``, ``.vargrad``)
and of any plugin that averages over input noise (``faithbench.api.noisy_gradients``).
Each example draws from its own generator (``example_generator``), so its gradients
are the same alone and in any batch; the draws come in the order Captum's
``NoiseTunnel`` draws them for one example."""

from __future__ import annotations

import torch

from faithbench.benchmark.core.api import Batch, ExplainableModel, Target, example_generator


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
