"""A translation task whose alignment is known: the target is the source reversed, so
target word t is the translation of source word n − 1 − t. Word ids 3..22; 0 pads,
2 is BOS (the seq2seq and decoder-only translator tests train on it)."""

from __future__ import annotations

import random

import torch

from faithbench.benchmark.core.api import Batch

BOS, VOCAB = 2, 23


def sentences(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, VOCAB) for _ in range(rng.randint(3, 7))] for _ in range(n)]


def teacher_forced(rows: list[list[int]]) -> tuple[Batch, torch.Tensor]:
    """Source rows; prefix BOS + reversed[:-1]; labels the reversed row, -100 at padding."""
    width = max(map(len, rows))
    src = torch.zeros(len(rows), width, dtype=torch.long)
    prefix = torch.zeros_like(src)
    labels = torch.full(src.shape, -100)
    for b, row in enumerate(rows):
        target = row[::-1]
        src[b, : len(row)] = torch.tensor(row)
        prefix[b, : len(row)] = torch.tensor([BOS] + target[:-1])
        labels[b, : len(row)] = torch.tensor(target)
    return Batch(src, src > 0, tuple(str(i) for i in range(len(rows))), prefix=prefix,
                 prefix_mask=labels != -100), labels


def per_position(row: list[int]) -> Batch:
    """One row per target position t of ``row``'s reversal: prefix BOS + target[:t]."""
    n, target = len(row), row[::-1]
    prefix = torch.zeros(n, n, dtype=torch.long)
    prefix_mask = torch.zeros(n, n, dtype=torch.bool)
    for t in range(n):
        words = [BOS] + target[:t]
        prefix[t, : len(words)] = torch.tensor(words)
        prefix_mask[t, : len(words)] = True
    src = torch.tensor([row] * n)
    return Batch(src, src > 0, tuple(map(str, range(n))), prefix=prefix, prefix_mask=prefix_mask)


def gold(n: int) -> set[tuple[int, int]]:
    """The true links (source, target) of an n-word sentence."""
    return {(n - 1 - t, t) for t in range(n)}


def train_reverser(model, config) -> tuple:
    """``model`` (built after ``seed_everything(0)``) trained on 2,000 reversal rows for
    next-word prediction, early-stopped on 200 others: (model in eval mode, the held-out
    rows, their teacher-forced batches, the best held-out score, the history)."""
    from faithbench.benchmark.core.models.training import NEXT_WORD, train
    train_rows, val_rows = sentences(2000, 0), sentences(200, 1)
    val = [teacher_forced(val_rows[i : i + 50]) for i in range(0, 200, 50)]

    def epoch(e):
        rows = train_rows[:]
        random.Random(e).shuffle(rows)
        return [teacher_forced(rows[i : i + 32]) for i in range(0, len(rows), 32)]

    best, history = train(model, epoch, val, config, seed=0, progress=False,
                          objective=NEXT_WORD)
    return model.eval(), val_rows, val, best, history


def explainer_aer(model, explainer: str, rows: list[list[int]]) -> float:
    """AER of the links read off ``explainer``'s scores (argmax over the source) on the
    reversal of each of ``rows``, against the one true link (n − 1 − t, t) of target
    word t."""
    from faithbench.metrics.alignment import AER, argmax_links, link_counts
    from faithbench.submissions import get_explainer
    explain = get_explainer(explainer)
    counts = []
    for row in rows:
        scores = explain.explain(model, per_position(row), torch.tensor(row[::-1]),
                                 rng=torch.Generator().manual_seed(0))
        counts.append(link_counts(argmax_links(scores.detach()), gold(len(row)),
                                  gold(len(row))))
    return float(AER(torch.tensor(counts).sum(0).numpy()))


def cut_prefixes(batch: Batch) -> tuple[Batch, torch.Tensor]:
    """``batch`` with each row's prefix cut to its first max(n − 2, 1) words (rows then
    explain different positions), and those lengths: a row's next-word logits must be
    the teacher-forced ones at step length − 1."""
    cut = torch.clamp(batch.prefix_mask.sum(1) - 2, min=1)
    prefix_mask = torch.arange(batch.prefix.shape[1]) < cut[:, None]
    return Batch(batch.ids, batch.mask, batch.example_ids, prefix=batch.prefix * prefix_mask,
                 prefix_mask=prefix_mask), cut
