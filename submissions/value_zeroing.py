"""Value zeroing (Mohebbi, Zuidema, Chrupała & Alishahi 2023): how much token i's output
of a layer changes when token j's value vector is zeroed in every head of that layer,
the rest of the layer (its input, the attention weights, residual, LayerNorms and
feed-forward) as it is. It measures context mixing by the whole encoder layer, where
attention weights see only one part of it.

Per layer l: C_l[i, j] = cosine distance between x_i^l and x_i^l with v_j zeroed, rows
normalized to sum to 1 (``value_zeroing_maps`` of the model, the T variants of an
example batched in one pass per layer); then rollout across layers as the authors
aggregate, R = C_L · … · C_1 (no identity added: the residual is inside C_l), and a
piece's score is R's [CLS] row at its position, renormalized over the pieces (special
tokens dropped) as ``attention_rollout`` does. Target-independent.

BERT-layout Transformers only (``VALUE_ZEROING``): a BiLSTM has no value vectors, and
the capability check refuses it by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import (
    VALUE_ZEROING,
    Batch,
    ExplainableModel,
    ExplainerSpec,
    Target,
    over_pieces,
)


def rollout(maps: torch.Tensor) -> torch.Tensor:
    """(B, S, S) the product C_L · … · C_1 of (B, L, S, S) per-layer maps.

    >>> c = torch.tensor([[0.0, 1.0], [0.5, 0.5]])
    >>> rollout(torch.stack([torch.eye(2), c]).unsqueeze(0))[0]
    tensor([[0.0000, 1.0000],
            [0.5000, 0.5000]])
    """
    out = maps[:, 0]
    for layer in range(1, maps.shape[1]):
        out = torch.bmm(maps[:, layer], out)
    return out


@dataclass(frozen=True)
class ValueZeroingExplainer:
    spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(
        name="value_zeroing",
        version="1",
        requires=frozenset({VALUE_ZEROING}),
        params=(("aggregation", "rollout"), ("distance", "cosine")),
        deterministic=True,
        citation="Mohebbi, Zuidema, Chrupała & Alishahi 2023, Quantifying context mixing "
                 "in transformers, EACL",
        description="Per layer, the cosine distance of each token's output when one "
                    "token's value vector is zeroed, rows normalized; rolled out over the "
                    "layers, [CLS] row; target-independent.",
        cost="S + 1 fwd (S = pieces + special tokens: a copy per position, its value zeroed)",
    ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) scores summing to 1 over each row's pieces; zero at padding."""
        with torch.no_grad():
            maps, index = model.value_zeroing_maps(batch)  # type: ignore[attr-defined]
            # the scored position's row: [CLS] (0) of an encoder, a decoder's last
            row = rollout(maps.double())[:, getattr(model, "query", 0), :]  # (B, S)
        return over_pieces(row, index, batch.mask).float().masked_fill(~batch.mask, 0.0)


EXPLAINER = ValueZeroingExplainer()
