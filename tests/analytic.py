"""A bag-of-words analytic model for tests whose answers are worked out by hand.

    logits(x) = bias + Σ_{real positions t} W[ids_t]        (C classes, W: (V, C))

The embedding of a token *is* its weight row (D = C), the embedding of padding is
zero, and attention is uniform over real tokens. So deleting a token (``delete``
eraser) or replacing it by padding (``pad``) subtracts exactly its weight row, and
the ``mask`` eraser swaps it for W[mask_id], which a test chooses: every
probability is a softmax a test can compute with ``math.exp``.

API (import as ``from tests.analytic import ...``; keep it this small):

- ``BagOfWords(weights, bias=None)``: ``weights`` maps token id -> C weights
  (ids 0 = pad, 1 = mask; a missing id has weight 0; pad is forced to 0).
  Implements the model surface: ``pad_id``, ``mask_id``, ``baseline_id``,
  ``logits``, ``embed``, ``logits_from_embeddings``, ``attention``;
  plus ``contributions(batch, target)``, the exact per-token evidence for
  ``target`` over the other class (C = 2): W[id, ŷ] − W[id, 1 − ŷ].
- ``make_batch(rows, example_ids=None, segments=None)``: a right-padded ``Batch``
  from lists of token ids.
- ``hand_keys(example_id, n)``: the n tie keys of an example as the metric cards define
  them, written out independently of ``ranking.tie_keys``.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from faithbench.benchmark.core.api import Batch

PAD_ID, MASK_ID = 0, 1


class BagOfWords:
    """logits = bias + Σ over real tokens of W[id]; computed in float64."""

    pad_id = PAD_ID
    mask_id = MASK_ID
    baseline_id = PAD_ID

    def __init__(
        self, weights: dict[int, tuple[float, ...]], bias: tuple[float, ...] | None = None
    ):
        classes = len(next(iter(weights.values())))
        vocab = max(max(weights), MASK_ID) + 1
        self.W = torch.zeros(vocab, classes, dtype=torch.float64)  # (V, C)
        for token, row in weights.items():
            self.W[token] = torch.tensor(row, dtype=torch.float64)
        self.W[PAD_ID] = 0.0  # padding embeds to zero, so it adds nothing
        self.bias = (
            torch.zeros(classes, dtype=torch.float64)
            if bias is None
            else torch.tensor(bias, dtype=torch.float64)
        )

    def embed(self, batch: Batch) -> torch.Tensor:
        """(B, T, C): each token's weight row; zero at padded positions."""
        return self.W[batch.ids] * batch.mask.unsqueeze(-1)

    def logits_from_embeddings(self, embeds: torch.Tensor, batch: Batch) -> torch.Tensor:
        """(B, C) bias + sum of the real positions' embeddings."""
        return self.bias + (embeds * batch.mask.unsqueeze(-1)).sum(dim=1)

    def logits(self, batch: Batch) -> torch.Tensor:
        return self.logits_from_embeddings(self.embed(batch), batch)

    def attention(self, batch: Batch) -> torch.Tensor:
        """(B, T) uniform over real tokens."""
        m = batch.mask.to(torch.float64)
        return m / m.sum(dim=1, keepdim=True).clamp(min=1)

    def contributions(self, batch: Batch, target: torch.Tensor) -> torch.Tensor:
        """(B, T) W[id, ŷ] − W[id, other] (two classes): the oracle explanation."""
        if self.W.shape[1] != 2:
            raise ValueError("contributions are defined for two classes")
        w = self.W[batch.ids]  # (B, T, 2)
        t = target.view(-1, 1)
        own = w[..., 0].where(t == 0, w[..., 1])
        other = w[..., 1].where(t == 0, w[..., 0])
        return (own - other) * batch.mask


def make_batch(rows: list[list[int]], example_ids=None, segments=None) -> Batch:
    """Right-padded Batch from token-id lists; ids default to "ex0", "ex1", ..."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), PAD_ID, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    seg = None if segments is None else torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = True
        if seg is not None:
            seg[i, : len(row)] = torch.tensor(segments[i], dtype=torch.long)
    example_ids = tuple(example_ids or (f"ex{i}" for i in range(len(rows))))
    return Batch(ids=ids, mask=mask, example_ids=example_ids, segments=seg)


def hand_keys(example_id: str, n: int) -> list[float]:
    """n draws of numpy's default generator seeded by the first 8 bytes (little-endian)
    of blake2b over "faithbench ties 1", NUL, the example's id: lower key first among
    equal scores."""
    digest = hashlib.blake2b(f"faithbench ties 1\0{example_id}".encode(), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(digest, "little")).random(n).tolist()
