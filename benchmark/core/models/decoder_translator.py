"""A decoder-only translator: one causal Transformer reads "source ⟶ target" as one
sequence and predicts each target word from the source and the target words before it.

It has the alignment task's model surface (that of ``seq2seq.AttentionSeq2Seq``): a
Batch row's ``ids`` are the source words, ``prefix`` the teacher-forced target prefix
starting with BOS (the "⟶" between the two), and ``logits`` the scores of the next target
word after each row's last real prefix word. The source and target vocabularies share
one embedding table (target ids offset by the source vocabulary's size); the output
layer covers the target vocabulary only. The library decoder is Llama-layout (RMSNorm,
rotary positions, gated MLP), so AttnLRP applies (``decoder.lrp_states``).

Sequences are left-padded as the decoder classifier's are, so the position that
predicts the explained word is the last of every row (``query = -1``): an attention
explainer reads that row, over the source words.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from faithbench.benchmark.core import lrp
from faithbench.benchmark.core.api import (
    ATTENTION,
    EMBEDDINGS,
    GRADIENTS,
    LAYER_ATTENTION,
    LRP,
    VALUE_ZEROING,
    Batch,
    token_attention,
)
from faithbench.benchmark.core.models.decoder import (
    decoder_value_zeroing,
    lrp_states,
    run_decoder,
)


@dataclass(frozen=True)
class TranslatorConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    bos_id: int  # in the target vocabulary
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    intermediate: int = 344
    dropout: float = 0.1  # on the attention weights (the library's attention_dropout)
    max_positions: int = 256
    pad_id: int = 0  # both vocabularies
    unk_id: int = 1

    def as_dict(self) -> dict:
        return {"family": "decoder", **asdict(self)}


class DecoderTranslator(nn.Module):
    capabilities = frozenset({GRADIENTS, EMBEDDINGS, ATTENTION, LAYER_ATTENTION, LRP,
                              VALUE_ZEROING})
    max_rows_per_pass = 32
    query = -1  # the position that predicts the explained word

    def __init__(self, config: TranslatorConfig):
        super().__init__()
        from transformers import LlamaConfig, LlamaModel
        self.config = config
        self.pad_id, self.mask_id, self.baseline_id = config.pad_id, config.unk_id, config.pad_id
        self.bos_id = config.bos_id
        library = LlamaConfig(vocab_size=config.src_vocab_size + config.tgt_vocab_size,
                              hidden_size=config.hidden, intermediate_size=config.intermediate,
                              num_hidden_layers=config.layers, num_attention_heads=config.heads,
                              num_key_value_heads=config.heads,
                              max_position_embeddings=config.max_positions,
                              attention_dropout=config.dropout, pad_token_id=config.pad_id)
        library._attn_implementation = "eager"  # every layer's attention can be read
        self.base: Any = LlamaModel(library)
        self.out = nn.Linear(config.hidden, config.tgt_vocab_size)

    def embed(self, batch: Batch) -> torch.Tensor:
        return self.base.embed_tokens(batch.ids)

    def _wrap(self, embeds: torch.Tensor, batch: Batch):
        """Source then prefix, left-padded: (B, S, D) embeddings, (B, S) bool real
        positions and position ids, (B, T) each source position's place and (B, U) each
        prefix position's place (S, the padding slot, where not real)."""
        if batch.prefix is None:
            raise ValueError("a translation batch needs a teacher-forced prefix (BOS first)")
        src_mask = batch.mask
        tgt_mask = (batch.prefix_mask if batch.prefix_mask is not None
                    else torch.ones_like(batch.prefix, dtype=torch.bool))
        n_src, n_tgt = src_mask.sum(1), tgt_mask.sum(1)
        length = n_src + n_tgt
        b, width = len(batch), int(length.max())
        start = width - length
        src_place = torch.where(src_mask, start.unsqueeze(1) + src_mask.long().cumsum(1) - 1,
                                width)
        tgt_place = torch.where(tgt_mask, (start + n_src).unsqueeze(1)
                                + tgt_mask.long().cumsum(1) - 1, width)
        prefix = self.base.embed_tokens(batch.prefix + self.config.src_vocab_size)
        full = embeds.new_zeros(b, width + 1, embeds.shape[-1])
        full = full.scatter(1, src_place.unsqueeze(-1).expand_as(embeds), embeds)
        full = full.scatter(1, tgt_place.unsqueeze(-1).expand_as(prefix), prefix)[:, :width]
        arange = torch.arange(width, device=embeds.device)
        real = arange >= start.unsqueeze(1)
        positions = (arange - start.unsqueeze(1)).clamp(min=0)
        return full, real, positions, src_place, tgt_place

    def _states(self, embeds: torch.Tensor, batch: Batch, attentions: bool = False):
        full, real, positions, src_place, tgt_place = self._wrap(embeds, batch)
        return run_decoder(self.base, full, real, positions, attentions), src_place, tgt_place

    def teacher_forced_logits(self, batch: Batch) -> torch.Tensor:
        """(B, U, V): at prefix step k, the scores of target word k + 1 (for training)."""
        out, _, tgt_place = self._states(self.embed(batch), batch)
        hidden = out.last_hidden_state
        at = tgt_place.clamp(max=hidden.shape[1] - 1)
        return self.out(hidden.gather(1, at.unsqueeze(-1).expand(-1, -1, hidden.shape[-1])))

    def logits_from_embeddings(self, embeds: torch.Tensor, batch: Batch) -> torch.Tensor:
        out, _, _ = self._states(embeds, batch)
        return self.out(out.last_hidden_state[:, -1])

    def logits(self, batch: Batch) -> torch.Tensor:
        return self.logits_from_embeddings(self.embed(batch), batch)

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.logits(batch)

    def attention_maps(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, H, S, S) every layer's and head's attention over source and prefix, and
        (B, T) each source word's place (-1 at padding)."""
        out, src_place, _ = self._states(self.embed(batch), batch, attentions=True)
        return torch.stack(out.attentions, dim=1), torch.where(batch.mask, src_place, -1)

    def attention(self, batch: Batch) -> torch.Tensor:
        """The last layer's attention of the predicting position over the source words,
        heads averaged, renormalized over them."""
        maps, index = self.attention_maps(batch)
        return token_attention(maps, index, batch.mask, query=self.query)

    @torch.no_grad()
    def value_zeroing_maps(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, S, S) value-zeroing maps over source and prefix and the (B, T) source
        index (``decoder.decoder_value_zeroing``)."""
        full, real, positions, src_place, _ = self._wrap(self.embed(batch), batch)
        maps = decoder_value_zeroing(self.base, full, real, positions, self.max_rows_per_pass)
        return maps, torch.where(batch.mask, src_place, -1)

    def lrp_logits(self, embeds: torch.Tensor, batch: Batch, eps: float = lrp.EPS
                   ) -> torch.Tensor:
        """The logits (eval mode) by AttnLRP's operations; relevance reaches the source
        words' embeddings (and the prefix's, which explainers do not score)."""
        full, real, positions, _, _ = self._wrap(embeds, batch)
        hidden = lrp_states(self.base, full, real, positions, eps)
        return lrp.linear(hidden[:, -1], self.out, eps)
