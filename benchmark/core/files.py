"""Content keys and atomic files: the torch-free half of the cache, which the
leaderboard (no torch) shares with the engine. Keys are hashes of canonical JSON, so
the same data, config and seed always find the same file; writes go to a temp file
renamed in place, so a killed run never leaves a half-written file.
"""

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

from faithbench.benchmark.core.errors import InputError


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
    """Call ``write(file_path)`` on a temp file next to ``path``, then rename it in place.
    An OSError that names no file (a full disk while writing) names ``path``."""
    path = Path(path)
    with naming(path):
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


@contextlib.contextmanager
def naming(path: Path):
    """An OSError raised inside that names no file (``write`` and ``fsync`` on a full
    disk say only "No space left on device") comes out naming ``path``, so the one line
    the CLI prints for it says where (``faithbench.benchmark.cli.main``)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


# file systems whose files are the kernel's, not a disk's: nothing a run writes belongs there
VIRTUAL = (Path("/proc"), Path("/sys"))


def folder_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a folder faithbench writes, found without creating
    anything: a file in its place or above it, a virtual file system (``/proc``,
    ``/sys``), or a nearest existing folder it may not write in; None if none is seen."""
    path = Path(path)
    absolute = Path(os.path.abspath(path))
    for root in VIRTUAL:
        if absolute == root or root in absolute.parents:
            return f"is under {root}, the kernel's virtual file system; give a folder on a disk"
    for p in (path, *path.parents):
        if not (p.exists() or p.is_symlink()):
            continue
        if not p.is_dir():
            return ("is a file, not a folder; give a folder (created if missing)" if p == path
                    else f"is under {p}, which is a file, not a folder")
        if not os.access(p, os.W_OK | os.X_OK):
            return (f"cannot be written: {'it' if p == path else p} is read-only to this user"
                    " (or on a read-only disk)")
        return None
    return None


def writable_folder(path: Path, flag: str = "--out") -> None:
    """``path`` made a folder faithbench can write in (created if missing), proved by
    writing a probe file there and removing it: else an InputError naming ``flag`` and
    the path (``folder_problem``, or the error the system gave: a full or read-only
    disk, no permission), before anything is trained or written."""
    path = Path(path)
    problem = folder_problem(path)
    if problem is not None:
        raise InputError(f"{flag} {path} {problem}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".faithbench-probe-")
        try:
            os.write(fd, b"faithbench can write here\n")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename and Path(exc.filename) != path else ""
        raise InputError(f"{flag} {path} cannot be written: {exc.strerror or exc}{where}"
                         ) from None
