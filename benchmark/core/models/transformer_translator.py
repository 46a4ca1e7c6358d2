"""A Transformer encoder–decoder translator (Vaswani et al. 2017, the library's BART
layout from a config: post-norm layers, learned positions, no pre-training), behind the
alignment task's model surface: a Batch row's ``ids`` are the source words, ``prefix``
the teacher-forced target prefix starting with BOS, and ``logits`` the scores of the
next target word after each row's last real prefix word.

It is the NMT model of the alignment literature that reads attention: Ding et al. (2019)
and Ferrando et al. score the alignments of a Transformer's **cross-attention**, one
layer at a time, and report the best layer. ``attention`` reads the cross-attention of
the position that predicts the explained word over the source words, heads averaged, at
``attention_layer`` (the last by default; the alignment tables choose it on the
validation gold, ``cross_attention``). Source and target words share one embedding
table (target ids after the source vocabulary's, as in the decoder-only translator);
the output layer covers the target vocabulary only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from faithbench.benchmark.core.api import ATTENTION, EMBEDDINGS, GRADIENTS, Batch


@dataclass(frozen=True)
class EncoderDecoderConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    bos_id: int  # in the target vocabulary
    hidden: int = 128
    layers: int = 3  # encoder layers, and as many decoder layers
    heads: int = 4
    ffn: int = 512
    dropout: float = 0.1
    max_positions: int = 256
    pad_id: int = 0  # both vocabularies
    unk_id: int = 1

    def as_dict(self) -> dict:
        return {"family": "transformer", **asdict(self)}


class TransformerTranslator(nn.Module):
    capabilities = frozenset({GRADIENTS, EMBEDDINGS, ATTENTION})

    def __init__(self, config: EncoderDecoderConfig):
        super().__init__()
        from transformers import BartConfig, BartModel
        self.config = config
        self.pad_id, self.mask_id, self.baseline_id = config.pad_id, config.unk_id, config.pad_id
        self.bos_id = config.bos_id
        self.attention_layer = -1  # the cross-attention layer ``attention`` reads
        library = BartConfig(
            vocab_size=config.src_vocab_size + config.tgt_vocab_size, d_model=config.hidden,
            encoder_layers=config.layers, decoder_layers=config.layers,
            encoder_attention_heads=config.heads, decoder_attention_heads=config.heads,
            encoder_ffn_dim=config.ffn, decoder_ffn_dim=config.ffn,
            max_position_embeddings=config.max_positions, dropout=config.dropout,
            attention_dropout=0.0, activation_dropout=0.0, scale_embedding=False,
            pad_token_id=config.pad_id, bos_token_id=None, eos_token_id=None,
            decoder_start_token_id=None, forced_eos_token_id=None)
        library._attn_implementation = "eager"  # every layer's attention can be read
        self.base: Any = BartModel(library)
        self.out = nn.Linear(config.hidden, config.tgt_vocab_size)

    def embed(self, batch: Batch) -> torch.Tensor:
        return self.base.shared(batch.ids)

    def _decode(self, embeds: torch.Tensor, batch: Batch, attentions: bool = False) -> Any:
        """The decoder's outputs over the prefix, the encoder reading ``embeds``."""
        if batch.prefix is None:
            raise ValueError("a translation batch needs a teacher-forced prefix (BOS first)")
        prefix_mask = (batch.prefix_mask if batch.prefix_mask is not None
                       else torch.ones_like(batch.prefix, dtype=torch.bool))
        source = self.base.encoder(inputs_embeds=embeds, attention_mask=batch.mask.long())
        return self.base.decoder(
            input_ids=torch.where(prefix_mask, batch.prefix + self.config.src_vocab_size,
                                  self.pad_id),
            attention_mask=prefix_mask.long(), encoder_hidden_states=source.last_hidden_state,
            encoder_attention_mask=batch.mask.long(), output_attentions=attentions)

    @staticmethod
    def _last(batch: Batch) -> torch.Tensor:
        """(B,) each row's last real prefix position: the one that predicts the word."""
        if batch.prefix_mask is None:
            assert batch.prefix is not None
            return torch.full((len(batch),), batch.prefix.shape[1] - 1,
                              device=batch.prefix.device)
        return batch.prefix_mask.long().sum(1) - 1

    def teacher_forced_logits(self, batch: Batch) -> torch.Tensor:
        """(B, U, V): at prefix step k, the scores of target word k + 1 (for training)."""
        return self.out(self._decode(self.embed(batch), batch).last_hidden_state)

    def logits_from_embeddings(self, embeds: torch.Tensor, batch: Batch) -> torch.Tensor:
        hidden = self._decode(embeds, batch).last_hidden_state
        return self.out(hidden[torch.arange(len(batch), device=hidden.device), self._last(batch)])

    def logits(self, batch: Batch) -> torch.Tensor:
        return self.logits_from_embeddings(self.embed(batch), batch)

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.logits(batch)

    def cross_attention(self, batch: Batch) -> torch.Tensor:
        """(B, L, H, T) every decoder layer's and head's cross-attention of the position
        that predicts the word, over the source words (zero at padding)."""
        out = self._decode(self.embed(batch), batch, attentions=True)
        rows = torch.arange(len(batch), device=batch.ids.device)
        maps = torch.stack(out.cross_attentions, dim=1)  # (B, L, H, U, T)
        picked = maps[rows, :, :, self._last(batch)]  # (B, L, H, T)
        return picked * batch.mask[:, None, None, :]

    def attention(self, batch: Batch) -> torch.Tensor:
        """Layer ``attention_layer``'s cross-attention of the predicting position, heads
        averaged, renormalized over the real source words."""
        row = self.cross_attention(batch)[:, self.attention_layer].mean(1)  # (B, T)
        total = row.sum(1, keepdim=True)
        return torch.where(total > 0, row / total.clamp(min=1e-30), row)
