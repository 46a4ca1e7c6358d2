"""Leaderboard entries: one folder per (explainer, suite), written atomically.

    <root>/<entry_id>/
        results.jsonl      result records (faithbench.benchmark.core.records), one per (task, model seed, metric)
        per_example.jsonl  {"task", "model_seed", "metric", "id", "value"} rows behind them
                           (and "stats" for a corpus-level metric)
        header.json        written last: schema_version, entry_id, explainer, explainer_name,
                           explainer_spec, submitter, notes, created_at, faithbench_versions,
                           git_commits, suite, models (what made each task's models, and
                           whether the model gate refused one), hashes (sha256 of the two
                           files above), seal (the hash of every other header field)

Reading an entry checks both hashes and the seal (``check_seal``: a changed, added or
removed header field is named), that the names it shows are the ones its explainer id
gives (``check_names``: a relabelled entry), that the header's suite is the one its
results give and its entry id the hash of explainer and suite, and recomputes every
stored estimate's n and mean from the rows (``check_estimates``); rankings recompute the
intervals from the rows. A file changed after it was written is an ``IntegrityError``
naming it, never used; so is an entry without hashes or (schema 2) without a seal. The
hashes carry no secret: they catch changes by hand or by accident, and a plugin cannot
write here at all (its worker's file system is confined). Schema 1 entries (before the
seal) are read with their names checked against the sealed id; their free text
(submitter, notes, the spec's citation and description) was never sealed and is not
shown.

``suite`` maps each task id to {"split", "examples" (all, first N, or N at random with
a seed), "model_seeds", "checkpoints" (aligned with the seeds), "data_fingerprint",
"n"}. ``entry_id`` is the content hash of (explainer id, suite), so re-submitting the
same explainer on the same suite replaces the entry rather than adding a second one;
an entry of the same explainer on a subset of the same tasks (an earlier run on other
examples, seeds or checkpoints) is superseded and removed, so the board holds one
entry per explainer there. The folder is built under a dot-name and renamed into place;
readers skip dot-folders and folders without ``header.json``, so a killed write is never
read as an entry.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
import shutil
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from faithbench.benchmark.core.errors import (
    DataFileError,
    InputError,
    IntegrityError,
    UnknownNameError,
)
from faithbench.benchmark.core.files import atomic_write, content_hash, file_hash
from faithbench.benchmark.core.ids import short_name
from faithbench.benchmark.core.records import ResultRecord, read_jsonl, write_jsonl_atomic
from faithbench.benchmark.core.stats import Aggregation
from faithbench.leaderboard.models import models_of
from faithbench.leaderboard.suite import (
    ROW_FIELDS,
    check_results,
    check_rows,
    derive_suite,
    explainer_of,
)

SCHEMA_VERSION = 2  # 2: the header is sealed (``seal``); 1: only the two files are hashed
READABLE_SCHEMAS = (1, 2)
UNSEALED_TEXT = ("submitter", "notes")  # and the spec's: shown only from a sealed header
UNSEALED_SPEC_TEXT = ("citation", "description", "cost")
HEADER_FIELDS = (
    "schema_version",
    "entry_id",
    "explainer",
    "explainer_name",
    "explainer_spec",
    "created_at",
    "suite",
)
SUITE_FIELDS = ("split", "model_seeds", "checkpoints", "data_fingerprint", "n")
HASHED = ("results.jsonl", "per_example.jsonl")  # their sha256 in header["hashes"]
log = logging.getLogger(__name__)


@dataclass
class Entry:
    """One leaderboard entry as read from its folder."""

    path: Path
    header: dict
    results: list[ResultRecord]
    per_example: list[dict]

    @property
    def entry_id(self) -> str:
        return self.header["entry_id"]

    @property
    def explainer(self) -> str:
        return self.header["explainer"]

    @property
    def name(self) -> str:
        return self.header["explainer_name"]

    @property
    def suite(self) -> dict:
        return self.header["suite"]

    @property
    def label(self) -> str:
        return f"{self.explainer} (entry {self.entry_id})"

    @cached_property
    def _index(self) -> tuple[dict, dict, dict]:
        values: dict = defaultdict(dict)
        stats: dict = defaultdict(dict)
        curves: dict = defaultdict(dict)
        for row in self.per_example:
            key = (int(row["model_seed"]), str(row["id"]))
            if row["value"] is not None:
                values[(row["task"], row["metric"])][key] = float(row["value"])
            if "stats" in row:
                stats[(row["task"], row["metric"])][key] = [float(x) for x in row["stats"]]
            if "curve" in row:
                curves[(row["task"], row["metric"])][key] = row["curve"]
        return values, stats, curves

    def values(self, task: str, metric: str) -> dict[tuple[int, str], float]:
        """Per-example values of one (task, metric), keyed by (model seed, example id)."""
        return self._index[0].get((task, metric), {})

    def stats(self, task: str, metric: str) -> dict[tuple[int, str], list[float]]:
        """Per-example statistics of a corpus-level (task, metric), keyed like ``values``."""
        return self._index[1].get((task, metric), {})

    def curves(self, task: str, metric: str) -> dict[tuple[int, str], list[float | None]]:
        """Per-example curve points of an erasure (task, metric), keyed like ``values``
        (None where the example has no such step); empty for records written before
        curves were stored."""
        return self._index[2].get((task, metric), {})


# --- writing --------------------------------------------------------------------------------


def write_entry(root, **entry) -> Path:
    """Write (or replace) the entry for these results (``save_entry``); its folder."""
    return save_entry(root, **entry).path


def save_entry(
    root,
    *,
    explainer_spec: dict,
    results: Sequence[ResultRecord | dict],
    per_example: list[dict],
    notes: str = "",
    submitter: str = "",
) -> Entry:
    """Write (or replace) the entry for these results; the entry as written (what
    ``read_entry`` of its folder gives), so a caller need not read it back."""
    records, rows, header = checked(results, per_example, explainer_spec, notes=notes,
                                    submitter=submitter)
    entry_id, explainer, suite = header["entry_id"], header["explainer"], header["suite"]
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".tmp-{entry_id}-"))
    try:
        write_jsonl_atomic(tmp / "results.jsonl", [r.as_dict() for r in records])
        write_jsonl_atomic(tmp / "per_example.jsonl", rows)
        header["hashes"] = {name: file_hash(tmp / name) for name in HASHED}
        header["seal"] = seal_of(header)
        text = json.dumps(header, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        atomic_write(tmp / "header.json", lambda p: Path(p).write_text(text, encoding="utf-8"))
        final = _move_into_place(tmp, root / entry_id)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for old in superseded(root, explainer, suite, entry_id):
        _remove(old)
    return Entry(final, header, records, rows)


def checked(results: Sequence[ResultRecord | dict], per_example: list[dict],
            explainer_spec: dict, *, notes: str = "", submitter: str = ""
            ) -> tuple[list[ResultRecord], list[dict], dict]:
    """An entry's records and rows, checked against each other (``check_results``,
    ``check_rows``), and the header they give (all but the files' hashes)."""
    records = check_results(results)
    explainer = explainer_of(records, explainer_spec)
    rows = check_rows(per_example, records)
    suite = derive_suite(records)
    provenance = [r.provenance for r in records]
    header = {
        "schema_version": SCHEMA_VERSION,
        "entry_id": content_hash({"explainer": explainer, "suite": suite}),
        "explainer": explainer,
        "explainer_name": explainer_spec.get("name") or short_name(explainer),
        "explainer_spec": _jsonable(explainer_spec, "explainer_spec"),
        "submitter": submitter,
        "notes": notes,
        "created_at": time.time(),
        "faithbench_versions": sorted({str(p.faithbench) for p in provenance}),
        "git_commits": sorted({str(p.git_commit) for p in provenance}),
        "suite": suite,
        "models": models_of(records),  # what made each task's models; weak ones marked
    }
    return records, rows, header


def superseded(root: Path, explainer: str, suite: dict, keep: str) -> list[Path]:
    """Folders of ``explainer``'s other entries that a new entry on ``suite`` replaces:
    those whose every task is in ``suite`` with the same split, examples, data and model
    seeds (a re-run on retrained checkpoints). An entry on other examples (``--limit``),
    another split or other seeds is a different suite: it stays, ranked apart."""
    out = []
    for folder in sorted(root.iterdir()):
        if folder.name == keep or folder.name.startswith(".") or not folder.is_dir():
            continue
        try:
            header = _read_header(folder / "header.json")
        except (OSError, InputError):
            continue  # not a complete entry: read_entries skips it too
        if header["explainer"] == explainer and all(
                task in suite and _same_selection(old, suite[task])
                for task, old in header["suite"].items()):
            out.append(folder)
    return out


SELECTION = ("split", "examples", "data_fingerprint", "model_seeds")


def _same_selection(a: dict, b: dict) -> bool:
    return all(a.get(field) == b.get(field) for field in SELECTION)


def _remove(folder: Path) -> None:
    # renamed to a dot-name first, so no reader sees half an entry
    gone = folder.with_name(f".old-{folder.name}-{uuid.uuid4().hex[:8]}")
    os.rename(folder, gone)
    shutil.rmtree(gone, ignore_errors=True)


def _move_into_place(tmp: Path, final: Path) -> Path:
    # A directory cannot be os.replace'd over a non-empty one: move the old entry to a
    # dot-name first. Between the two renames the entry is absent, never half-written.
    old = None
    if final.exists():
        old = final.with_name(f".old-{final.name}-{uuid.uuid4().hex[:8]}")
        os.rename(final, old)
    os.rename(tmp, final)
    _fsync_dir(final.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _jsonable(obj, where: str):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v, f"{where}.{k}") for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        return sorted(_jsonable(v, where) for v in obj)
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v, where) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    raise InputError(f"{where}: {type(obj).__name__} value {obj!r} is not JSON data")


# --- reading --------------------------------------------------------------------------------


def read_entries(root) -> list[Entry]:
    """Every complete entry under ``root`` (folders without header.json are skipped)."""
    root = Path(root)
    if not root.is_dir():
        return []
    return [
        read_entry(folder)
        for folder in sorted(root.iterdir())
        if folder.is_dir()
        and not folder.name.startswith(".")
        and (folder / "header.json").is_file()
    ]


def read_entry_folders(folders) -> list[Entry]:
    """The entries of several folders, an entry found in two (a copy) once; a folder
    that does not exist is an InputError naming it."""
    found: dict[str, Entry] = {}
    for folder in folders:
        if not Path(folder).is_dir():
            raise InputError(f"--entries {folder}: no such folder")
        for e in read_entries(folder):
            found.setdefault(e.entry_id, e)
    return list(found.values())


def read_entry(folder) -> Entry:
    folder = Path(folder)
    header = _read_header(folder / "header.json")
    results_path, rows_path = folder / "results.jsonl", folder / "per_example.jsonl"
    for path in (results_path, rows_path):
        if not path.is_file():
            raise DataFileError(path, None, None, "missing from the entry folder")
    _check_hashes(folder, header)
    header = check_seal(folder / "header.json", header)
    check_names(folder / "header.json", header)
    records = []
    for line, d in enumerate(read_jsonl(results_path), start=1):
        rec = ResultRecord.from_dict(d, where=f"{results_path}, line {line}")
        if rec.explainer != header["explainer"]:
            raise DataFileError(
                results_path,
                line,
                "explainer",
                f"{rec.explainer!r} is not the header's explainer {header['explainer']!r}",
            )
        if rec.task not in header["suite"]:
            raise DataFileError(
                results_path, line, "task", f"{rec.task!r} is not in the header's suite"
            )
        records.append(rec)
    _check_header(folder / "header.json", header, records)
    rows = read_jsonl(rows_path)
    for line, row in enumerate(rows, start=1):
        for f in ROW_FIELDS:
            if f not in row:
                raise DataFileError(rows_path, line, f, "missing")
    check_estimates(rows_path, records, rows)
    return Entry(folder, header, records, rows)


RESEAL = ("rerun the `faithbench run` that wrote it (the same --out rewrites the entry from "
          "its results), or remove the entry folder")


def _check_hashes(folder: Path, header: dict) -> None:
    """Each file's sha256 must be the one the header recorded when it was written; an
    entry without them is refused (every faithbench that wrote schema 1 or 2 hashed)."""
    hashes = header.get("hashes")
    if not isinstance(hashes, dict):
        raise IntegrityError(folder / "header.json", f"entry {folder.name}: field 'hashes' "
                             "is missing, so nothing shows its results and rows are the ones "
                             "it was written with; unsealed entries are refused", RESEAL)
    for name in HASHED:
        if hashes.get(name) != file_hash(folder / name):
            raise IntegrityError(folder / name, "its content hash is not the one in "
                                 "header.json", "rerun the run that wrote it, or remove the "
                                 "entry folder")


def seal_of(header: dict) -> dict[str, str]:
    """{field: content hash of its value} for every header field but the seal itself."""
    return {k: content_hash({"value": v}) for k, v in sorted(header.items()) if k != "seal"}


def check_seal(path: Path, header: dict) -> dict:
    """The header as it may be shown. Schema 2: every field must be the one sealed (a
    changed, added or removed field is named); schema 1 (no seal yet): the free text
    nobody sealed (submitter, notes, the spec's citation, description and cost) is
    dropped, and the names are checked against the id by ``check_names``."""
    entry = path.parent.name
    if header["schema_version"] < 2:
        spec = {k: v for k, v in header["explainer_spec"].items()
                if k not in UNSEALED_SPEC_TEXT}
        return {**header, **{k: "" for k in UNSEALED_TEXT if k in header},
                "explainer_spec": spec}
    seal = header.get("seal")
    if not isinstance(seal, dict):
        raise IntegrityError(path, f"entry {entry}: field 'seal' is missing, and schema "
                             f"{header['schema_version']} entries are sealed; refused", RESEAL)
    now = seal_of(header)
    changed = sorted(k for k in set(now) | set(seal) if now.get(k) != seal.get(k))
    if changed:
        how = {k: "added" if k not in seal else "removed" if k not in now else "changed"
               for k in changed}
        what = ", ".join(f"{k!r} ({v})" for k, v in how.items())
        raise IntegrityError(path, f"entry {entry}: header field {what} is not the one "
                             "sealed when it was written", RESEAL)
    return header


def check_names(path: Path, header: dict) -> None:
    """What a table shows of an entry must be what its explainer id gives: the id is
    sealed twice over (the entry id hashes it, every result record names it), so a
    header naming another explainer (``explainer_name``, the spec's name or id) is a
    relabelled entry, whatever its seal says."""
    explainer, spec = header["explainer"], header["explainer_spec"]
    name = short_name(explainer)
    shown = (("explainer_name", header["explainer_name"], name),
             ("explainer_spec.name", spec.get("name", name), name),
             ("explainer_spec.id", spec.get("id", explainer), explainer))
    for field, value, want in shown:
        if value != want:
            raise IntegrityError(path, f"entry {path.parent.name}: field {field!r} is "
                                 f"{value!r} but its explainer id {explainer!r} gives "
                                 f"{want!r} (a relabelled entry)", RESEAL)


def _check_header(path: Path, header: dict, records: list[ResultRecord]) -> None:
    """The header's suite must be the one its results give, and its entry id the hash
    of its explainer and suite (as ``write_entry`` made them): an edited suite would let
    an entry be ranked beside others it was not run like."""
    fix = "rerun the run that wrote it, or remove the entry folder"
    try:
        suite = derive_suite(records)
    except InputError as exc:  # e.g. two checkpoints under one seed
        raise IntegrityError(path.with_name("results.jsonl"), str(exc), fix) from None
    if suite != header["suite"]:
        raise IntegrityError(path, "its suite is not the one its results give", fix)
    if "models" in header and header["models"] != models_of(records):
        raise IntegrityError(path, "its models (budget, gate) are not the ones its results "
                             "give", fix)
    if content_hash({"explainer": header["explainer"], "suite": header["suite"]}) \
            != header["entry_id"]:
        raise IntegrityError(path, f"its entry id {header['entry_id']} is not the hash of "
                             "its explainer and suite", fix)


def check_estimates(path: Path, results: list[ResultRecord], rows: list[dict]) -> None:
    """Every stored estimate's n and mean, recomputed from the per-example rows: the
    mean of the defined values (a corpus-level metric: its aggregation of the summed
    statistics). A record the rows do not reproduce is an IntegrityError."""
    by_unit: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        by_unit[(row["task"], row["model_seed"], row["metric"])].append(row)
    for r in results:
        mine = by_unit.get((r.task, r.model_seed, r.metric), [])
        est, agg = r.estimate, r.aggregation
        if agg is not None:
            stats = np.asarray([row.get("stats", ()) for row in mine], dtype=float)
            n = len(mine)
            mean = float(Aggregation.from_dict(agg)(stats.sum(axis=0))) if n else math.nan
        else:
            values = [row["value"] for row in mine if row["value"] is not None]
            n, mean = len(values), math.fsum(values) / len(values) if values else math.nan
        if n != est.n or not math.isclose(mean, est.mean, rel_tol=1e-9, abs_tol=1e-12):
            raise IntegrityError(path, f"its rows of {r.task}, seed {r.model_seed}, "
                                 f"{r.metric} give n = {n}, mean = {mean!r}; the result "
                                 f"stored n = {est.n}, mean = {est.mean!r}",
                                 "rerun the run that wrote it, or remove the entry folder")


def _read_header(path: Path) -> dict:
    try:
        header = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFileError(path, exc.lineno, None, f"not valid JSON ({exc.msg})") from None
    if not isinstance(header, dict):
        raise DataFileError(path, None, None, "not a JSON object")
    for f in HEADER_FIELDS:
        if f not in header:
            raise DataFileError(path, None, f, "missing from entry header")
    if header["schema_version"] not in READABLE_SCHEMAS:
        raise DataFileError(
            path, None, "schema_version", f"unsupported version {header['schema_version']!r}"
        )
    if header["entry_id"] != path.parent.name:
        raise DataFileError(
            path,
            None,
            "entry_id",
            f"{header['entry_id']!r} does not match the folder name {path.parent.name!r}",
        )
    if not isinstance(header["suite"], dict) or not header["suite"]:
        raise DataFileError(path, None, "suite", "must map task ids to their suite")
    for task, s in header["suite"].items():
        for f in SUITE_FIELDS:
            if not isinstance(s, dict) or f not in s:
                raise DataFileError(path, None, f"suite.{task}.{f}", "missing from entry header")
        if len(s["model_seeds"]) != len(s["checkpoints"]):
            raise DataFileError(
                path, None, f"suite.{task}.checkpoints", "needs one checkpoint per model seed"
            )
    return header


# --- finding and matching -------------------------------------------------------------------


def find_entry(root, ref: str) -> Entry:
    """The entry ``ref`` names: an entry id, a unique id prefix, an explainer id or name.

    ``root`` is an entries folder or a list of entries already read.
    """
    entries = root if isinstance(root, list) else read_entries(root)
    found = matching_entries(entries, ref, root)
    if len(found) > 1:
        raise InputError(f"{ref!r} matches {len(found)} entries; give an entry id or a "
                         f"unique prefix:\n{_listing(found)}")
    return found[0]


def matching_entries(entries: list[Entry], ref: str, root=None) -> list[Entry]:
    """Every entry ``ref`` names, by the first rule that names any: the entry id, the
    explainer id, the explainer name, an id prefix. None: an UnknownNameError with
    close names (``root``, where given, is named in it)."""
    if not ref:
        raise InputError("an empty entry reference matches nothing")
    tiers = (
        [e for e in entries if e.entry_id == ref],
        [e for e in entries if e.explainer == ref],
        [e for e in entries if e.name == ref],
        [e for e in entries if e.entry_id.startswith(ref)],
    )
    for found in tiers:
        if found:
            return found
    names = sorted({e.explainer for e in entries} | {e.name for e in entries})
    close = difflib.get_close_matches(ref, names, n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    where = "" if root is None or isinstance(root, list) else f" in {root}"
    known = _listing(entries) if entries else "  (no entries)"
    raise UnknownNameError(f"no leaderboard entry matches {ref!r}{where}{hint}\n{known}")


def _listing(entries: list[Entry]) -> str:
    return "\n".join(
        f"  {e.entry_id}  {e.explainer}  tasks: {', '.join(sorted(e.suite))}" for e in entries
    )
