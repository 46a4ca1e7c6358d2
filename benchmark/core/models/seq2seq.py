"""A small GRU encoder–decoder with additive (Bahdanau) attention, for the MT
alignment task. It implements the same model surface as the classifier, for
rows of one (source sentence, target position):

- ``batch.ids`` / ``batch.mask`` (B, S): the source sentence, the tokens explained;
- ``batch.prefix`` / ``batch.prefix_mask`` (B, U): the teacher-forced target words
  before the position explained, starting with ``bos_id``;
- ``logits(batch)`` (B, V_tgt): scores of the next target word;
- ``attention(batch)`` (B, S): the decoder's attention over the source at that step;
- ``embed`` / ``logits_from_embeddings`` act on source embeddings, so gradient
  explainers score source words.

The decoder (Bahdanau, Cho & Bengio 2015, with Luong et al. 2015's input
feeding) runs over the prefix: at step k it reads target word k and the previous
context, updates its state, attends over the encoder states with that state as
the query, and reads out the next-word scores from state and context.
"""

from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from faithbench.benchmark.core import lrp
from faithbench.benchmark.core.api import ATTENTION, EMBEDDINGS, GRADIENTS, LRP, Batch
from faithbench.benchmark.core.models.blocks import AdditiveAttention, nonempty


@dataclass(frozen=True)
class Seq2SeqConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    embed_dim: int = 64
    hidden: int = 64
    attn_dim: int = 64
    dropout: float = 0.1
    pad_id: int = 0  # both sides
    unk_id: int = 1  # both sides
    bos_id: int = 2  # target side

    def as_dict(self) -> dict:
        return asdict(self)


class BiGRUEncoder(nn.Module):
    """(B, S, D) embeddings -> states (B, S, 2H), zero at padding, and the final
    forward / backward states (B, 2H). Packed, so padding never enters a state."""

    def __init__(self, input_dim: int, hidden: int):
        super().__init__()
        self.rnn = nn.GRU(input_dim, hidden, batch_first=True, bidirectional=True)
        self.output_dim = 2 * hidden

    def forward(self, embeds: torch.Tensor, mask: torch.Tensor):
        lengths = mask.sum(dim=1).clamp(min=1).cpu()  # an emptied row runs over one pad step
        packed = pack_padded_sequence(embeds, lengths, batch_first=True, enforce_sorted=False)
        out, last = self.rnn(packed)  # last: (2, B, H), rows in the input order
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=embeds.shape[1])
        return out, torch.cat([last[0], last[1]], dim=-1)

    def lrp_forward(self, embeds: torch.Tensor, mask: torch.Tensor, eps: float):
        """``forward``, unrolled step by step in LRP operations (``core.lrp.gru_step``)."""
        mask = nonempty(mask)
        fwd, fwd_last = lrp.gru_direction(self.rnn, embeds, mask, reverse=False, eps=eps)
        bwd, bwd_last = lrp.gru_direction(self.rnn, embeds, mask, reverse=True, eps=eps)
        return torch.cat([fwd, bwd], dim=-1), torch.cat([fwd_last, bwd_last], dim=-1)


class AttentionSeq2Seq(nn.Module):
    capabilities = frozenset({GRADIENTS, EMBEDDINGS, ATTENTION, LRP})

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        self.config = config
        self.pad_id = config.pad_id
        self.mask_id = config.unk_id
        self.baseline_id = config.pad_id  # zero embedding, the usual IG reference
        self.bos_id = config.bos_id
        h = config.hidden
        self.src_embedding = nn.Embedding(config.src_vocab_size, config.embed_dim,
                                          padding_idx=config.pad_id)
        self.tgt_embedding = nn.Embedding(config.tgt_vocab_size, config.embed_dim,
                                          padding_idx=config.pad_id)
        self.encoder = BiGRUEncoder(config.embed_dim, h)
        enc = self.encoder.output_dim
        self.init_state = nn.Linear(enc, h)
        self.cell = nn.GRUCell(config.embed_dim + enc, h)
        self.attn = AdditiveAttention(enc, config.attn_dim, query_dim=h)
        self.readout = nn.Linear(h + enc, h)
        self.out = nn.Linear(h, config.tgt_vocab_size)
        self.dropout = nn.Dropout(config.dropout)

    def _decode(self, embeds: torch.Tensor, batch: Batch):
        """Readout states (B, U, H) before the output layer, for the word after each
        prefix position, and the attention (B, U, S) at each step; padded prefix steps
        come after the real ones, so they never change a real step's output."""
        if batch.prefix is None:
            raise ValueError("a seq2seq batch needs a teacher-forced prefix (starting with BOS)")
        states, last = self.encoder(self.dropout(embeds), batch.mask)  # (B, S, 2H), (B, 2H)
        s = torch.tanh(self.init_state(last))  # (B, H)
        context = states.new_zeros(states.shape[0], states.shape[2])  # (B, 2H)
        words = self.dropout(self.tgt_embedding(batch.prefix))  # (B, U, E)
        outputs, weights = [], []
        for k in range(words.shape[1]):  # over prefix steps, not over examples
            s = self.cell(torch.cat([words[:, k], context], dim=-1), s)
            w, context = self.attn(states, batch.mask, query=s)
            outputs.append(torch.tanh(self.readout(torch.cat([s, context], dim=-1))))
            weights.append(w)
        return self.dropout(torch.stack(outputs, dim=1)), torch.stack(weights, dim=1)

    def _last_step(self, per_step: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Pick each row's last real prefix step from (B, U, ...)."""
        u = per_step.shape[1]
        last = (batch.prefix_mask.sum(dim=1) - 1 if batch.prefix_mask is not None
                else torch.full((per_step.shape[0],), u - 1, device=per_step.device))
        index = last.clamp(min=0).view(-1, 1, *([1] * (per_step.dim() - 2)))
        index = index.expand(-1, 1, *per_step.shape[2:])
        return per_step.gather(1, index).squeeze(1)

    def teacher_forced_logits(self, batch: Batch) -> torch.Tensor:
        """(B, U, V): at step k, scores of target word k + 1 (for training)."""
        return self.out(self._decode(self.embed(batch), batch)[0])

    def embed(self, batch: Batch) -> torch.Tensor:
        return self.src_embedding(batch.ids)

    def logits_from_embeddings(self, embeds: torch.Tensor, batch: Batch) -> torch.Tensor:
        # the output layer (H x V, the costliest step) only where a row is explained
        return self.out(self._last_step(self._decode(embeds, batch)[0], batch))

    def logits(self, batch: Batch) -> torch.Tensor:
        return self.logits_from_embeddings(self.embed(batch), batch)

    def attention(self, batch: Batch) -> torch.Tensor:
        weights = self._last_step(self._decode(self.embed(batch), batch)[1], batch)  # (B, S)
        return weights * batch.mask

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.logits(batch)

    def lrp_logits(self, embeds: torch.Tensor, batch: Batch, eps: float = lrp.EPS
                   ) -> torch.Tensor:
        """``logits_from_embeddings`` (eval mode) rebuilt from LRP operations: the
        encoder and decoder GRUs with their gates constant, the attention weights
        constant, the ε-rule on every linear map and sum. The target prefix's word
        embeddings receive relevance too; only the source's is returned by explainers."""
        if batch.prefix is None:
            raise ValueError("a seq2seq batch needs a teacher-forced prefix (starting with BOS)")
        states, last = self.encoder.lrp_forward(embeds, batch.mask, eps)
        s = lrp.passthrough(torch.tanh, lrp.linear(last, self.init_state, eps))
        context = states.new_zeros(states.shape[0], states.shape[2])
        words = self.tgt_embedding(batch.prefix)
        cell = self.cell
        outputs = []
        for k in range(words.shape[1]):
            s = lrp.gru_step(torch.cat([words[:, k], context], dim=-1), s, cell.weight_ih,
                             cell.weight_hh, cell.bias_ih, cell.bias_hh, eps)
            context = self.attn.lrp_forward(states, batch.mask, eps, query=s)
            outputs.append(lrp.passthrough(torch.tanh, lrp.linear(
                torch.cat([s, context], dim=-1), self.readout, eps)))
        return lrp.linear(self._last_step(torch.stack(outputs, dim=1), batch), self.out, eps)
