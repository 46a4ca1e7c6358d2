"""Encoder pieces shared by the task models."""

from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from faithbench.benchmark.core import lrp
from faithbench.benchmark.core.api import (
    ATTENTION,
    ATTENTION_GRADIENT,
    ATTENTION_VECTORS,
    EMBEDDINGS,
    GRADIENTS,
    LRP,
)
from faithbench.benchmark.core.models import deception


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


class OrthogonalBiLSTMEncoder(nn.Module):
    """Mohankumar et al. (2020)'s Orthogonal LSTM, in both directions: at each step the
    new hidden state loses its component along m, the sum of the direction's earlier
    (already orthogonalised) hidden states, h_t <- h_t - (h_t . m) / (m . m + 1e-6) m,
    and that state is both the output and what the next step reads; the cell state is
    left alone. Padded steps change nothing and output zero. Unrolled step by step (a
    Python loop over positions), so slower than ``BiLSTMEncoder``."""

    def __init__(self, input_dim: int, hidden: int):
        super().__init__()
        self.forward_cell = nn.LSTMCell(input_dim, hidden)
        self.backward_cell = nn.LSTMCell(input_dim, hidden)
        self.hidden = hidden
        self.output_dim = 2 * hidden

    def _direction(self, cell: nn.LSTMCell, embeds: torch.Tensor, mask: torch.Tensor,
                   steps) -> torch.Tensor:
        b = embeds.shape[0]
        h = embeds.new_zeros(b, self.hidden)
        c = embeds.new_zeros(b, self.hidden)
        total = embeds.new_zeros(b, self.hidden)
        out = embeds.new_zeros(b, embeds.shape[1], self.hidden)
        for t in steps:
            real = mask[:, t].unsqueeze(1)
            h_new, c_new = cell(embeds[:, t], (h, c))
            along = (h_new * total).sum(1, keepdim=True) / ((total * total).sum(1, keepdim=True)
                                                            + 1e-6)
            h_new = h_new - along * total
            h = torch.where(real, h_new, h)
            c = torch.where(real, c_new, c)
            total = total + h_new * real
            out[:, t] = h_new * real
        return out

    def forward(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        mask = nonempty(mask)
        t = embeds.shape[1]
        ahead = self._direction(self.forward_cell, embeds, mask, range(t))
        back = self._direction(self.backward_cell, embeds, mask, range(t - 1, -1, -1))
        return torch.cat([ahead, back], dim=-1)

    def lrp_forward(self, embeds: torch.Tensor, mask: torch.Tensor, eps: float) -> torch.Tensor:
        raise ValueError("LRP is not defined for the Orthogonal LSTM (its projection has no "
                         "LRP rule here); explain this model with another explainer")


def variant_dict(config: dict) -> dict:
    """A model config as its cache key hashes it: the debate's variant fields left out at
    their defaults, so the models trained before they existed keep their keys."""
    for name, default in (("bilstm", None), ("diversity_weight", 0.0), ("deceive_weight", 0.0)):
        if config.get(name) == default:
            config.pop(name, None)
    return config


def encoder_for(variant: str | None, input_dim: int, hidden: int
                ) -> BiLSTMEncoder | OrthogonalBiLSTMEncoder:
    """The encoder of a BiLSTM variant (``TaskOptions.bilstm``)."""
    if variant == "orthogonal":
        return OrthogonalBiLSTMEncoder(input_dim, hidden)
    return BiLSTMEncoder(input_dim, hidden)


def conicity(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B,) Mohankumar et al.'s conicity: the mean over real positions of
    |cos(h_t, mean of the row's real h)| (1: all states along one direction)."""
    m = mask.unsqueeze(-1).to(states.dtype)
    mean = (states * m).sum(1) / m.sum(1).clamp(min=1)
    cos = nn.functional.cosine_similarity(states, mean.unsqueeze(1).expand_as(states), dim=-1,
                                          eps=1e-8)
    return (cos.abs() * mask).sum(1) / mask.sum(1).clamp(min=1)


class AdditiveAttention(nn.Module):
    """Bahdanau-style attention: score_t = v·tanh(W h_t [+ U q]); softmax over real tokens.
    ``uniform``: the weights are frozen at 1/n over the real tokens (Wiegreffe & Pinter's
    baseline; the scoring layers are then never used)."""

    def __init__(self, state_dim: int, attn_dim: int, query_dim: int = 0, uniform: bool = False):
        super().__init__()
        self.key = nn.Linear(state_dim, attn_dim)
        self.query = nn.Linear(query_dim, attn_dim, bias=False) if query_dim else None
        self.v = nn.Linear(attn_dim, 1, bias=False)
        self.uniform = uniform

    def forward(self, states: torch.Tensor, mask: torch.Tensor, query: torch.Tensor | None = None,
                weights: torch.Tensor | None = None):
        """Returns weights (B, T) and the context (B, state_dim); given ``weights``
        (``logits_from_attention``) take the place of the computed ones."""
        if weights is None and self.uniform:
            real = nonempty(mask).to(states.dtype)
            weights = real / real.sum(dim=1, keepdim=True)
        if weights is None:
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


def positions(mask: torch.Tensor) -> torch.Tensor:
    """(B, T) each batch position's own index, -1 at padding (the ``index`` a one-sequence
    model returns where a Transformer returns each piece's place in its full sequence)."""
    return torch.where(mask, torch.arange(mask.shape[1], device=mask.device), -1)


class AttentionParts:
    """``ATTENTION_VECTORS`` and ``ATTENTION_GRADIENT`` of a model whose output reads one
    additive attention, derived from ``_attend(embeds, batch, weights=None) -> (logits
    (B, C), weights (B, T), vectors (B, T, K))``: the weights the model uses (given
    ``weights`` replace them), and f(h_t), the linear map the model applies to the
    attended states after the weighting and before its first nonlinearity, so that the
    attention's contribution there is Σ_t α_t f(h_t) (Kobayashi et al. 2020's f(x)).

    Shapes follow a Transformer's (one head, one query, and the batch's own positions):
    weights (B, 1, T), vectors (B, 1, T, K), index (B, T)."""

    def embed(self, batch) -> torch.Tensor:
        raise NotImplementedError

    def _encode(self, embeds: torch.Tensor, batch) -> object:
        """What the attention weighs (the encoder's states), weights aside."""
        raise NotImplementedError

    def _read(self, encoded, batch, weights: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(logits, weights, vectors) from ``_encode``'s output; given ``weights`` (B, T)
        take the place of the computed ones."""
        raise NotImplementedError

    def _attend(self, embeds: torch.Tensor, batch, weights: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self._read(self._encode(embeds, batch), batch, weights)

    def logits_fixed_attention(self, embeds: torch.Tensor, batch, weights: torch.Tensor
                               ) -> torch.Tensor:
        """(B, C) logits from ``embeds`` with ``weights`` (B, 1, T) in place of the
        attention: a gradient wrt the embeddings then flows around the weights (Jain &
        Wallace's gradient importance, which detaches attention)."""
        return self._attend(embeds, batch, weights[:, 0])[0]

    def attention_readout(self, batch):
        """A function (B, 1, T) weights -> (B, C) logits that reuses the encoder's states,
        computed once here without gradients: the attention experiments of the debate
        (``faithbench.benchmark.debate``) put thousands of weightings on fixed states,
        as Jain & Wallace do. The same logits as ``logits_from_attention`` (which a model
        without ``_encode``, the seq2seq decoder, recomputes on every call)."""
        if type(self)._encode is AttentionParts._encode:
            return lambda weights: self.logits_from_attention(weights, batch)
        with torch.no_grad():
            encoded = self._encode(self.embed(batch), batch)
        return lambda weights: self._read(encoded, batch, weights[:, 0])[0]

    def attention_vectors(self, batch, layer: int | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, 1, T) attention weights, (B, 1, T, K) the vectors f(h_t) they weight, and
        (B, T) positions (-1 at padding)."""
        if layer is not None:
            raise ValueError("this model has one attention; layer selects a Transformer's")
        _, weights, vectors = self._attend(self.embed(batch), batch)
        return weights.unsqueeze(1), vectors.unsqueeze(1), positions(batch.mask)

    def attention_leaf(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, 1, T) the attention weights ``logits_from_attention`` takes, and (B, T)
        positions (-1 at padding)."""
        _, weights, _ = self._attend(self.embed(batch), batch)
        return weights.unsqueeze(1), positions(batch.mask)

    def logits_from_attention(self, weights: torch.Tensor, batch) -> torch.Tensor:
        """(B, C) the logits with ``weights`` (B, 1, T) in place of the model's attention:
        differentiable wrt ``weights`` (the attention as a leaf, Serrano & Smith 2019)."""
        return self._attend(self.embed(batch), batch, weights[:, 0])[0]


class AttentionModelSurface(AttentionParts, nn.Module):
    """The model surface of faithbench.api, derived from one method
    ``_forward(embeds, batch) -> (logits (B, C), attention weights (B, T))`` and an
    ``embedding`` table, so every task model exposes it the same way."""

    embedding: nn.Embedding
    config: Any

    def _forward(self, embeds: torch.Tensor, batch) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def lrp_logits(self, embeds: torch.Tensor, batch, eps: float = lrp.EPS) -> torch.Tensor:
        """The logits (eval mode: no dropout), by a forward pass whose backward
        propagates LRP relevance (``faithbench.benchmark.core.lrp``)."""
        raise NotImplementedError

    def embed(self, batch) -> torch.Tensor:
        return self.embedding(batch.ids)

    def training_loss(self, batch, labels: torch.Tensor) -> torch.Tensor:
        """Cross-entropy, plus λ · the batch's mean conicity of the encoder's states for
        the Diversity LSTM (Mohankumar et al. 2020; λ = ``config.diversity_weight``),
        plus λ · the batch's mean deception penalty for a deceptive model (Pruthi et al.
        2020, ``core.models.deception``; λ = ``config.deceive_weight``)."""
        diversity = getattr(self.config, "diversity_weight", 0.0)
        deceive = getattr(self.config, "deceive_weight", 0.0)
        if not diversity and not deceive:
            return nn.functional.cross_entropy(self.logits(batch), labels)
        encoded = self._encode(self.embed(batch), batch)
        logits, weights, _ = self._read(encoded, batch)
        loss = nn.functional.cross_entropy(logits, labels)
        if diversity:
            loss = loss + diversity * self._conicity(encoded, batch).mean()
        if deceive:
            loss = loss + deceive * deception.hammer(weights, deception.require(batch),
                                                     *self._attention_groups(batch)).mean()
        return loss

    def _attention_groups(self, batch) -> tuple[torch.Tensor | None, int]:
        """Which attention distribution each position of ``_read``'s weights belongs
        to, and how many there are: one, over the whole row."""
        return None, 1

    @torch.no_grad()
    def attention_mass(self, batch, tokens: torch.Tensor) -> torch.Tensor:
        """(B,) the attention mass on ``tokens`` (B, T) bool, summed over the model's
        attention distributions (eval: no dropout): what deceptive training lowers."""
        _, weights, _ = self._read(self._encode(self.embed(batch), batch), batch)
        return deception.group_mass(weights, tokens, *self._attention_groups(batch)).sum(1)

    def _conicity(self, encoded, batch) -> torch.Tensor:
        """(B,) the conicity of the states ``_encode`` returned."""
        raise NotImplementedError

    def conicity(self, batch) -> torch.Tensor:
        """(B,) the conicity of the encoder's states on ``batch`` (eval: no dropout)."""
        with torch.no_grad():
            return self._conicity(self._encode(self.embed(batch), batch), batch)

    @property
    def capabilities(self) -> frozenset:
        """The model surface's; no LRP for the Orthogonal LSTM (no rule for its step)."""
        every = frozenset({GRADIENTS, EMBEDDINGS, ATTENTION, LRP, ATTENTION_VECTORS,
                           ATTENTION_GRADIENT})
        return every - {LRP} if getattr(self.config, "bilstm", None) == "orthogonal" else every

    def logits_from_embeddings(self, embeds: torch.Tensor, batch) -> torch.Tensor:
        return self._forward(embeds, batch)[0]

    def logits(self, batch) -> torch.Tensor:
        return self.logits_from_embeddings(self.embed(batch), batch)

    def attention(self, batch) -> torch.Tensor:
        return self._forward(self.embed(batch), batch)[1] * batch.mask

    def forward(self, batch) -> torch.Tensor:
        return self.logits(batch)
