"""Attention rollout (Abnar & Zuidema 2020): how much each input position reaches the
[CLS] position through every layer, attention and residual stream together.

For each layer l, with A_l the attention averaged over heads (or their maximum),
Â_l = ½ A_l + ½ I (the residual connection), rows renormalized to sum to 1; the
rollout is R = Â_L · … · Â_1, and a piece's score is R's [CLS] row at its position,
renormalized over the pieces (special tokens dropped); on a decoder, which answers at
its last position, the row is that position's (the model's ``query``), and the causal
mask keeps each row to the positions before it. Raw attention of one layer
ignores that tokens are already mixed by the layers below (Bastings & Filippova's
point); rollout follows the mixing. It needs every layer's attention
(``LAYER_ATTENTION``): on a one-layer additive-attention BiLSTM there is nothing to
roll out, and the capability check refuses it. Target-independent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import (
    LAYER_ATTENTION,
    Batch,
    ExplainableModel,
    ExplainerSpec,
    Target,
    over_pieces,
)

HEADS = ("mean", "max")


def rollout(maps: torch.Tensor, heads: str = "mean") -> torch.Tensor:
    """(B, S, S) rolled-out attention from (B, L, H, S, S) per-layer maps.

    >>> a = torch.tensor([[0.0, 1.0], [0.0, 1.0]])  # both positions attend to position 1
    >>> rollout(a.view(1, 1, 1, 2, 2))[0]
    tensor([[0.5000, 0.5000],
            [0.0000, 1.0000]])
    """
    per_layer = maps.mean(2) if heads == "mean" else maps.max(2).values  # (B, L, S, S)
    eye = torch.eye(per_layer.shape[-1], dtype=per_layer.dtype, device=per_layer.device)
    out = None
    for layer in range(per_layer.shape[1]):
        a = 0.5 * per_layer[:, layer] + 0.5 * eye
        a = a / a.sum(-1, keepdim=True)
        out = a if out is None else torch.bmm(a, out)
    return out


@dataclass(frozen=True)
class AttentionRolloutExplainer:
    heads: str = "mean"
    spec: ExplainerSpec = field(init=False)

    def __post_init__(self):
        if self.heads not in HEADS:
            raise ValueError(f"attention_rollout: heads must be one of {', '.join(HEADS)}, "
                             f"got {self.heads!r}")
        object.__setattr__(self, "spec", ExplainerSpec(
            name="attention_rollout",
            version="1",
            requires=frozenset({LAYER_ATTENTION}),
            params=(("heads", self.heads), ("residual", 0.5)),
            deterministic=True,
            citation="Abnar & Zuidema 2020, Quantifying attention flow in transformers, ACL",
            description="[CLS] row of the product over layers of (attention + identity)/2, "
                        "heads averaged; target-independent.",
            cost="1 fwd",
        ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) rollout scores summing to 1 over each row's pieces; zero at padding."""
        with torch.no_grad():
            maps, index = model.attention_maps(batch)
            # the scored position's row: [CLS] (0) of an encoder, a decoder's last
            row = rollout(maps.double(), self.heads)[:, getattr(model, "query", 0), :]
        return over_pieces(row, index, batch.mask).float().masked_fill(~batch.mask, 0.0)


EXPLAINER = AttentionRolloutExplainer()
