"""Where trained models and other reusable artefacts are kept, and how they are keyed.

Keys are content hashes of canonical JSON, so the same data, config and seed
always find the same file; writes are atomic (temp file + rename), so a killed
run never leaves a half-written artefact that a later run would read.
"""

import hashlib
import json
import logging
import math
import os
import tempfile
from pathlib import Path

import platformdirs
import torch

from faithbench.benchmark.core.errors import IntegrityError

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """``$FAITHBENCH_CACHE`` or the platform cache dir (outside the repo)."""
    root = os.environ.get("FAITHBENCH_CACHE") or platformdirs.user_cache_dir("faithbench")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def content_hash(obj, length: int = 16) -> str:
    """Stable hash of a JSON-serialisable object.

    >>> content_hash({"b": 1, "a": [1, 2]}) == content_hash({"a": [1, 2], "b": 1})
    True
    """
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


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


def file_hash(path: Path) -> str:
    """sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def atomic_write(path: Path, write) -> None:
    """Call ``write(file_path)`` on a temp file next to ``path``, then rename it in place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
