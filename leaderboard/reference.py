"""A release's reference entries in full: every result record and per-example value of
the suites whose models the release ships, so ``submit --published`` ranks a plugin
among them, with paired tests on the same examples and model seeds, without running
the references again.

Layout, under the release folder (no file over 1 MiB)::

    reference/<entry id>/header.json          the entry's header (hashes left out)
    reference/<entry id>/results.jsonl.gz     its result records, as the run wrote them
    reference/<entry id>/<task>-seed<k>.npz   per task and model seed: ``ids`` (N,),
        ``metrics`` (M,), ``values`` (M, N) float64 (NaN: undefined or not scored),
        ``present`` (M, N) bool (a row exists), and ``stats<j>`` (N, K) for each
        corpus-level metric j

The per-example curves are left out (the release's curves file keeps their summary).
The manifest holds each file's sha256; ``read_reference`` checks them, rebuilds each
entry from records and values (every stored mean recomputed from the rows), and its
id must be the one the header names: the hash of its explainer and suite.

``on_examples`` restricts an entry to some of its examples (a ``--sample`` of the
split), with the estimates recomputed and the suite saying how they were chosen, so it
ranks beside a plugin scored on the same sample.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from faithbench.benchmark.core.errors import IntegrityError
from faithbench.benchmark.core.files import file_hash
from faithbench.benchmark.core.records import ResultRecord
from faithbench.benchmark.core.stats import Aggregation, bootstrap, corpus_bootstrap
from faithbench.leaderboard.entry import Entry, checked

FOLDER = "reference"
SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def task_slug(task: str) -> str:
    """A task id as a file name.

    >>> task_slug("sentiment[model=transformer]@1")
    'sentiment_model_transformer_1'
    """
    return SLUG.sub("_", task).strip("_")


def write_reference(entries: list[Entry], out: Path) -> dict[str, str]:
    """Write ``entries`` in full under ``out/reference``; {relative path: sha256}."""
    files: dict[str, str] = {}
    for e in entries:
        folder = out / FOLDER / e.entry_id
        folder.mkdir(parents=True, exist_ok=True)
        header = {k: v for k, v in e.header.items() if k != "hashes"}
        _write(folder / "header.json", json.dumps(header, indent=1, sort_keys=True,
                                                  ensure_ascii=False).encode(), files, out)
        lines = "".join(json.dumps(r.as_dict(), sort_keys=True, ensure_ascii=False) + "\n"
                        for r in e.results)
        _write(folder / "results.jsonl.gz", gzip.compress(lines.encode(), mtime=0), files, out)
        for task, seed in sorted({(r.task, r.model_seed) for r in e.results}):
            buf = io.BytesIO()
            np.savez_compressed(buf, **_arrays(e, task, seed))
            _write(folder / f"{task_slug(task)}-seed{seed}.npz", buf.getvalue(), files, out)
    return files


def _write(path: Path, data: bytes, files: dict[str, str], out: Path) -> None:
    path.write_bytes(data)
    files[path.relative_to(out).as_posix()] = file_hash(path)


def _arrays(e: Entry, task: str, seed: int) -> dict[str, Any]:
    """One (task, seed) of an entry as arrays (the module docstring's layout)."""
    records = sorted((r for r in e.results if (r.task, r.model_seed) == (task, seed)),
                     key=lambda r: r.metric)
    metrics = [r.metric for r in records]
    rows = [row for row in e.per_example if (row["task"], row["model_seed"]) == (task, seed)]
    ids = list(dict.fromkeys(str(row["id"]) for row in rows))
    at = {i: n for n, i in enumerate(ids)}
    values = np.full((len(metrics), len(ids)), np.nan)
    present = np.zeros((len(metrics), len(ids)), dtype=bool)
    out: dict[str, np.ndarray] = {}
    for j, r in enumerate(records):
        stats = None
        if r.aggregation is not None:
            stats = np.full((len(ids), len(r.aggregation["stats"])), np.nan)
            out[f"stats{j}"] = stats
        for row in rows:
            if row["metric"] != r.metric:
                continue
            n = at[str(row["id"])]
            present[j, n] = True
            if row["value"] is not None:
                values[j, n] = row["value"]
            if stats is not None:
                stats[n] = row["stats"]
    return {"ids": np.array(ids, dtype=str), "metrics": np.array(metrics, dtype=str),
            "values": values, "present": present, **out}


def read_reference(release: Path, files: dict[str, str], only: set[str] | None = None
                   ) -> list[Entry]:
    """The release's reference entries (``only``: those of these entry ids), each file
    checked against its sha256 in ``files`` (the manifest's) and each entry rebuilt and
    checked (module docstring)."""
    files = {n: d for n, d in files.items() if only is None or n.split("/")[1] in only}
    for name, digest in files.items():
        path = release / name
        if not path.is_file() or file_hash(path) != digest:
            raise IntegrityError(path, "missing, or not the file the release's manifest "
                                 "hashed", "check the release out again")
    ids = sorted({name.split("/")[1] for name in files if name.startswith(f"{FOLDER}/")})
    return [_entry(release / FOLDER / i) for i in ids]


def _entry(folder: Path) -> Entry:
    header = json.loads((folder / "header.json").read_text(encoding="utf-8"))
    text = gzip.decompress((folder / "results.jsonl.gz").read_bytes()).decode("utf-8")
    records = [ResultRecord.from_dict(json.loads(line), where=f"{folder}/results.jsonl.gz, "
                                      f"line {i}")
               for i, line in enumerate(text.splitlines(), start=1)]
    rows: list[dict] = []
    for task, seed in sorted({(r.task, r.model_seed) for r in records}):
        with np.load(folder / f"{task_slug(task)}-seed{seed}.npz", allow_pickle=False) as z:
            rows += _rows(task, seed, dict(z))
    records, rows, rebuilt = checked(records, rows, header["explainer_spec"],
                                     notes=header.get("notes", ""),
                                     submitter=header.get("submitter", ""))
    if rebuilt["entry_id"] != header["entry_id"]:
        raise IntegrityError(folder, f"its records give entry {rebuilt['entry_id']}, not the "
                             f"{header['entry_id']} its header names", "check the release "
                             "out again")
    return Entry(folder, {**rebuilt, "created_at": header.get("created_at")}, records, rows)


def _rows(task: str, seed: int, z: dict) -> list[dict]:
    rows = []
    for j, metric in enumerate(z["metrics"].tolist()):
        stats = z.get(f"stats{j}")
        for n, example in enumerate(z["ids"].tolist()):
            if not z["present"][j, n]:
                continue
            value = float(z["values"][j, n])
            row = {"task": task, "model_seed": seed, "metric": metric, "id": example,
                   "value": None if math.isnan(value) else value}
            if stats is not None:
                row["stats"] = [float(x) for x in stats[n]]
            rows.append(row)
    return rows


def on_examples(entry: Entry, task: str, ids: set[str], run: dict) -> Entry:
    """``entry``'s task ``task`` on the examples ``ids`` only: its rows there, each
    record's n and mean recomputed (with a bootstrap CI as a run would give: rankings
    recompute theirs from the rows; examples a per-example metric left undefined are not
    counted, having no row), and its run options set to ``run``'s selection
    (``limit``, ``sample``, ``sample_seed``), so its suite says how the examples were
    chosen, as the plugin's entry on the same sample does."""
    rows = [r for r in entry.per_example if r["task"] == task and str(r["id"]) in ids]
    records = []
    for rec in (r for r in entry.results if r.task == task):
        mine = [r for r in rows if (r["model_seed"], r["metric"]) == (rec.model_seed, rec.metric)]
        options = {**(rec.provenance.run_options() or {}),
                   **{k: run.get(k) for k in ("limit", "sample", "sample_seed")}}
        config = {**(rec.provenance.config or {}), "run": options}
        records.append(replace(rec, estimate=_estimate(rec, mine),
                               provenance=replace(rec.provenance, config=config)))
    records, rows, header = checked(records, rows, entry.header["explainer_spec"],
                                    notes=entry.header.get("notes", ""))
    return Entry(entry.path, header, records, rows)


def _estimate(rec: ResultRecord, rows: list[dict]):
    """The record's estimate on ``rows``: the mean (or aggregation) and a bootstrap CI,
    with the record's settings."""
    settings = rec.estimate.settings()
    if rec.aggregation is not None:
        est = corpus_bootstrap([r["stats"] for r in rows],
                               Aggregation.from_dict(rec.aggregation), **settings)
        return replace(rec.estimate, mean=est.mean, ci_low=est.ci_low, ci_high=est.ci_high,
                       n=est.n, undefined=0)
    # a per-example metric writes no row where it is undefined, so which of ``ids``
    # it left undefined is not known here: none is counted
    values = [r["value"] for r in rows]
    est = bootstrap(values, **settings)
    return replace(rec.estimate, mean=math.fsum(values) / len(values), ci_low=est.ci_low,
                   ci_high=est.ci_high, n=len(values), undefined=0)
