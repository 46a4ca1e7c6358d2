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

import contextlib
from dataclasses import asdict, dataclass

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
    Batch,
)
from faithbench.benchmark.core.models.blocks import AdditiveAttention, AttentionParts, nonempty


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
    # attention frozen at 1/n over the source at every step, in training and inference
    # (``--bilstm uniform``: Vashishth et al.'s uniform-trained translation model)
    uniform_attention: bool = False

    def as_dict(self) -> dict:
        """The fields; ``uniform_attention`` only where set, so the models trained before
        it existed keep their cache keys."""
        out = asdict(self)
        if not self.uniform_attention:
            del out["uniform_attention"]
        return out


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


class AttentionSeq2Seq(AttentionParts, nn.Module):
    capabilities = frozenset({GRADIENTS, EMBEDDINGS, ATTENTION, LRP, ATTENTION_VECTORS,
                              ATTENTION_GRADIENT})

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
        self.attn = AdditiveAttention(enc, config.attn_dim, query_dim=h,
                                      uniform=config.uniform_attention)
        self.readout = nn.Linear(h + enc, h)
        self.out = nn.Linear(h, config.tgt_vocab_size)
        self.dropout = nn.Dropout(config.dropout)
        # (weights (B, S), batch, step) -> weights: replaces the attention at every decoding
        # step while set (``altered_attention``); None: the model's own
        self.alter = None

    @contextlib.contextmanager
    def altered_attention(self, alter):
        """Decode with ``alter(weights, batch, step)`` in place of the attention at every
        step (Vashishth et al.'s uniform, random and permuted attention in translation)."""
        self.alter = alter
        try:
            yield self
        finally:
            self.alter = None

    def _decode(self, embeds: torch.Tensor, batch: Batch, weights: torch.Tensor | None = None):
        """Readout states (B, U, H) before the output layer, for the word after each
        prefix position, the attention (B, U, S) at each step, and the encoder states
        (B, S, 2H); padded prefix steps come after the real ones, so they never change a
        real step's output. Given ``weights`` (B, S) replace each row's attention at its
        last real step (the step explained)."""
        if batch.prefix is None:
            raise ValueError("a seq2seq batch needs a teacher-forced prefix (starting with BOS)")
        states, last = self.encoder(self.dropout(embeds), batch.mask)  # (B, S, 2H), (B, 2H)
        explained = self._last_index(batch, batch.prefix.shape[1])  # (B,)
        s = torch.tanh(self.init_state(last))  # (B, H)
        context = states.new_zeros(states.shape[0], states.shape[2])  # (B, 2H)
        words = self.dropout(self.tgt_embedding(batch.prefix))  # (B, U, E)
        given, outputs, steps = weights, [], []
        for k in range(words.shape[1]):  # over prefix steps, not over examples
            s = self.cell(torch.cat([words[:, k], context], dim=-1), s)
            w, context = self.attn(states, batch.mask, query=s)
            if self.alter is not None:  # the debate's altered attention, at every step
                w = self.alter(w, batch, k)
                context = torch.bmm(w.unsqueeze(1), states).squeeze(1)
            if given is not None:
                w = torch.where((explained == k).unsqueeze(1), given, w)
                context = torch.bmm(w.unsqueeze(1), states).squeeze(1)
            outputs.append(torch.tanh(self.readout(torch.cat([s, context], dim=-1))))
            steps.append(w)
        return self.dropout(torch.stack(outputs, dim=1)), torch.stack(steps, dim=1), states

    def _last_index(self, batch: Batch, u: int) -> torch.Tensor:
        """(B,) each row's last real prefix step, of ``u`` steps."""
        if batch.prefix_mask is not None:
            return (batch.prefix_mask.sum(dim=1) - 1).clamp(min=0)
        return torch.full((batch.ids.shape[0],), u - 1, device=batch.ids.device)

    def _last_step(self, per_step: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Pick each row's last real prefix step from (B, U, ...)."""
        last = self._last_index(batch, per_step.shape[1])
        index = last.view(-1, 1, *([1] * (per_step.dim() - 2)))
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

    def _attend(self, embeds: torch.Tensor, batch: Batch, weights: torch.Tensor | None = None):
        """Logits of the next target word, the attention at the step explained, and
        f(h_t) = R_c h_t, R_c the readout's columns that read the context: the linear map
        between the attention's weighted sum and the readout's tanh (its bias and the
        decoder state's columns are added once, after the sum)."""
        outputs, steps, states = self._decode(embeds, batch, weights)
        logits = self.out(self._last_step(outputs, batch))
        reads_context = self.readout.weight[:, self.config.hidden:]  # (H, 2H)
        return logits, self._last_step(steps, batch), states @ reads_context.T

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

    def layer_groups(self) -> list[tuple[str, list[nn.Module]]]:
        """Layer groups, output first, as parameter randomization re-initializes them
        (``faithbench.benchmark.core.randomize``): the decoder is its GRU cell, its
        initial-state map and the target embeddings; the source embeddings come last."""
        return [("out", [self.out]), ("readout", [self.readout]), ("attention", [self.attn]),
                ("decoder", [self.cell, self.init_state, self.tgt_embedding]),
                ("encoder", [self.encoder]), ("embedding", [self.src_embedding])]
