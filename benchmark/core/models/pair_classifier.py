"""Sentence-pair classifier for NLI: a shared embedding, BiLSTM encoders for the
premise and the hypothesis, additive attention over the tokens of *both*
sentences — each side attends over its own tokens conditioned on the other side's
mean state — and an MLP over [c_p; c_h; |c_p − c_h|; c_p ⊙ c_h].

Both sentences travel in one Batch row, premise then hypothesis, told apart by
``segments`` (0 / 1), so an explainer scores every input token in one (B, T)
tensor and attention competes with saliency on the same positions. The model
splits the row by segment itself, so deleting tokens (which keeps order and
segment ids) needs nothing special.
"""

from dataclasses import asdict, dataclass
from typing import cast

import torch
from torch import nn

from faithbench.benchmark.core import lrp
from faithbench.benchmark.core.api import Batch
from faithbench.benchmark.core.models.blocks import (
    AdditiveAttention,
    AttentionModelSurface,
    conicity,
    encoder_for,
    nonempty,
    variant_dict,
)


@dataclass(frozen=True)
class PairConfig:
    vocab_size: int
    num_classes: int
    embed_dim: int = 128
    hidden: int = 128
    attn_dim: int = 128
    mlp_dim: int = 128
    dropout: float = 0.3
    shared_encoder: bool = False  # one BiLSTM for both sentences (fewer parameters)
    pad_id: int = 0
    unk_id: int = 1
    bilstm: str | None = None  # a variant of the debate: uniform, orthogonal or diversity
    diversity_weight: float = 0.0  # λ of the conicity term (the Diversity LSTM)
    deceive_weight: float = 0.0  # λ of the deception penalty (Pruthi et al. 2020)

    def as_dict(self) -> dict:
        return variant_dict(asdict(self))


def split_segment(embeds: torch.Tensor, batch: Batch, segment: int):
    """Left-align the real tokens of one segment: (B, S, D) embeddings, (B, S) mask,
    and (B, S) their positions in the row (to scatter weights back)."""
    take = batch.mask & (batch.segments == segment)  # (B, T)
    order = torch.sort((~take).to(torch.int8), dim=1, stable=True).indices
    width = max(int(take.sum(dim=1).max()) if take.numel() else 0, 1)
    positions = order[:, :width]  # (B, S)
    mask = take.gather(1, positions)
    picked = embeds.gather(1, positions.unsqueeze(-1).expand(-1, -1, embeds.shape[-1]))
    return picked * mask.unsqueeze(-1), mask, positions


def side_weights(weights: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor
                 ) -> torch.Tensor:
    """One side's (B, S) attention weights from row-level (B, T) ``weights``; an empty
    side keeps ``nonempty``'s convention (its one padding step takes weight 1)."""
    picked = weights.gather(1, positions) * mask
    first = torch.arange(mask.shape[1], device=mask.device) == 0
    return picked + (~mask.any(dim=1, keepdim=True) & first).to(picked.dtype)


def masked_mean(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = nonempty(mask)
    w = mask.unsqueeze(-1).float()
    return (states * w).sum(1) / w.sum(1)


class PairAttentionClassifier(AttentionModelSurface):
    def __init__(self, config: PairConfig):
        super().__init__()
        self.config = config
        self.pad_id = config.pad_id
        self.mask_id = config.unk_id
        self.baseline_id = config.pad_id
        self.embedding = nn.Embedding(config.vocab_size, config.embed_dim, padding_idx=config.pad_id)
        self.premise_encoder = encoder_for(config.bilstm, config.embed_dim, config.hidden)
        self.hypothesis_encoder = (
            self.premise_encoder if config.shared_encoder
            else encoder_for(config.bilstm, config.embed_dim, config.hidden))
        d = self.premise_encoder.output_dim
        uniform = config.bilstm == "uniform"
        self.premise_attn = AdditiveAttention(d, config.attn_dim, query_dim=d, uniform=uniform)
        self.hypothesis_attn = AdditiveAttention(d, config.attn_dim, query_dim=d,
                                                 uniform=uniform)
        self.dropout = nn.Dropout(config.dropout)
        self.mlp = nn.Sequential(nn.Linear(4 * d, config.mlp_dim), nn.Tanh(),
                                 nn.Dropout(config.dropout), nn.Linear(config.mlp_dim, config.num_classes))

    def _forward(self, embeds: torch.Tensor, batch: Batch):
        logits, weights, _ = self._attend(embeds, batch)
        # one weight per input token: each side's weights (summing to 1) at its positions, halved
        return logits, weights / 2

    def _encode(self, embeds: torch.Tensor, batch: Batch) -> tuple:
        """Each side's states, mask and positions (``AttentionParts.attention_readout``)."""
        if batch.segments is None:
            raise ValueError("the NLI model needs batch.segments (0 premise, 1 hypothesis)")
        embeds = self.dropout(embeds)
        p_emb, p_mask, p_pos = split_segment(embeds, batch, 0)
        h_emb, h_mask, h_pos = split_segment(embeds, batch, 1)
        return (self.premise_encoder(p_emb, p_mask), p_mask, p_pos,
                self.hypothesis_encoder(h_emb, h_mask), h_mask, h_pos)

    def _attention_groups(self, batch: Batch) -> tuple[torch.Tensor | None, int]:
        """The premise's weights and the hypothesis's are two distributions (segment
        0 and 1), each summing to 1 in ``_read``'s row."""
        return batch.segments, 2

    def _conicity(self, encoded: tuple, batch: Batch) -> torch.Tensor:
        """(B,) the mean of the two sentences' conicities."""
        p_states, p_mask, _, h_states, h_mask, _ = encoded
        return (conicity(p_states, p_mask) + conicity(h_states, h_mask)) / 2

    def _read(self, encoded: tuple, batch: Batch, weights: torch.Tensor | None = None):
        """Logits, each side's attention weights at its positions (each side's summing to
        1), and f(h_t) = h_t: the contexts enter |c_p − c_h| and c_p ⊙ c_h, nonlinear at
        once, so no linear map follows the weighting. Given ``weights`` (B, T) are each
        side's weights at its positions."""
        p_states, p_mask, p_pos, h_states, h_mask, h_pos = encoded
        p_given, h_given = (None, None) if weights is None else (
            side_weights(weights, p_pos, p_mask), side_weights(weights, h_pos, h_mask))
        p_weights, p_ctx = self.premise_attn(p_states, p_mask, masked_mean(h_states, h_mask),
                                             p_given)
        h_weights, h_ctx = self.hypothesis_attn(h_states, h_mask, masked_mean(p_states, p_mask),
                                                h_given)
        features = torch.cat([p_ctx, h_ctx, (p_ctx - h_ctx).abs(), p_ctx * h_ctx], dim=-1)
        logits = self.mlp(self.dropout(features))
        row = torch.zeros(batch.ids.shape, dtype=p_weights.dtype, device=p_states.device)
        row = row.scatter_add(1, p_pos, p_weights * p_mask).scatter_add(1, h_pos, h_weights * h_mask)
        vectors = p_states.new_zeros(*batch.ids.shape, p_states.shape[-1])
        for states, mask, pos in ((p_states, p_mask, p_pos), (h_states, h_mask, h_pos)):
            vectors = vectors.scatter_add(1, pos.unsqueeze(-1).expand_as(states),
                                          states * mask.unsqueeze(-1))
        return logits, row, vectors

    def lrp_logits(self, embeds: torch.Tensor, batch: Batch, eps: float = lrp.EPS
                   ) -> torch.Tensor:
        """As ``_forward`` in eval mode: |p - h| passes relevance to p - h (ε-rule on
        the difference), p ⊙ h gives half to each side; the queries (each side's mean
        state) only set attention weights, so they receive none."""
        if batch.segments is None:
            raise ValueError("the NLI model needs batch.segments (0 premise, 1 hypothesis)")
        p_emb, p_mask, _ = split_segment(embeds, batch, 0)
        h_emb, h_mask, _ = split_segment(embeds, batch, 1)
        p_states = self.premise_encoder.lrp_forward(p_emb, p_mask, eps)
        h_states = self.hypothesis_encoder.lrp_forward(h_emb, h_mask, eps)
        with torch.no_grad():
            p_query, h_query = masked_mean(h_states, h_mask), masked_mean(p_states, p_mask)
        p_ctx = self.premise_attn.lrp_forward(p_states, p_mask, eps, p_query)
        h_ctx = self.hypothesis_attn.lrp_forward(h_states, h_mask, eps, h_query)
        features = torch.cat([p_ctx, h_ctx,
                              lrp.passthrough(torch.abs, lrp.difference(p_ctx, h_ctx, eps)),
                              lrp.product_half(p_ctx, h_ctx)], dim=-1)
        first, last = cast(nn.Linear, self.mlp[0]), cast(nn.Linear, self.mlp[3])
        hidden = lrp.passthrough(torch.tanh, lrp.linear(features, first, eps))
        return lrp.linear(hidden, last, eps)

    def layer_groups(self) -> list[tuple[str, list[nn.Module]]]:
        """Layer groups, output first, as parameter randomization re-initializes them
        (``faithbench.benchmark.core.randomize``); a shared encoder is one module."""
        return [("out", [self.mlp[3]]), ("hidden", [self.mlp[0]]),
                ("attention", [self.premise_attn, self.hypothesis_attn]),
                ("encoder", [self.premise_encoder, self.hypothesis_encoder]),
                ("embedding", [self.embedding])]
