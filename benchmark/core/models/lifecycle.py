"""One model lifecycle for every task family: a model built from its seed (by the
caller, whose seed decides the initial weights) is loaded from the file its content
key names, its weights hash and sealed accuracy checked, or trained, hashed and saved
atomically beside that accuracy. The classification tasks (BiLSTM and Transformer
families) and the alignment task all go through ``load_or_train``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from faithbench.benchmark.core.api import TaskSpec
from faithbench.benchmark.core.cache import sealed, verified_weights, weights_hash
from faithbench.benchmark.core.files import atomic_write


@dataclass(kw_only=True)
class PreparedModel:
    """The fields every task family's ``PreparedTask`` shares: the task's spec, the
    model and what its lifecycle found out (``checkpoint`` = weights hash, ``cache_key``
    = hash of what training reads, which names ``checkpoint_file``)."""

    spec: TaskSpec
    model: Any  # implements the model surface of faithbench.api
    cache_key: str
    data_fingerprint: str
    config: dict
    checkpoint: str = ""
    accuracy: dict[str, float] = field(default_factory=dict)
    history: list = field(default_factory=list)
    loaded_from_cache: bool = False
    checkpoint_file: Path | None = None  # the cached weights (a retraining job ships them)

    def take(self, made: Made) -> None:
        """Record what ``load_or_train`` found."""
        self.checkpoint, self.accuracy, self.history = made.checkpoint, made.accuracy, made.history
        self.loaded_from_cache = made.loaded_from_cache


@dataclass
class Made:
    """A trained model's facts: its weights hash (``checkpoint``), accuracy, training
    history, whether it came from the cache, and the saved file's other fields."""

    checkpoint: str
    accuracy: dict
    history: list
    loaded_from_cache: bool
    saved: dict


def load_or_train(model: torch.nn.Module, path: Path, *,
                  train: Callable[[], tuple[list, dict]], config: dict,
                  extra: Callable[[], dict] | None = None,
                  fraction_accuracy: bool = True) -> Made:
    """``model`` (just built) with the weights saved at ``path``, checked; or, if none
    are saved, trained by ``train() -> (history, accuracy)`` and saved there with its
    config, weights hash, accuracy seal and ``extra()`` fields. Either way in eval mode.
    ``fraction_accuracy``: accuracy values are fractions in [0, 1] (the alignment
    task's perplexity and BLEU are not)."""
    if path.exists():
        saved = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(saved["state_dict"])
        checkpoint = verified_weights(path, model, saved, fraction_accuracy=fraction_accuracy)
        model.eval()
        return Made(checkpoint, saved["accuracy"], saved["history"], True, saved)
    history, accuracy = train()
    checkpoint = weights_hash(model.state_dict())
    blob = {"state_dict": model.state_dict(), "accuracy": accuracy, "history": history,
            "config": config, **(extra() if extra else {}), "weights": checkpoint}
    atomic_write(path, lambda tmp: torch.save(sealed(blob), tmp))
    model.eval()
    return Made(checkpoint, accuracy, history, False, blob)
