"""Encoder pieces shared by the task models."""

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from faithbench.benchmark.core import lrp
from faithbench.benchmark.core.api import ATTENTION, EMBEDDINGS, GRADIENTS, LRP


class BiLSTMEncoder(nn.Module):
    """(B, T, D) embeddings -> (B, T, 2H) states; padded positions are zero."""

    def __init__(self, input_dim: int, hidden: int):
        super().__init__()
        self.rnn = nn.LSTM(input_dim, hidden, batch_first=True, bidirectional=True)
        self.output_dim = 2 * hidden

    def forward(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        lengths = mask.sum(dim=1).clamp(min=1).cpu()  # an emptied row runs over one pad step
        packed = pack_padded_sequence(embeds, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=embeds.shape[1])
        return out

    def lrp_forward(self, embeds: torch.Tensor, mask: torch.Tensor, eps: float) -> torch.Tensor:
        """``forward``, unrolled step by step in LRP operations (``core.lrp.bilstm``)."""
        return lrp.bilstm(self.rnn, embeds, nonempty(mask), eps)


class AdditiveAttention(nn.Module):
    """Bahdanau-style attention: score_t = v·tanh(W h_t [+ U q]); softmax over real tokens."""

    def __init__(self, state_dim: int, attn_dim: int, query_dim: int = 0):
        super().__init__()
        self.key = nn.Linear(state_dim, attn_dim)
        self.query = nn.Linear(query_dim, attn_dim, bias=False) if query_dim else None
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, states: torch.Tensor, mask: torch.Tensor, query: torch.Tensor | None = None):
        """Returns weights (B, T) and the context (B, state_dim)."""
        hidden = self.key(states)
        if self.query is not None and query is not None:
            hidden = hidden + self.query(query).unsqueeze(1)
        scores = self.v(torch.tanh(hidden)).squeeze(-1)
        mask = nonempty(mask)
        weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        context = torch.bmm(weights.unsqueeze(1), states).squeeze(1)
        return weights, context

    def lrp_forward(self, states: torch.Tensor, mask: torch.Tensor, eps: float,
                    query: torch.Tensor | None = None) -> torch.Tensor:
        """The context, its weights held constant (no relevance reaches the scores)."""
        with torch.no_grad():
            weights, _ = self.forward(states, mask, query)
        return lrp.attention_context(weights, states, eps)


def nonempty(mask: torch.Tensor) -> torch.Tensor:
    """Treat an all-erased row as one (padding) token, so softmax stays defined."""
    empty = ~mask.any(dim=1)
    if empty.any():
        mask = mask.clone()
        mask[empty, 0] = True
    return mask


class AttentionModelSurface(nn.Module):
    """The model surface of faithbench.api, derived from one method
    ``_forward(embeds, batch) -> (logits (B, C), attention weights (B, T))`` and an
    ``embedding`` table, so every task model exposes it the same way."""

    embedding: nn.Embedding
    capabilities = frozenset({GRADIENTS, EMBEDDINGS, ATTENTION, LRP})

    def _forward(self, embeds: torch.Tensor, batch) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def lrp_logits(self, embeds: torch.Tensor, batch, eps: float = lrp.EPS) -> torch.Tensor:
        """The logits (eval mode: no dropout), by a forward pass whose backward
        propagates LRP relevance (``faithbench.benchmark.core.lrp``)."""
        raise NotImplementedError

    def embed(self, batch) -> torch.Tensor:
        return self.embedding(batch.ids)

    def logits_from_embeddings(self, embeds: torch.Tensor, batch) -> torch.Tensor:
        return self._forward(embeds, batch)[0]

    def logits(self, batch) -> torch.Tensor:
        return self.logits_from_embeddings(self.embed(batch), batch)

    def attention(self, batch) -> torch.Tensor:
        return self._forward(self.embed(batch), batch)[1] * batch.mask

    def forward(self, batch) -> torch.Tensor:
        return self.logits(batch)
