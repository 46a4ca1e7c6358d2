"""Norm-based attention (Kobayashi, Kuribayashi, Yokoi & Inui 2020): a token's share of
the attention output is not its weight α_j but the length of what it adds there,
‖α_j f(x_j)‖, where f(x_j) is the vector the attention weights: the transformation the
model applies to the attended vectors after the weighting, up to its first nonlinearity.
A large weight on a token whose vector is small contributes little, which α alone hides.

f on each model (``attention_vectors`` of the model):

- BiLSTM classifier: f(h_t) = W_out h_t, the output layer (no bias: it is added once,
  after the sum); the first nonlinearity is the softmax over classes.
- NLI BiLSTM: f(h_t) = h_t; the two contexts enter |c_p − c_h| and c_p ⊙ c_h at once.
  Each side's weights sum to 1 over its own tokens.
- alignment seq2seq: f(h_t) = R_c h_t, the readout's columns that read the context (its
  tanh follows), at the step explained.
- BERT-layout Transformers (MiniLM): per head h, f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h,
  the value map and the head's slice of the output map (W_O's bias comes once, after
  the sum), and the heads summed as the paper's whole-layer measure: ‖Σ_h α_h,0,j f_h(x_j)‖
  for the [CLS] query (position 0) of the last layer (``layer`` another; that needs
  ``LAYER_ATTENTION``, so a BiLSTM refuses it).

Scores are renormalized to sum to 1 over the row's tokens (pieces on a Transformer, the
special tokens' share dropped, as ``attention`` does), so they compare with attention
weights directly. Target-independent, like attention.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import (
    ATTENTION_VECTORS,
    LAYER_ATTENTION,
    Batch,
    ExplainableModel,
    ExplainerSpec,
    Target,
    over_pieces,
)


@dataclass(frozen=True)
class AttentionNormExplainer:
    layer: int | None = None  # None: the attention the output reads (a Transformer's last layer)
    spec: ExplainerSpec = field(init=False)

    def __post_init__(self):
        needs = {ATTENTION_VECTORS} | ({LAYER_ATTENTION} if self.layer is not None else set())
        object.__setattr__(self, "spec", ExplainerSpec(
            name="attention_norm",
            version="1",
            requires=frozenset(needs),
            params=(("layer", self.layer),),
            deterministic=True,
            citation="Kobayashi, Kuribayashi, Yokoi & Inui 2020, Attention is not only a "
                     "weight: analyzing transformers with vector norms, EMNLP",
            description="‖Σ_h α_h,j f_h(x_j)‖: the norm of each token's attention-weighted "
                        "vector, f the linear map after the weighting (BiLSTM: the output "
                        "layer or readout; Transformer: W_V W_O per head, [CLS] row of the "
                        "last layer, heads summed); renormalized over the tokens.",
            cost="1 fwd",
        ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) norms summing to 1 over each row's tokens; zero at padding."""
        with torch.no_grad():
            if self.layer is None:
                weights, vectors, index = model.attention_vectors(batch)  # type: ignore[attr-defined]
            else:
                weights, vectors, index = model.attention_vectors(  # type: ignore[attr-defined]
                    batch, self.layer)
            # (B, H, S) x (B, H, S, K) -> (B, S, K): Σ_h α_h,j f_h(x_j), then its length
            summed = torch.einsum("bhs,bhsk->bsk", weights.double(), vectors.double())
            norms = summed.norm(dim=-1)
        return over_pieces(norms, index, batch.mask).float().masked_fill(~batch.mask, 0.0)


EXPLAINER = AttentionNormExplainer()
