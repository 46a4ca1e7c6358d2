"""Training with early stopping on validation accuracy; the best epoch's weights are kept."""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from benchmark.core.api import Batch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 10
    patience: int = 2  # epochs without a better validation accuracy before stopping
    lr: float = 1e-3
    batch_size: int = 32
    weight_decay: float = 0.0
    clip: float = 5.0

    def as_dict(self) -> dict:
        return asdict(self)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@torch.no_grad()
def accuracy(model: nn.Module, batches: Iterable[tuple[Batch, torch.Tensor]]) -> float:
    model.eval()
    right = total = 0
    for batch, labels in batches:
        right += int((model.logits(batch).argmax(-1) == labels).sum())
        total += len(labels)
    return right / max(total, 1)


def train(
    model: nn.Module,
    train_batches: Callable[[int], list[tuple[Batch, torch.Tensor]]],
    val_batches: list[tuple[Batch, torch.Tensor]],
    config: TrainConfig,
    *,
    seed: int,
    desc: str = "train",
    progress: bool = True,
) -> tuple[float, list[dict]]:
    """Train in place; ``train_batches(epoch)`` gives that epoch's shuffled batches.

    Returns the best validation accuracy and the per-epoch history.
    """
    seed_everything(seed)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    best_acc, best_state, bad, history = -1.0, None, 0, []
    for epoch in range(config.epochs):
        model.train()
        batches = train_batches(epoch)
        total = 0.0
        for batch, labels in tqdm(batches, desc=f"{desc} epoch {epoch + 1}", leave=False,
                                   disable=not progress):
            opt.zero_grad()
            loss = loss_fn(model.logits(batch), labels)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), config.clip)
            opt.step()
            total += float(loss.detach()) * len(labels)
        acc = accuracy(model, val_batches)
        history.append({"epoch": epoch + 1, "train_loss": total / sum(len(y) for _, y in batches),
                        "val_accuracy": acc})
        log.info("%s epoch %d: train loss %.4f, validation accuracy %.4f", desc, epoch + 1,
                 history[-1]["train_loss"], acc)
        if acc > best_acc:
            best_acc, best_state, bad = acc, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad >= config.patience:
                break
    model.load_state_dict(best_state)
    model.eval()
    return best_acc, history
