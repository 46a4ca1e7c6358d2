"""Content keys and atomic files: the torch-free half of the cache, which the
leaderboard (no torch) shares with the engine. Keys are hashes of canonical JSON, so
the same data, config and seed always find the same file; writes go to a temp file
renamed in place, so a killed run never leaves a half-written file.
"""

import hashlib
import json
import os
import tempfile
from pathlib import Path


def content_hash(obj, length: int = 16) -> str:
    """Stable hash of a JSON-serialisable object.

    >>> content_hash({"b": 1, "a": [1, 2]}) == content_hash({"a": [1, 2], "b": 1})
    True
    """
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


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
