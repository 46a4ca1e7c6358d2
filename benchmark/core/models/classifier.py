"""The model of the attention debate (Jain & Wallace 2019): embedding -> BiLSTM ->
additive (tanh) attention -> linear. It implements the model surface explainers use."""

from dataclasses import asdict, dataclass

import torch
from torch import nn

from faithbench.benchmark.core import lrp
from faithbench.benchmark.core.api import Batch
from faithbench.benchmark.core.models.blocks import (
    AdditiveAttention,
    AttentionModelSurface,
    conicity,
    encoder_for,
    variant_dict,
)


@dataclass(frozen=True)
class ClassifierConfig:
    vocab_size: int
    num_classes: int
    embed_dim: int = 128
    hidden: int = 128
    attn_dim: int = 128
    dropout: float = 0.3
    pad_id: int = 0
    unk_id: int = 1
    bilstm: str | None = None  # a variant of the debate: uniform, orthogonal or diversity
    diversity_weight: float = 0.0  # λ of the conicity term (the Diversity LSTM)
    deceive_weight: float = 0.0  # λ of the deception penalty (Pruthi et al. 2020)

    def as_dict(self) -> dict:
        return variant_dict(asdict(self))


class AttentionClassifier(AttentionModelSurface):
    def __init__(self, config: ClassifierConfig):
        super().__init__()
        self.config = config
        self.pad_id = config.pad_id
        self.mask_id = config.unk_id
        self.baseline_id = config.pad_id  # zero embedding, the usual IG reference
        self.embedding = nn.Embedding(config.vocab_size, config.embed_dim, padding_idx=config.pad_id)
        self.encoder = encoder_for(config.bilstm, config.embed_dim, config.hidden)
        self.attn = AdditiveAttention(self.encoder.output_dim, config.attn_dim,
                                      uniform=config.bilstm == "uniform")
        self.dropout = nn.Dropout(config.dropout)
        self.out = nn.Linear(self.encoder.output_dim, config.num_classes)

    def _forward(self, embeds: torch.Tensor, batch: Batch):
        logits, weights, _ = self._attend(embeds, batch)
        return logits, weights

    def _encode(self, embeds: torch.Tensor, batch: Batch) -> torch.Tensor:
        """(B, T, 2H) the states attention weighs (``AttentionParts.attention_readout``)."""
        return self.encoder(self.dropout(embeds), batch.mask)

    def _conicity(self, encoded: torch.Tensor, batch: Batch) -> torch.Tensor:
        return conicity(encoded, batch.mask)

    def _read(self, states: torch.Tensor, batch: Batch, weights: torch.Tensor | None = None):
        """Logits, attention weights and f(h_t) = W_out h_t: the output layer is the
        linear map between the attention's weighted sum and the softmax (its bias is
        added once, after the sum, so no token's)."""
        weights, context = self.attn(states, batch.mask, weights=weights)
        return self.out(self.dropout(context)), weights, states @ self.out.weight.T

    def lrp_logits(self, embeds: torch.Tensor, batch: Batch, eps: float = lrp.EPS
                   ) -> torch.Tensor:
        states = self.encoder.lrp_forward(embeds, batch.mask, eps)
        return lrp.linear(self.attn.lrp_forward(states, batch.mask, eps), self.out, eps)

    def layer_groups(self) -> list[tuple[str, list[nn.Module]]]:
        """Layer groups, output first, as parameter randomization re-initializes them
        (``faithbench.benchmark.core.randomize``)."""
        return [("out", [self.out]), ("attention", [self.attn]), ("encoder", [self.encoder]),
                ("embedding", [self.embedding])]
