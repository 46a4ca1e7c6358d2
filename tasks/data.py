"""Loading task data through Hugging Face ``datasets``: from the hub by default, or
from a local directory of JSON Lines files with the hub's columns.

Local files are checked line by line first, so a malformed file gets an error
naming the file, line and field instead of an Arrow traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import datasets

from benchmark.core.errors import DataFileError, InputError

DATA_ENV = "FAITHBENCH_DATA"


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path | None:
    """``--data-dir`` wins; else ``$FAITHBENCH_DATA``; else None (the hub)."""
    value = data_dir or os.environ.get(DATA_ENV)
    return Path(value) if value else None


def jsonl_objects(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line; a line that is not a JSON object
    is an error naming the file and line."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFileError(path, lineno, None, f"not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise DataFileError(path, lineno, None, "expected a JSON object")
            yield lineno, row


def check_jsonl(path: Path, columns: dict[str, type | tuple], labels: set[int] | None) -> int:
    """Validate a JSON Lines file; returns its row count."""
    rows = 0
    for lineno, row in jsonl_objects(path):
        for name, kind in columns.items():
            if name not in row:
                raise DataFileError(path, lineno, name, "missing column")
            if not isinstance(row[name], kind) or isinstance(row[name], bool):
                raise DataFileError(path, lineno, name,
                                    f"expected {_kind_name(kind)}, got {type(row[name]).__name__}")
        if labels is not None and row["label"] not in labels:
            raise DataFileError(path, lineno, "label",
                                f"unknown label {row['label']!r} (expected one of {sorted(labels)})")
        rows += 1
    return rows


def _kind_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def load_local(folder: Path, splits: list[str], columns: dict, labels: set[int] | None
               ) -> dict[str, datasets.Dataset]:
    """``load_dataset("json", data_files=...)`` over ``folder/<split>.jsonl`` after checking each file."""
    if not folder.is_dir():
        raise InputError(f"data directory {folder} does not exist (expected JSON Lines files there)")
    files = {}
    for split in splits:
        path = folder / f"{split}.jsonl"
        if not path.is_file():
            raise InputError(f"{path}: missing split file for split {split!r}")
        check_jsonl(path, columns, labels)
        files[split] = str(path)
    loaded = datasets.load_dataset("json", data_files=files)
    return {split: loaded[split] for split in splits}


def load_hub(dataset_id: str, splits: list[str]) -> dict[str, datasets.Dataset]:
    try:
        loaded = datasets.load_dataset(dataset_id)
    except Exception as exc:  # noqa: BLE001 — offline machines land here; say what to do
        raise InputError(
            f"could not load hub dataset {dataset_id!r} ({type(exc).__name__}: {exc}); "
            f"pass --data-dir DIR (or set ${DATA_ENV}) with a local JSON Lines copy"
        ) from None
    return {split: loaded[split] for split in splits}
