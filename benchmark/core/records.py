"""Result and failure records, and the JSON Lines files that hold them.

One result per (task, model seed, explainer, metric) with ``schema_version``, a
content key, the estimate (mean, CI, n), provenance and timing; its per-example
values live beside it in their own file, written (atomically) before the result
line, so a result line always has its per-example file. Failures are their own
record type in their own file, never mixed into results; so are agreement records
(how alike explainers rank tokens), which are descriptive, not results.

A unit is done if and only if its result line exists. Appends are flushed and
fsync'd; a line cut short by ``kill -9`` has no trailing newline and is dropped
on the next read and repaired on the next append, so it is never read as a result.
"""

from __future__ import annotations

import io
import os
import time
from dataclasses import MISSING, asdict, dataclass, field
from pathlib import Path

import jsonlines

from faithbench.benchmark.core.errors import DataFileError, NotUtf8Error
from faithbench.benchmark.core.files import atomic_write

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: appends are not locked (nor runs claimed)
    fcntl = None  # type: ignore[assignment]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ResultRecord:
    key: str
    task: str
    model_seed: int
    explainer: str
    metric: str
    family: str
    direction: str
    split: str
    # stats.Estimate.as_dict(): mean, CI, n (examples that define the metric), bootstrap
    # settings, ``method`` and ``undefined`` (NaN examples left out); records written
    # before the last two existed mean a percentile bootstrap and 0 (stats.BOOTSTRAP)
    estimate: dict
    per_example_file: str
    provenance: dict
    timing: dict
    extra: dict = field(default_factory=dict)
    # None: the estimate is the mean of the per-example values; else a corpus-level
    # metric's aggregation (faithbench.api.Aggregation.as_dict) of their "stats"
    aggregation: dict | None = None
    created_at: float = field(default_factory=time.time)
    record_type: str = "result"
    schema_version: int = SCHEMA_VERSION

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, *, where: str = "<record>") -> ResultRecord:
        return _from_dict(cls, "result", d, where)

    @classmethod
    def build(cls, metric_spec, estimate, *, key: str, task: str, model_seed: int,
              explainer: str, split: str, per_example_file: str, provenance: dict,
              timing: dict, extra: dict | None = None) -> ResultRecord:
        """The one way a result is built (a run's unit, or alignments scored from a
        file): what the metric decides (id, family, direction, aggregation) is read
        off its spec, the estimate (``stats.Estimate``) written as its dict."""
        agg = metric_spec.aggregation
        return cls(key=key, task=task, model_seed=model_seed, explainer=explainer,
                   metric=metric_spec.id, family=metric_spec.family,
                   direction=metric_spec.direction, split=split,
                   estimate=estimate.as_dict(), per_example_file=per_example_file,
                   provenance=provenance, timing=timing, extra=extra or {},
                   aggregation=None if agg is None else agg.as_dict())


@dataclass(frozen=True)
class FailureRecord:
    task: str
    explainer: str
    stage: str
    message: str
    example_ids: list = field(default_factory=list)
    model_seed: int | None = None
    created_at: float = field(default_factory=time.time)
    record_type: str = "failure"
    schema_version: int = SCHEMA_VERSION

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class AgreementRecord:
    """Agreement between explainers on one (task, model seed, split): the pair rows of
    ``faithbench.metrics.agreement.agreement_matrix``, keyed by explainer name; ``explainers``
    holds the canonical ids of those that took part (in matrix order)."""

    key: str
    task: str
    model_seed: int
    split: str
    explainers: list
    rows: list
    provenance: dict
    created_at: float = field(default_factory=time.time)
    record_type: str = "agreement"
    schema_version: int = SCHEMA_VERSION

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, *, where: str = "<record>") -> AgreementRecord:
        return _from_dict(cls, "agreement", d, where)


def _from_dict(cls, record_type: str, d: dict, where: str):
    """Check type, version and required fields; ignore fields this version does not know."""
    if d.get("record_type") != record_type:
        raise DataFileError(where, None, "record_type",
                            f"expected {record_type!r}, got {d.get('record_type')!r}")
    version = d.get("schema_version")
    if version != SCHEMA_VERSION:
        raise DataFileError(where, None, "schema_version", f"unsupported version {version!r}")
    fields = cls.__dataclass_fields__
    required = [k for k, f in fields.items() if f.default is MISSING and f.default_factory is MISSING]
    for k in required:
        if k not in d:
            raise DataFileError(where, None, k, f"missing from {record_type} record")
    return cls(**{k: v for k, v in d.items() if k in fields})


def append_jsonl(path: Path, obj: dict) -> None:
    """Append one line durably; first cut off any partial line left by a crash. The
    file is locked meanwhile, so two runs may share one ``--out`` folder (e.g. the two
    directions of the alignment task) without cutting or interleaving each other's
    lines."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = io.StringIO()
    with jsonlines.Writer(line, compact=True, sort_keys=True) as writer:
        writer.write(obj)
    with open(path, "a", encoding="utf-8") as fh:
        if fcntl is not None:
            fcntl.flock(fh, fcntl.LOCK_EX)  # released when fh closes
        _repair_tail(path)
        fh.write(line.getvalue())
        fh.flush()
        os.fsync(fh.fileno())


def _repair_tail(path: Path) -> None:
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as fh:
        data = fh.read()
        if data.endswith(b"\n"):
            return
        fh.truncate(data.rfind(b"\n") + 1)


def read_utf8(path: Path) -> str:
    """A whole file's text; bytes that are not UTF-8 are an error naming the line and
    the byte offset."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUtf8Error.at(path, data, exc.start) from None


def read_jsonl(path: Path) -> list[dict]:
    """Complete lines of a JSON Lines file; a final line without newline is ignored.

    A malformed complete line, or bytes that are not UTF-8, is an error naming the file
    and line.
    """
    path = Path(path)
    if not path.exists():
        return []
    text = read_utf8(path)
    complete = text[: text.rfind("\n") + 1]
    with jsonlines.Reader(io.StringIO(complete)) as reader:
        try:
            return list(reader.iter(type=dict, skip_empty=True))
        except jsonlines.InvalidLineError as exc:
            raise DataFileError(path, exc.lineno, None, "not a valid JSON object") from None


def write_jsonl_atomic(path: Path, rows: list[dict]) -> None:
    """Write a whole JSON Lines file at once (temp file + rename)."""

    def write(tmp):
        with jsonlines.open(tmp, mode="w", compact=True, sort_keys=True) as writer:
            writer.write_all(rows)

    atomic_write(Path(path), write)


def read_results(path: Path) -> list[ResultRecord]:
    return [ResultRecord.from_dict(d, where=f"{path}, line {i}")
            for i, d in enumerate(read_jsonl(path), start=1) if d.get("record_type") == "result"]


def read_agreements(path: Path) -> list[AgreementRecord]:
    return [AgreementRecord.from_dict(d, where=f"{path}, line {i}")
            for i, d in enumerate(read_jsonl(path), start=1) if d.get("record_type") == "agreement"]
