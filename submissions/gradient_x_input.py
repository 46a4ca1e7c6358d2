"""Gradient × input: the signed dot product, per token, of d logit_target /
d embedding with the embedding itself (Shrikumar et al. 2016; Denil, Demiraj &
de Freitas 2014). It is the first-order Taylor term of the target logit
against an all-zero input, so positive = evidence for ``target``."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import EMBEDDINGS, GRADIENTS, Batch, ExplainableModel, ExplainerSpec, Target


@dataclass(frozen=True)
class GradientXInputExplainer:
    spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(
        name="gradient_x_input",
        version="1",
        requires=frozenset({GRADIENTS, EMBEDDINGS}),
        params=(("reduction", "dot"),),
        deterministic=True,
        citation="Shrikumar, Greenside, Shcherbina & Kundaje 2016, Not just a black box; "
                 "Denil, Demiraj & de Freitas 2014, Extraction of salient sentences from "
                 "labelled documents",
        description="Signed dot product of d logit_target / d embedding with the embedding, "
                    "per token.",
        cost="1 fwd + 1 bwd",
    ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) signed scores; zero at padding."""
        with torch.enable_grad():
            embeds = model.embed(batch).detach().requires_grad_(True)  # (B, T, D)
            logits = model.logits_from_embeddings(embeds, batch)  # (B, C)
            picked = logits.gather(1, target.view(-1, 1).to(logits.device)).sum()
            (grads,) = torch.autograd.grad(picked, embeds)  # rows are independent
        scores = (grads * embeds.detach()).sum(dim=-1)  # (B, T)
        return scores.float().masked_fill(~batch.mask, 0.0)


EXPLAINER = GradientXInputExplainer()
