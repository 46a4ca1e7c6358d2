"""Attention weights as explanation: the model's own attention distribution over
input tokens (Bahdanau et al. 2015), the object of the attention debate (Jain &
Wallace 2019; Wiegreffe & Pinter 2019). It ignores ``target``: the model attends
once, whatever class is explained.

On the BiLSTM models that is their additive attention. On a Transformer
(``model.attention``) it is, by default, the last layer's [CLS] row averaged over the
heads, renormalized over the text's pieces (special tokens dropped): the attention of
the position the classifier reads. ``layer`` (an index, negative from the end) and
``heads`` ("mean" or "max") choose another reading; they need every layer's attention
(``LAYER_ATTENTION``), so a BiLSTM refuses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import (
    ATTENTION,
    LAYER_ATTENTION,
    Batch,
    ExplainableModel,
    ExplainerSpec,
    Target,
    token_attention,
)

HEADS = ("mean", "max")


@dataclass(frozen=True)
class AttentionExplainer:
    layer: int | None = None  # None: the model's own reading (a Transformer's last layer)
    heads: str | None = None  # None: the model's own reading (a Transformer's mean)
    spec: ExplainerSpec = field(init=False)

    def __post_init__(self):
        if self.heads not in (None, *HEADS):
            raise ValueError(f"attention: heads must be one of {', '.join(HEADS)}, "
                             f"got {self.heads!r}")
        custom = self.layer is not None or self.heads is not None
        object.__setattr__(self, "spec", ExplainerSpec(
            name="attention",
            version="1",
            requires=frozenset({LAYER_ATTENTION if custom else ATTENTION}),
            params=(("heads", self.heads), ("layer", self.layer)),
            deterministic=True,
            citation="Bahdanau, Cho & Bengio 2015, Neural machine translation by jointly "
                     "learning to align and translate; Jain & Wallace 2019, Attention is not "
                     "explanation",
            description="The model's attention weights over input tokens (target-independent);"
                        " on a Transformer the [CLS] row of one layer, heads aggregated.",
            cost="1 fwd",
        ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) attention weights; zero at padding."""
        with torch.no_grad():
            if self.layer is None and self.heads is None:
                weights = model.attention(batch)  # (B, T)
            else:
                maps, index = model.attention_maps(batch)
                weights = token_attention(maps, index, batch.mask,
                                          layer=-1 if self.layer is None else self.layer,
                                          heads=self.heads or "mean",
                                          query=getattr(model, "query", 0))
        return weights.float().masked_fill(~batch.mask, 0.0)


EXPLAINER = AttentionExplainer()
