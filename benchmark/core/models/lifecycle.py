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
from faithbench.benchmark.core.errors import InputError, IntegrityError
from faithbench.benchmark.core.files import atomic_write, file_hash
from faithbench.benchmark.core.gate import ModelReport


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
    report: ModelReport | None = None  # what made the model and its gate check (core.gate)

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


# -- a release's models ------------------------------------------------------------------

RELEASE_MODELS = "models"  # the folder of a release that holds its models, by cache name


def from_release(release: str | Path, path: Path) -> None:
    """Put the model a release ships under ``path``'s name (its task and content key)
    into the cache at ``path``, as training would have written it, so ``load_or_train``
    loads it (checking its weights hash and seal) and nothing is trained. The key hashes
    the data and every training option, so a release without that file means the run
    asked for another model than the release's: an InputError saying so."""
    shipped = Path(release) / RELEASE_MODELS / path.name
    if not shipped.is_file():
        raise InputError(
            f"release {release} ships no model {path.name}: this run's data or model options "
            "differ from those the release's model was trained with (the model's key hashes "
            "both); use the data files the release names (--data-dir) and no --train-limit, "
            "--epochs, --variant or --model of your own")
    if path.exists():
        return
    blob = torch.load(shipped, map_location="cpu", weights_only=True)
    state = {k: v.to(getattr(torch, blob["dtypes"][k])) for k, v in blob["state_dict"].items()}
    if weights_hash(state) != blob["weights"]:
        raise IntegrityError(shipped, "its weights do not hash to the checkpoint stored with "
                             "them", "reinstall faithbench or check out the release again")
    kept = {k: v for k, v in blob.items() if k != "dtypes"}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: torch.save({**kept, "state_dict": state}, tmp))


def pack(path: Path, out: Path) -> dict:
    """The cached model at ``path``, written to ``out/models/`` under the same name for
    a release: each float tensor whose values are all float16 values (a model trained
    with ``--half-weights``) stored as float16, so the file is half the size and loads
    back bit for bit. Returns its file name, size, sha256 and weights hash."""
    blob = torch.load(path, map_location="cpu", weights_only=True)
    state, dtypes = {}, {}
    for k, v in blob["state_dict"].items():
        dtypes[k] = str(v.dtype).removeprefix("torch.")
        half = v.is_floating_point() and torch.equal(v.half().to(v.dtype), v)
        state[k] = v.half() if half else v
    target = out / RELEASE_MODELS / path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.save({**blob, "state_dict": state, "dtypes": dtypes}, target)
    return {"file": f"{RELEASE_MODELS}/{path.name}", "bytes": target.stat().st_size,
            "sha256": file_hash(target), "checkpoint": blob["weights"],
            "float16": all(v.dtype == torch.float16 for v in state.values()
                           if v.is_floating_point())}
