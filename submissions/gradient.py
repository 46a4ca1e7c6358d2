"""Vanilla gradient saliency: the L2 norm, over the embedding dimension, of
d logit_target / d embedding at each token (Simonyan, Vedaldi & Zisserman 2014;
Li, Chen, Hovy & Jurafsky 2016). Unsigned: it says how sensitive the target
logit is to a token, not in which direction."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import EMBEDDINGS, GRADIENTS, Batch, ExplainableModel, ExplainerSpec, Target


def target_logit_gradient(model: ExplainableModel, batch: Batch, target: Target):
    """(embeds, grads), both (B, T, D): d logit_target / d embeds, one backward pass.

    Rows do not interact in the model, so the gradient of the summed target
    logits wrt row b's embeddings is that row's own gradient. Gradients are
    taken wrt the (detached) embeddings only; nothing accumulates on parameters.
    """
    with torch.enable_grad():
        embeds = model.embed(batch).detach().requires_grad_(True)  # (B, T, D)
        logits = model.logits_from_embeddings(embeds, batch)  # (B, C)
        picked = logits.gather(1, target.view(-1, 1).to(logits.device)).sum()
        (grads,) = torch.autograd.grad(picked, embeds)
    return embeds.detach(), grads


@dataclass(frozen=True)
class GradientExplainer:
    spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(
        name="gradient",
        version="1",
        requires=frozenset({GRADIENTS, EMBEDDINGS}),
        params=(("norm", "l2"),),
        deterministic=True,
        citation="Simonyan, Vedaldi & Zisserman 2014, Deep inside convolutional networks; "
                 "Li, Chen, Hovy & Jurafsky 2016, Visualizing and understanding neural models "
                 "in NLP",
        description="L2 norm over the embedding dimension of d logit_target / d embedding.",
        cost="1 fwd + 1 bwd",
    ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) gradient norms; zero at padding."""
        _, grads = target_logit_gradient(model, batch, target)
        return grads.norm(p=2, dim=-1).float().masked_fill(~batch.mask, 0.0)


EXPLAINER = GradientExplainer()
