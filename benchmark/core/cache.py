"""Where trained models and other reusable artefacts are kept, and how they are keyed.

Keys are content hashes of canonical JSON, so the same data, config and seed
always find the same file; writes are atomic (temp file + rename), so a killed
run never leaves a half-written artefact that a later run would read.
"""

import hashlib
import json
import os
import tempfile
from pathlib import Path

import platformdirs
import torch


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
