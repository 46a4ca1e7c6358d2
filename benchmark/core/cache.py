"""Where trained models and other reusable artefacts are kept, and the hash that
names a model by its weights (keys and atomic writes: ``core.files``)."""

import hashlib
import logging
import math
import os
from pathlib import Path

import platformdirs
import torch

from faithbench.benchmark.core.errors import IntegrityError
from faithbench.benchmark.core.files import atomic_write, content_hash

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """``$FAITHBENCH_CACHE`` or the platform cache dir (outside the repo)."""
    root = os.environ.get("FAITHBENCH_CACHE") or platformdirs.user_cache_dir("faithbench")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def model_path(task: str, key: str) -> Path:
    """Where the model of task ``task`` (its plain name) with content key ``key`` is
    kept: the file training writes, and the name a release ships it under."""
    return cache_dir() / "models" / f"{task}-{key}.pt"


def weights_hash(state_dict, length: int = 16) -> str:
    """Hash of a model's weights: every tensor's name, dtype, shape and bytes, in name order.

    The id records and suites use for a model, so results pair only when the
    weights are bit-identical, whatever config or seed produced them.

    >>> import torch
    >>> a = {"w": torch.zeros(2, 3), "b": torch.ones(3)}
    >>> weights_hash(a) == weights_hash({"b": torch.ones(3), "w": torch.zeros(2, 3)})
    True
    >>> weights_hash(a) == weights_hash({"w": torch.zeros(2, 3), "b": torch.ones(3) * 1.0001})
    False
    """
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()[:length]


def sealed(blob: dict) -> dict:
    """``blob`` (a checkpoint's dict: "weights" hash, "accuracy") with the hash that binds
    its accuracy to its weights, so an accuracy edited in the file is caught on load."""
    return {**blob, "seal": content_hash({"weights": blob["weights"],
                                          "accuracy": blob["accuracy"]})}


def verified_weights(path: Path, model, saved: dict, *, fraction_accuracy: bool = True,
                     checkpoint: str | None = None) -> str:
    """The weights hash of ``model`` just loaded from ``path`` (``checkpoint``, where the
    caller has it already), which must be the hash stored beside the weights
    (``saved["weights"]``), with a stored accuracy of finite numbers (fractions in [0, 1]
    where ``fraction_accuracy``) that is the one sealed with them (``sealed``): else an
    IntegrityError naming the file. A file from before hashes were stored gets them now,
    once."""
    found = checkpoint or weights_hash(model.state_dict())
    fix = f"delete {path}: the next run trains (or evaluates) the model again"
    recorded = saved.get("weights")
    if recorded is not None and recorded != found:
        raise IntegrityError(path, f"its weights hash {found} is not the {recorded} stored "
                             "with them", fix)
    accuracy = saved.get("accuracy")
    if not isinstance(accuracy, dict) or not all(
            isinstance(v, (int, float)) and math.isfinite(v)
            and (not fraction_accuracy or 0.0 <= v <= 1.0) for v in accuracy.values()):
        raise IntegrityError(path, f"its stored accuracy {accuracy!r} is not a set of "
                             "finite fractions", fix)
    if recorded is not None and "seal" in saved and sealed(saved)["seal"] != saved["seal"]:
        raise IntegrityError(path, f"its stored accuracy {accuracy!r} is not the one "
                             "stored with its weights", fix)
    if recorded is None or "seal" not in saved:
        log.warning("%s: stored before faithbench kept its weights hash and accuracy seal; "
                    "they are stored now and checked from here on", path)
        try:
            atomic_write(path, lambda tmp: torch.save(sealed({**saved, "weights": found}), tmp))
        except OSError as exc:  # a read-only cache: checked again next time
            log.warning("%s: could not store its hashes (%s)", path, exc)
    return found


