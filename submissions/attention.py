"""Attention weights as explanation: the model's own additive-attention
distribution over input tokens (Bahdanau et al. 2015), the object of the
attention debate (Jain & Wallace 2019; Wiegreffe & Pinter 2019). It ignores
``target``: the model attends once, whatever class is explained."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from benchmark.core.api import ATTENTION, Batch, ExplainableModel, ExplainerSpec, Target


@dataclass(frozen=True)
class AttentionExplainer:
    spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(
        name="attention",
        version="1",
        requires=frozenset({ATTENTION}),
        params=(),
        deterministic=True,
        citation="Bahdanau, Cho & Bengio 2015, Neural machine translation by jointly learning to "
                 "align and translate; Jain & Wallace 2019, Attention is not explanation",
        description="The model's attention weights over input tokens (target-independent).",
    ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) attention weights; zero at padding."""
        with torch.no_grad():
            weights = model.attention(batch)  # (B, T)
        return weights.float().masked_fill(~batch.mask, 0.0)


EXPLAINER = AttentionExplainer()
