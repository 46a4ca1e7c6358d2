"""Attention times its gradient (Serrano & Smith 2019's AttGrad): α_t · ∂y/∂α_t, the
first-order share of the target logit y that flows through attention weight α_t, with
the attention held as a leaf: the model recomputes its logits from given weights
(``logits_from_attention``), so the gradient is wrt the weights themselves, not through
the scores that produced them. Signed: positive = the weight raises the target logit.

- BiLSTM classifier, NLI (each side's weights), alignment seq2seq (the attention at the
  step explained): the model's additive attention.
- BERT-layout Transformers: the last layer's [CLS] attention row, the one attention of
  that layer the classifier reads, per head; scores are the mean over heads of
  α_h,0,j · ∂y/∂α_h,0,j — Chefer, Gur & Wolf (2021)'s head-averaged grad ⊙ attention,
  kept signed (no positive part) as AttGrad is. The special tokens' products are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import ATTENTION_GRADIENT, Batch, ExplainableModel, ExplainerSpec, Target


@dataclass(frozen=True)
class AttentionXGradientExplainer:
    spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(
        name="attention_x_gradient",
        version="1",
        requires=frozenset({ATTENTION_GRADIENT}),
        params=(),
        deterministic=True,
        citation="Serrano & Smith 2019, Is attention interpretable?, ACL; Chefer, Gur & "
                 "Wolf 2021, Generic attention-model explainability for interpreting "
                 "bi-modal and encoder-decoder transformers, ICCV",
        description="α_t · ∂ logit_target / ∂α_t with the attention weights as a leaf "
                    "(signed); on a Transformer the last layer's [CLS] row, the product "
                    "averaged over heads.",
        cost="2 fwd + 1 bwd",
    ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) signed scores; zero at padding."""
        with torch.no_grad():
            weights, index = model.attention_leaf(batch)  # type: ignore[attr-defined]
        with torch.enable_grad():
            leaf = weights.detach().requires_grad_(True)  # (B, H, S)
            logits = model.logits_from_attention(leaf, batch)  # type: ignore[attr-defined]
            picked = logits.gather(1, target.view(-1, 1).to(logits.device)).sum()
            (grads,) = torch.autograd.grad(picked, leaf)  # rows do not interact
        per_position = (leaf.detach() * grads).mean(dim=1)  # (B, S)
        scores = per_position.gather(1, index.clamp(min=0)) * batch.mask
        return scores.float().masked_fill(~batch.mask, 0.0)


EXPLAINER = AttentionXGradientExplainer()
