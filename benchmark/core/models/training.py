"""Training with early stopping on a validation score (a classifier's accuracy, a
translation model's perplexity); the best epoch's weights are kept.

Word dropout (Iyyer et al. 2015; here: a real token is replaced by the unknown word
with probability ``word_dropout``) is what trains the ``<unk>`` embedding when every
training word is in the vocabulary (``min_freq=1``). Without it the ``mask`` eraser
would substitute a vector still at its random initialisation.
"""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from faithbench.benchmark.core.api import Batch, TaskOptions
from faithbench.benchmark.core.progress import progress_bar

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 10
    patience: int = 2  # epochs without a better validation accuracy before stopping
    lr: float = 1e-3
    batch_size: int = 32
    weight_decay: float = 0.0
    clip: float = 5.0
    word_dropout: float = 0.0  # probability that a real training token becomes <unk>
    # share of each batch's examples masked at a ratio drawn from U(0, 1) (Madsen et al.)
    mask_training: float = 0.0
    # "adamw": AdamW with linear warm-up over the first ``warmup`` share of the steps,
    # then linear decay to 0 (the usual Transformer fine-tuning schedule)
    optimizer: str = "adam"
    warmup: float = 0.0
    # the best epoch's weights rounded to float16 (the model still computes in float32):
    # half the size on disk, and a model that loads from float16 bit for bit (the
    # published release's models are made so)
    half_weights: bool = False

    def as_dict(self) -> dict:
        d = asdict(self)
        # fields at their defaults are left out, so earlier models keep their cache keys
        for name, default in (("mask_training", 0.0), ("optimizer", "adam"), ("warmup", 0.0),
                              ("half_weights", False)):
            if d[name] == default:
                del d[name]
        return d

    def with_options(self, options: TaskOptions) -> TrainConfig:
        """This configuration with what a run asks of every model family: ``--epochs``
        (the most epochs) and ``--half-weights``."""
        config = replace(self, epochs=options.epochs) if options.epochs else self
        return replace(config, half_weights=True) if options.half_weights else config


def epoch_stream(rows, *, seed: int, epoch: int, batch_size: int, length, batches) -> list:
    """One epoch's batches, the one training order of every task: the rows shuffled by
    (seed, epoch), sorted by ``length`` inside windows of 50 batches (so a batch pads
    little yet the epoch stays shuffled), cut into batches by ``batches(rows)``, and
    the batches shuffled again.

    >>> epoch_stream(range(6), seed=0, epoch=1, batch_size=2, length=lambda r: 0,
    ...              batches=lambda rows: [rows[i:i + 2] for i in range(0, len(rows), 2)])
    [[5, 0], [4, 1], [2, 3]]
    """
    rows = list(rows)
    random.Random(seed * 1000 + epoch).shuffle(rows)
    window = batch_size * 50
    rows = [r for s in range(0, len(rows), window)
            for r in sorted(rows[s : s + window], key=length)]
    out = batches(rows)
    random.Random(seed * 1000 + epoch + 1).shuffle(out)
    return out


def seed_everything(seed: int) -> None:
    """Seed every generator a model build or training step draws from; call it before
    the model is built, so the seed decides the initial weights too."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def word_dropout(batch: Batch, rate: float, unk_id: int, generator: torch.Generator) -> Batch:
    """``batch`` with each real token replaced by ``unk_id`` with probability ``rate``.

    >>> b = Batch(torch.tensor([[5, 6, 0]]), torch.tensor([[True, True, False]]), ("a",))
    >>> word_dropout(b, 1.0, 1, torch.Generator().manual_seed(0)).ids.tolist()
    [[1, 1, 0]]
    >>> word_dropout(b, 0.0, 1, torch.Generator().manual_seed(0)).ids.tolist()
    [[5, 6, 0]]
    """
    if rate <= 0:
        return batch
    drop = (torch.rand(batch.ids.shape, generator=generator) < rate) & batch.mask.cpu()
    return batch.replace(ids=torch.where(drop.to(batch.ids.device), unk_id, batch.ids))


def random_masking(batch: Batch, share: float, unk_id: int, generator: torch.Generator) -> Batch:
    """Masked training (Madsen, Reddy & Chandar's faithfulness-measurable models): each
    example is chosen with probability ``share``; a chosen example draws a ratio
    r ~ U(0, 1) and each of its real tokens becomes ``unk_id`` with probability r. The
    model then sees masked inputs in training, so masking at test time is not out of
    distribution for it.

    >>> b = Batch(torch.tensor([[5, 6, 0]]), torch.tensor([[True, True, False]]), ("a",))
    >>> random_masking(b, 0.0, 1, torch.Generator().manual_seed(0)).ids.tolist()
    [[5, 6, 0]]
    """
    if share <= 0:
        return batch
    rows, width = batch.ids.shape
    chosen = torch.rand(rows, generator=generator) < share
    ratio = torch.rand(rows, generator=generator) * chosen
    drop = (torch.rand((rows, width), generator=generator) < ratio.unsqueeze(1)) & batch.mask.cpu()
    return batch.replace(ids=torch.where(drop.to(batch.ids.device), unk_id, batch.ids))


@torch.no_grad()
def accuracy(model: Any, batches: Iterable[tuple[Batch, torch.Tensor]]) -> float:
    model.eval()
    right = total = 0
    for batch, labels in batches:
        right += int((model.logits(batch).argmax(-1) == labels).sum())
        total += len(labels)
    return right / max(total, 1)


@dataclass(frozen=True)
class Objective:
    """What training minimises and what early stopping maximises.

    ``loss(model, batch, labels)`` -> (mean loss, number of items it averages);
    ``score(model, val_batches)`` -> a validation figure, higher is better, recorded in
    the history under ``name``.
    """

    loss: Callable
    score: Callable
    name: str


def _classification_loss(model, batch, labels):
    """Cross-entropy, or the model's own ``training_loss`` where it has one (the
    Diversity LSTM adds its conicity term there)."""
    own = getattr(model, "training_loss", None)
    if own is not None:
        return own(batch, labels), len(labels)
    return nn.functional.cross_entropy(model.logits(batch), labels), len(labels)


CLASSIFY = Objective(_classification_loss, accuracy, "val_accuracy")


def _next_word_loss(model, batch, labels):
    """Teacher forcing: labels (B, U) hold the word after each prefix step, -100 at padding."""
    logits = model.teacher_forced_logits(batch)  # (B, U, V)
    loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    return loss, int((labels != -100).sum())


@torch.no_grad()
def sentence_nll(model: Any, batches: Iterable[tuple[Batch, torch.Tensor]]
                 ) -> tuple[list[float], list[int]]:
    """Per sentence: the summed cross-entropy (nats) of its reference target words
    (teacher-forced, in eval mode), and how many words that is."""
    model.eval()
    nll: list[float] = []
    words: list[int] = []
    for batch, labels in batches:
        logits = model.teacher_forced_logits(batch)  # (B, U, V)
        loss = nn.functional.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100,
                                           reduction="none")  # (B, U), 0 at padding
        nll += loss.sum(1).tolist()
        words += (labels != -100).sum(1).tolist()
    return nll, words


def perplexity(model: Any, batches: Iterable[tuple[Batch, torch.Tensor]]) -> float:
    """exp(mean cross-entropy per reference target word), teacher-forced, in eval mode."""
    nll, words = sentence_nll(model, batches)
    return float(np.exp(sum(nll) / max(sum(words), 1)))


NEXT_WORD = Objective(_next_word_loss, lambda m, b: -perplexity(m, b), "val_neg_perplexity")


def optimizer_and_schedule(model: nn.Module, config: TrainConfig,
                           count_steps: Callable[[], int]):
    """The optimizer and, for AdamW, its per-step warm-up/decay schedule over
    ``count_steps()`` steps (counted only then: it builds an epoch's batches)."""
    if config.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=config.lr,
                                weight_decay=config.weight_decay), None
    if config.optimizer != "adamw":
        raise ValueError(f"unknown optimizer {config.optimizer!r} (adam or adamw)")
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    steps = count_steps()
    warm = max(1, int(config.warmup * steps))

    def factor(step: int) -> float:
        return (step + 1) / warm if step < warm else max(0.0, (steps - step) / max(1, steps - warm))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)


def train(
    model: Any,  # a task model: nn.Module with the model surface (logits, mask_id, ...)
    train_batches: Callable[[int], list[tuple[Batch, torch.Tensor]]],
    val_batches: list[tuple[Batch, torch.Tensor]],
    config: TrainConfig,
    *,
    seed: int,
    desc: str = "train",
    progress: bool = True,
    objective: Objective = CLASSIFY,
) -> tuple[float, list[dict]]:
    """Train in place; ``train_batches(epoch)`` gives that epoch's shuffled batches.

    Returns the best validation score and the per-epoch history. The model's
    ``mask_id`` is the unknown-word id word dropout substitutes (in ``batch.ids``).
    """
    seed_everything(seed)
    dropout_rng = torch.Generator().manual_seed(seed)
    opt, schedule = optimizer_and_schedule(model, config,
                                           lambda: config.epochs * len(train_batches(0)))
    best, bad, history = -float("inf"), 0, []
    best_state: dict | None = None
    for epoch in range(config.epochs):
        model.train()
        batches = train_batches(epoch)
        total = seen = 0.0
        for batch, labels in progress_bar(batches, desc=f"{desc} epoch {epoch + 1}",
                                          leave=False, show=progress):
            opt.zero_grad()
            batch = word_dropout(batch, config.word_dropout, model.mask_id, dropout_rng)
            batch = random_masking(batch, config.mask_training, model.mask_id, dropout_rng)
            loss, count = objective.loss(model, batch, labels)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), config.clip)
            opt.step()
            if schedule is not None:
                schedule.step()
            total += float(loss.detach()) * count
            seen += count
        score = objective.score(model, val_batches)
        history.append({"epoch": epoch + 1, "train_loss": total / max(seen, 1),
                        objective.name: score})
        log.info("%s epoch %d: train loss %.4f, %s %.4f", desc, epoch + 1,
                 history[-1]["train_loss"], objective.name, score)
        if score > best:
            best, best_state, bad = score, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad >= config.patience:
                break
    if best_state is not None:  # None only if no epoch scored above -inf (NaN)
        model.load_state_dict(best_state)
    if config.half_weights:
        round_to_half(model)
    model.eval()
    return best, history


def round_to_half(model: nn.Module) -> None:
    """Every floating-point weight and buffer rounded to the nearest float16 value, kept
    in its own dtype: a copy stored at float16 loads back to exactly these weights."""
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.copy_(tensor.half().to(tensor.dtype))
