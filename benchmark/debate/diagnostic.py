"""Wiegreffe & Pinter (2019)'s diagnostic: a model with no context of its own, guided by
a given attention. Each token's embedding passes through one affine layer and tanh
(300 -> 128 in their code; the task's embedding size -> 128 here), the attention
weights the results, and a linear layer classifies the sum. If attention that a BiLSTM
learned, frozen and given to this MLP, beats uniform weights and the MLP's own learned
attention, the weights carry information about which tokens matter for the task, not
only about the BiLSTM that produced them.

Attention sources (``SOURCES``): ``uniform`` (1/n over the real tokens), ``trained``
(the MLP's own additive attention, learned with it) and ``base`` (the task model's
attention on the same input, frozen). On a sentence pair the MLP pools each sentence
with its own weights and classifies the two pooled vectors side by side.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from faithbench.benchmark.core.models.blocks import AdditiveAttention
from faithbench.benchmark.core.models.training import TrainConfig, epoch_stream, train
from faithbench.benchmark.debate import ops

SOURCES = ("uniform", "trained", "base")
HIDDEN = 128
TRAIN = TrainConfig(epochs=8, patience=2, lr=1e-3, batch_size=32)


class DiagnosticMLP(nn.Module):
    """Embedding -> affine + tanh per token -> weighted sum per sentence -> linear."""

    def __init__(self, vocab_size: int, embed_dim: int, num_classes: int, source: str,
                 base=None, pairs: bool = False, pad_id: int = 0, unk_id: int = 1):
        super().__init__()
        if source not in SOURCES:
            raise ValueError(f"unknown attention source {source!r}; one of {SOURCES}")
        self.source, self.pairs = source, pairs
        self.pad_id, self.mask_id = pad_id, unk_id
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.token = nn.Linear(embed_dim, HIDDEN)
        self.attn = AdditiveAttention(HIDDEN, HIDDEN) if source == "trained" else None
        self.out = nn.Linear(HIDDEN * (2 if pairs else 1), num_classes)
        self._base = (base,)  # a tuple: the frozen model is not a submodule, never trained

    def weights(self, batch, hidden: torch.Tensor) -> torch.Tensor:
        """(B, T) the attention the MLP pools with, each sentence summing to one."""
        group = ops.groups(batch)
        if self.source == "uniform":
            return ops.uniform(group, hidden.dtype)
        if self.source == "base":
            with torch.no_grad():
                return ops.attention_of(self._base[0], batch).to(hidden.dtype)
        assert self.attn is not None
        parts = []
        for g in range(2 if self.pairs else 1):
            inside = group == g
            w, _ = self.attn(hidden, inside)
            parts.append(w * inside)
        return sum(parts)

    def logits(self, batch) -> torch.Tensor:
        hidden = torch.tanh(self.token(self.embedding(batch.ids)))  # (B, T, H)
        weights = self.weights(batch, hidden)
        group = ops.groups(batch)
        pooled = [((weights * (group == g)).unsqueeze(-1) * hidden).sum(1)
                  for g in range(2 if self.pairs else 1)]
        return self.out(torch.cat(pooled, dim=-1))

    def forward(self, batch) -> torch.Tensor:
        return self.logits(batch)


def fit(prepared, source: str, seed: int, *, train_split: str = "train",
        val_split: str = "validation", config: TrainConfig = TRAIN,
        progress: bool = False) -> DiagnosticMLP:
    """A diagnostic MLP trained on ``prepared``'s training split with early stopping on
    its validation split, guided by ``source`` (``base``: ``prepared.model``'s attention)."""
    from faithbench.benchmark.core.api import PAIR_CLASSIFICATION
    from faithbench.benchmark.core.models.training import seed_everything

    base = prepared.model
    base.eval()
    seed_everything(seed)
    model = DiagnosticMLP(base.embedding.num_embeddings, base.embedding.embedding_dim,
                          prepared.n_outputs, source, base=base,
                          pairs=prepared.spec.kind == PAIR_CLASSIFICATION,
                          pad_id=base.pad_id, unk_id=base.mask_id)
    rows = prepared.splits[train_split]
    val = [(b, y) for b, y, _ in prepared.batches(prepared.splits[val_split], 256)]

    def epoch_batches(epoch: int):
        return epoch_stream(rows, seed=seed, epoch=epoch, batch_size=config.batch_size,
                            length=lambda e: len(e.tokens),
                            batches=lambda chunk: [(b, y) for b, y, _ in
                                                   prepared.batches(chunk, config.batch_size)])

    train(model, epoch_batches, val, replace(config, half_weights=False), seed=seed,
          desc=f"diagnostic MLP ({source})", progress=progress)
    model.eval()
    return model


def correct(model: DiagnosticMLP, session) -> list[float]:
    """1 where the MLP predicts the gold label of each of the session's examples."""
    out: list[float] = []
    with torch.no_grad():
        for batch, labels, _ in session.batches(session.examples):
            out += (model.logits(batch).argmax(-1).cpu() == labels).double().tolist()
    return out
