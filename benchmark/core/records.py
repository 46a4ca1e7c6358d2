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
Lines are only appended, except that ``run --fresh`` removes the line of a unit it
recomputes (``rewrite_jsonl``, under the lock appends take); readers that meet a key
twice take its last line (``latest_results``).
"""

from __future__ import annotations

import io
import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TextIO

import jsonlines

from faithbench.benchmark.core.errors import DataFileError, NotUtf8Error
from faithbench.benchmark.core.files import atomic_write, naming
from faithbench.benchmark.core.stats import Estimate

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: appends are not locked (nor runs claimed)
    fcntl = None  # type: ignore[assignment]

SCHEMA_VERSION = 1
# forward-equivalents = forward rows + BACKWARD_COST x backward rows (``core.cost``): a
# backward pass costs about two forward passes
BACKWARD_COST = 2


@dataclass(frozen=True)
class Provenance:
    """What a result says about the model, data and code that produced it.

    ``checkpoint`` (weights hash, or ``model-free`` for alignments scored from a file)
    and ``data_fingerprint`` put it in a suite; ``config`` holds the unit's own
    evaluation options (``run``), the model's config (``task``), explainer and metric
    spec; ``seeds`` the model, explainer and bootstrap seeds. Fields other than the
    first four were added over time: absent from older records (None here) and written
    only when set. ``git_commit`` is None outside a git checkout, and written as null.
    """

    checkpoint: str
    data_fingerprint: str
    faithbench: str | None = None
    git_commit: str | None = None
    python: str | None = None
    platform: str | None = None
    torch: str | None = None
    torch_threads: int | None = None
    device: str | None = None  # where the model ran: cpu, cuda:0 (NVIDIA H100 ...)
    cache_key: str | None = None
    # split -> accuracy (records of the first releases: one float)
    model_accuracy: dict[str, float] | float | None = None
    config: dict[str, Any] | None = None
    seeds: dict[str, int] | None = None
    # alignments scored from a file: the file and its sha256
    alignments: str | None = None
    alignments_sha256: str | None = None
    # what made the model and its gate check (``core.gate.ModelReport.as_dict``)
    model: dict[str, Any] | None = None

    OPTIONAL: ClassVar[tuple[str, ...]] = (
        "python", "platform", "torch", "torch_threads", "device", "cache_key", "model_accuracy",
        "config", "seeds", "alignments", "alignments_sha256", "model")

    def as_dict(self) -> dict:
        return _written(self)

    def run_options(self) -> dict | None:
        """The evaluation options of the run that computed the result (None: the record
        does not say, e.g. alignments scored from a file)."""
        return (self.config or {}).get("run")


@dataclass(frozen=True)
class Timing:
    """Where a unit's time went: explaining (seconds for every example, shared by the
    unit's metrics), the metric, and the engine's rows forwarded of those requested
    (the rest answered from memory). Every field is optional (older records and
    alignments scored from a file have fewer) and written only when set.

    The explainer's cost (``faithbench.benchmark.core.cost``), like ``explain_s`` a total
    over the ``n_examples`` explained (per example: divide by ``n_examples``):
    ``explain_forward_rows`` and ``explain_backward_rows``, the rows it passed through
    the model's forward methods and back through autograd;
    ``explain_forward_equivalents`` = forward rows + ``BACKWARD_COST`` (2) × backward
    rows; ``explain_requested_rows``, the rows it asked of the model, those the engine
    shared with the metrics answered from memory included (what ``leaderboard --cost``
    charges it: what it costs alone); ``explain_peak_mib``, the largest increase of
    memory during one batch's
    explain call above its start, measured by ``explain_peak_method``
    (``cuda_max_allocated``, ``rss_hwm`` or ``rss_sampled``). A cached explanation
    keeps the cost of the run that computed it."""

    explain_s: float | None = None
    metric_s: float | None = None
    rows_forwarded: int | None = None
    rows_requested: int | None = None
    n_examples: int | None = None
    explain_forward_rows: int | None = None
    explain_backward_rows: int | None = None
    explain_forward_equivalents: int | None = None
    explain_peak_mib: float | None = None
    explain_peak_method: str | None = None
    explain_requested_rows: int | None = None

    OPTIONAL: ClassVar[tuple[str, ...]] = (
        "explain_s", "metric_s", "rows_forwarded", "rows_requested", "n_examples",
        "explain_forward_rows", "explain_backward_rows", "explain_forward_equivalents",
        "explain_peak_mib", "explain_peak_method", "explain_requested_rows")

    def as_dict(self) -> dict:
        return _written(self)

    def per_example(self, name: str) -> float | None:
        """``explain_s``, ``explain_forward_equivalents``, ... divided by ``n_examples``
        (None where the record lacks either).

        >>> Timing(explain_s=3.0, explain_forward_equivalents=90, n_examples=30).per_example(
        ...     "explain_forward_equivalents")
        3.0
        """
        value = getattr(self, name)
        if value is None or not self.n_examples:
            return None
        return value / self.n_examples


@dataclass(frozen=True)
class ResultRecord:
    """One (task, model seed, explainer, metric) unit's result: a line of
    ``results.jsonl``. ``key`` is its content key (``plan.unit_key``: a resumed run skips
    units whose key is there); ``per_example_file`` holds the values behind ``estimate``;
    ``extra`` counts the metric's flags (e.g. examples whose top-k ran out of tokens)."""

    key: str
    task: str
    model_seed: int
    explainer: str
    metric: str
    family: str
    direction: str
    split: str
    # mean, CI, n (examples that define the metric), bootstrap settings, ``method`` and
    # ``undefined`` (NaN examples left out); records written before the last two existed
    # mean a percentile bootstrap and 0 (stats.BOOTSTRAP), which the defaults say
    estimate: Estimate
    per_example_file: str
    provenance: Provenance
    timing: Timing
    extra: dict[str, int] = field(default_factory=dict)
    # None: the estimate is the mean of the per-example values; else a corpus-level
    # metric's aggregation (faithbench.api.Aggregation.as_dict) of their "stats"
    aggregation: dict[str, Any] | None = None
    created_at: float = field(default_factory=time.time)
    record_type: str = "result"
    schema_version: int = SCHEMA_VERSION

    def as_dict(self) -> dict:
        return {**asdict(self), "estimate": self.estimate.as_dict(),
                "provenance": self.provenance.as_dict(), "timing": self.timing.as_dict()}

    @classmethod
    def from_dict(cls, d: dict, *, where: str = "<record>") -> ResultRecord:
        return _from_dict(cls, "result", d, where)

    @classmethod
    def build(cls, metric_spec, estimate: Estimate, *, key: str, task: str, model_seed: int,
              explainer: str, split: str, per_example_file: str, provenance: Provenance,
              timing: Timing, extra: dict | None = None) -> ResultRecord:
        """The one way a result is built (a run's unit, or alignments scored from a
        file): what the metric decides (id, family, direction, aggregation) is read
        off its spec."""
        agg = metric_spec.aggregation
        return cls(key=key, task=task, model_seed=model_seed, explainer=explainer,
                   metric=metric_spec.id, family=metric_spec.family,
                   direction=metric_spec.direction, split=split, estimate=estimate,
                   per_example_file=per_example_file, provenance=provenance, timing=timing,
                   extra=extra or {}, aggregation=None if agg is None else agg.as_dict())


def _written(obj) -> dict:
    """The fields of ``obj`` as JSON writes them: an ``OPTIONAL`` one only when set."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)
            if getattr(obj, f.name) is not None or f.name not in obj.OPTIONAL}


@dataclass(frozen=True)
class RoarRow:
    """One point of a ROAR sweep (``faithbench.benchmark.roar``), a line of
    ``<out>/roar/rows.jsonl``: a model trained on data masked by ``mask`` at ``ratio``
    (``kind`` "roar", "recursive", or "leakage": a model of the mask pattern alone) and
    scored on the masked ``split`` of the original model's examples. The shift fields
    (the original model on the same masked inputs, and the Mahalanobis AUROCs of clean
    against masked inputs) are set on the masked points of "roar" and "recursive"
    curves only, and written only there."""

    key: str
    task: str
    kind: str
    seed: int
    mask: str
    ratio: float
    transform: str | None  # the mask's key (None: the original model)
    checkpoint: str
    original_checkpoint: str
    split: str
    n: int
    accuracy: float
    correct: list[int]  # 1 where the model is right, per example in order
    majority: float  # the majority class's share of the split
    validation_accuracy: float | None
    train_s: float | None  # None: loaded from the cache, not trained by this sweep
    epochs: int
    fixed_accuracy: float | None = None
    fixed_drop: float | None = None
    auroc_original: float | None = None
    auroc_retrained: float | None = None

    OPTIONAL: ClassVar[tuple[str, ...]] = (
        "fixed_accuracy", "fixed_drop", "auroc_original", "auroc_retrained")

    def as_dict(self) -> dict:
        return _written(self)

    @classmethod
    def from_dict(cls, d: dict, *, where: str = "<row>") -> RoarRow:
        return _build(cls, d, where, "ROAR", "")


@dataclass(frozen=True)
class FailureRecord:
    """An explainer that failed (exception, NaN, wrong length, over budget) at ``stage``
    on a task: a line of ``failures.jsonl``, never of ``results.jsonl``."""

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
    return _build(cls, d, where, record_type, "")


# the record parts read into their own types (the rest of a record is plain JSON)
_PARTS: dict[str, type] = {"estimate": Estimate, "provenance": Provenance, "timing": Timing}


def _build(cls, d: Any, where: str, what: str, prefix: str):
    """``cls`` from the JSON object ``d``: each required field present, each record part
    (``_PARTS``) an object read into its type; an error names the field."""
    if not isinstance(d, dict):
        raise DataFileError(where, None, prefix.rstrip(".") or None, "not a JSON object")
    known = {f.name: f for f in fields(cls)}
    for name, f in known.items():
        if f.default is MISSING and f.default_factory is MISSING and name not in d:
            raise DataFileError(where, None, prefix + name, f"missing from {what} record")
    values = {}
    for name, value in d.items():
        if name not in known:
            continue
        part = _PARTS.get(name) if cls is ResultRecord else None
        if part is not None:
            value = _build(part, value, where, what, f"{name}.")
        values[name] = value
    return cls(**values)


def append_jsonl(path: Path, obj: dict) -> None:
    """Append one line durably; first cut off any partial line left by a crash. The
    file is locked meanwhile (``locked_jsonl``), so two runs may share one ``--out``
    folder (e.g. the two directions of the alignment task) without cutting or
    interleaving each other's lines, nor losing one to a rewrite (``rewrite_jsonl``)."""
    line = io.StringIO()
    with jsonlines.Writer(line, compact=True, sort_keys=True) as writer:
        writer.write(obj)
    with naming(path), locked_jsonl(path) as fh:  # a full disk's error names the file
        _repair_tail(Path(path))
        fh.write(line.getvalue())
        fh.flush()
        os.fsync(fh.fileno())


@contextmanager
def locked_jsonl(path: Path) -> Iterator[TextIO]:
    """Hold the lock that appends and rewrites of ``path`` take (an exclusive ``flock``
    on the file itself), yielding the file open for appending. A rewrite replaces the
    file (``rewrite_jsonl``: a new inode): whoever waited for the lock of the file it
    replaced finds, once it has the lock, that the path names another file, and takes
    that one's lock instead, so no line is written into a file nobody reads."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        with open(path, "a", encoding="utf-8") as fh:  # closing it releases the lock
            if fcntl is None or _current(fh, path):
                yield fh
                return
        # replaced while we waited: lock the file the path names now


def _current(fh, path: Path) -> bool:
    """Lock ``fh``; whether ``path`` still names the file ``fh`` has open."""
    fcntl.flock(fh, fcntl.LOCK_EX)  # released when fh closes
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fh.fileno())
    return (named.st_ino, named.st_dev) == (mine.st_ino, mine.st_dev)


def rewrite_jsonl(path: Path, keep: Callable[[dict], bool]) -> int:
    """Remove the complete lines of ``path`` whose object ``keep`` refuses, under the
    lock appends take; returns how many. The lines kept are kept byte for byte (and the
    file's mode), and the file is replaced at once (temp file + rename): a reader sees
    the old file or the new one, never a half-written one, and a crash leaves either."""
    path = Path(path)
    if not path.exists():
        return 0
    with locked_jsonl(path):
        text = read_utf8(path)
        lines = text[: text.rfind("\n") + 1].split("\n")[:-1]
        kept = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                raise DataFileError(path, number, None, "not a valid JSON object") from None
            if keep(obj):
                kept.append(line + "\n")
        removed = sum(1 for line in lines if line.strip()) - len(kept)
        if removed:
            mode = stat.S_IMODE(path.stat().st_mode)

            def write(tmp):
                Path(tmp).write_text("".join(kept), encoding="utf-8")
                os.chmod(tmp, mode)

            atomic_write(path, write)
    return removed


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
    # the standard parser, named: jsonlines defaults to orjson where it is installed,
    # which refuses the NaN that older files hold, so a file read here and not on CI
    with jsonlines.Reader(io.StringIO(complete), loads=json.loads) as reader:
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
    """Every result line of ``path``, in file order (``latest_results``: one per key)."""
    return [ResultRecord.from_dict(d, where=f"{path}, line {i}")
            for i, d in enumerate(read_jsonl(path), start=1) if d.get("record_type") == "result"]


def latest_results(path: Path) -> list[ResultRecord]:
    """The results of ``path``, one per key: where a key has several lines (a unit
    recomputed by ``run --fresh`` whose old line a crash left beside the new one, or a
    folder written before the old line was removed), the last one, which is the newest."""
    latest: dict[str, ResultRecord] = {}
    for record in read_results(path):
        latest.pop(record.key, None)
        latest[record.key] = record
    return list(latest.values())


def read_roar_rows(path: Path) -> list[RoarRow]:
    return [RoarRow.from_dict(d, where=f"{path}, line {i}")
            for i, d in enumerate(read_jsonl(path), start=1)]


def read_agreements(path: Path) -> list[AgreementRecord]:
    return [AgreementRecord.from_dict(d, where=f"{path}, line {i}")
            for i, d in enumerate(read_jsonl(path), start=1) if d.get("record_type") == "agreement"]
