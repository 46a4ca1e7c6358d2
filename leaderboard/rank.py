"""Rank entries per (task, metric), best first, computed when asked and never stored.

Each ranking holds one metric, so one family: faithfulness and plausibility scores
never share a ranking. Equal means share a rank (1, 1, 3). An entry whose confidence
interval overlaps that of the entry listed just above it is marked
(``overlaps_above``). That is a reading aid, not a test: whether two entries differ is
``faithbench.leaderboard.compare`` (a paired sign-flip test on the same examples, Holm-corrected).

With one model seed a row is the stored estimate. With several, the row's mean and CI
come from ``faithbench.benchmark.core.stats.seed_estimate`` over the (seeds x examples) matrix of
the examples defined under every seed: a t over the seed means (S - 1 df) plus the
example variance, so the CI also covers retraining the model (a bootstrap over 3 seeds
cannot). A corpus-level metric (a record with an ``aggregation``) gets the same
interval from its per-example statistics (``corpus_estimate``), around the mean of the
per-seed corpus values. ``ci_method`` names the interval; ``seed_sd``, ``seed_min`` and
``seed_max`` describe the per-seed means. ``undefined`` counts the examples left out
because the metric is undefined on them (NaN, e.g. ``taucorr_loo`` on a constant score
vector) under some seed; n counts the rest.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.benchmark.core.ids import short_name
from faithbench.benchmark.core.names import DIRECTIONS, FAMILIES
from faithbench.benchmark.core.records import ResultRecord
from faithbench.benchmark.core.stats import (
    Aggregation,
    corpus_estimate,
    seed_estimate,
)
from faithbench.leaderboard.entry import Entry
from faithbench.leaderboard.rows import Ranked
from faithbench.leaderboard.suite import by_suite, suite_labels

V = TypeVar("V")  # a per-example value: a float, or a corpus metric's statistics


def matches(canonical: str, query: str | None) -> bool:
    """``query`` is None, the canonical id itself, or its short name.

    >>> matches("sufficiency[bins=0.1]@1", "sufficiency"), matches("aer@1", "sufficiency")
    (True, False)
    """
    return query is None or query == canonical or query == short_name(canonical)


def rank(
    entries: list[Entry],
    *,
    task: str | None = None,
    metric: str | None = None,
    family: str | None = None,
) -> list[Ranked]:
    """One row per (task, metric, entry), grouped by (family, task, metric), best first.

    ``task`` and ``metric`` are canonical ids or short names; ``family`` is
    "faithfulness" or "plausibility".
    """
    if family is not None and family not in FAMILIES:
        raise InputError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    groups: dict[tuple[str, str], list[tuple[Entry, list[ResultRecord]]]] = defaultdict(list)
    for e in entries:
        mine: dict[tuple[str, str], list[ResultRecord]] = defaultdict(list)
        for r in e.results:
            if (
                matches(r.task, task)
                and matches(r.metric, metric)
                and (family is None or r.family == family)
            ):
                mine[(r.task, r.metric)].append(r)
        for key, recs in mine.items():
            groups[key].append((e, sorted(recs, key=lambda r: r.model_seed)))
    if not groups:
        _nothing_matched(entries, task, metric, family)
    ranked = []
    for (t, m), members in groups.items():
        fam, direction = _group_meta(t, m, members)
        recs_of = {e.entry_id: recs for e, recs in members}
        suites = by_suite([e for e, _ in members], t)
        for position, (group, label) in enumerate(zip(suites, suite_labels(suites, t))):
            scored = [_score(e, t, m, recs_of[e.entry_id]) for e in group]
            ranked.append(((FAMILIES.index(fam), t, position, m),
                           _order(scored, t, m, fam, direction, label)))
    return [row for _, rows in sorted(ranked, key=lambda g: g[0]) for row in rows]


def _group_meta(task: str, metric: str, members) -> tuple[str, str]:
    seen = {(r.family, r.direction) for _, recs in members for r in recs}
    if len(seen) > 1:
        raise InputError(
            f"results for task {task!r}, metric {metric!r} disagree on family or "
            f"direction: {sorted(seen)} (entries: "
            f"{', '.join(e.label for e, _ in members)})"
        )
    fam, direction = next(iter(seen))
    if fam not in FAMILIES or direction not in DIRECTIONS:
        raise InputError(
            f"metric {metric!r} on task {task!r} has family {fam!r} and "
            f"direction {direction!r}; expected one of {FAMILIES} and {DIRECTIONS}"
        )
    return fam, direction


def seed_matrix(
    values: Mapping[tuple[int, str], V], seeds: list[int]
) -> tuple[list[str], list[list[V]]]:
    """(example ids, (S, N) values): the ids scored under every one of ``seeds``, sorted;
    row s holds seed ``seeds[s]``.

    >>> seed_matrix({(0, "a"): 1.0, (1, "a"): 3.0, (0, "b"): 5.0, (1, "c"): 2.0}, [0, 1])
    (['a'], [[1.0], [3.0]])
    """
    per_seed: dict[int, set[str]] = defaultdict(set)
    for seed, example in values:
        per_seed[seed].add(example)
    ids = sorted(set.intersection(*(per_seed[s] for s in seeds))) if seeds else []
    return ids, [[values[(s, i)] for i in ids] for s in seeds]


def scored_count(recs: list[ResultRecord]) -> int:
    """How many examples the records scored, defined or not (the most of any seed);
    old records without ``undefined`` defined every example they scored."""
    return max(r.estimate.n + r.estimate.undefined for r in recs)


def _score(e: Entry, task: str, metric: str, recs: list[ResultRecord]) -> dict:
    seeds = [r.model_seed for r in recs]
    est = recs[0].estimate
    confidence = est.confidence
    corpus = recs[0].aggregation
    source: Mapping[tuple[int, str], Any] = (
        e.stats(task, metric) if corpus is not None else e.values(task, metric))
    if len(recs) == 1:  # the rows in the order they were scored: the stored bootstrap's
        ids = [i for (s, i) in source if s == seeds[0]]
        matrix = [[source[(seeds[0], i)] for i in ids]]
    else:
        ids, matrix = seed_matrix(source, seeds)
    # recomputed from the rows, never read from the record (whose n and mean are
    # checked against the rows when the entry is read)
    if not ids:
        raise DataFileError(
            e.path / "per_example.jsonl",
            None,
            None,
            f"no example has values under every model seed {seeds} for "
            f"task {task!r}, metric {metric!r}",
        )
    if corpus is not None:  # (S, N, K) statistics, linearized
        b = corpus_estimate(matrix, Aggregation.from_dict(corpus), **est.settings())
    else:
        b = seed_estimate(matrix, **est.settings())
    mean, lo, hi, n, method = b.mean, b.ci_low, b.ci_high, b.n, b.method
    spread = {
        "n_seeds": b.n_seeds,
        "seed_sd": b.seed_sd,
        "seed_min": b.seed_min,
        "seed_max": b.seed_max,
    }
    return {
        "entry_id": e.entry_id,
        "explainer": e.explainer,
        "explainer_name": e.name,
        "mean": float(mean),
        "ci_low": float(lo),
        "ci_high": float(hi),
        "ci_method": method,
        "n": int(n),
        "undefined": scored_count(recs) - int(n),
        "confidence": float(confidence),
        "model_seeds": seeds,
        **spread,
    }


def _order(scored: list[dict], task: str, metric: str, fam: str, direction: str,
           suite: str) -> list[Ranked]:
    sign = 1.0 if direction == "lower" else -1.0
    order = sorted(scored, key=lambda s: (sign * s["mean"], s["explainer"], s["entry_id"]))
    rows, prev, current = [], None, 0
    for position, s in enumerate(order, start=1):
        tied = prev is not None and math.isclose(
            s["mean"], prev["mean"], rel_tol=1e-12, abs_tol=1e-12
        )
        current = current if tied else position
        overlaps = (
            prev is not None and s["ci_low"] <= prev["ci_high"] and prev["ci_low"] <= s["ci_high"]
        )
        rows.append(Ranked(task=task, suite=suite, family=fam, metric=metric,
                           metric_name=short_name(metric), direction=direction, rank=current,
                           overlaps_above=overlaps, **s))
        prev = s
    return rows


def _nothing_matched(entries: list[Entry], task, metric, family) -> None:
    if not entries:
        raise InputError("no leaderboard entries to rank")
    tasks = sorted({r.task for e in entries for r in e.results})
    metrics = sorted({r.metric for e in entries for r in e.results})
    asked = ", ".join(
        f"{k}={v!r}"
        for k, v in (("task", task), ("metric", metric), ("family", family))
        if v is not None
    )
    raise InputError(
        f"no results match {asked}; tasks: {', '.join(tasks)}; metrics: {', '.join(metrics)}"
    )


@dataclass(frozen=True)
class Matrix:
    """One task's explainers x metrics, ranked and ordered, ready to print."""

    task: str
    suite: str  # the suite in words (``Ranked.suite``)
    metrics: list[str]  # column ids, faithfulness first (or as asked)
    order: list[str]  # entry ids, best first by ``sort_key``, then the rest by name
    cells: dict[tuple[str, str], Ranked]  # (entry id, metric id) -> its ranked row
    explainers: dict[str, str]  # entry id -> explainer id
    direction: dict[str, str]  # metric id -> higher | lower
    sort_key: str
    rows: list[Ranked]


def matrix(entries: list[Entry], task: str, *, family: str | None = None,
           sort_by: str | None = None, metrics: list[str] | None = None,
           prefer: str | None = None) -> Matrix:
    """The task's one explainers x metrics table (``matrices``); an InputError where
    the task's entries were scored on several suites."""
    found = matrices(entries, task, family=family, sort_by=sort_by, metrics=metrics,
                     prefer=prefer)
    if len(found) > 1:
        raise InputError(f"task {task!r} has entries on {len(found)} suites: "
                         + "; ".join(m.suite for m in found))
    return found[0]


def matrices(entries: list[Entry], task: str, *, family: str | None = None,
             sort_by: str | None = None, metrics: list[str] | None = None,
             prefer: str | None = None) -> list[Matrix]:
    """Select and order a task's explainers x metrics, one table per suite. Rows are
    sorted by ``sort_by`` (a metric name or id that must match one column), else by
    ``prefer`` where it matches one column, else by the first column. ``metrics``
    (canonical ids or short names) picks the columns, in that order."""
    return matrices_of_rows(rank(entries, task=task, family=family), task, sort_by=sort_by,
                            metrics=metrics, prefer=prefer)


def matrices_of_rows(every: list[Ranked], task: str, *, sort_by: str | None = None,
                     metrics: list[str] | None = None, prefer: str | None = None
                     ) -> list[Matrix]:
    """``matrices`` of rows already ranked (``rank``'s, or a published release's)."""
    every = [r for r in every if matches(r.task, task)]
    if not every:
        raise InputError(f"no results for task {task!r}")
    tasks = sorted({r.task for r in every})
    if len(tasks) > 1:
        raise InputError(f"task {task!r} matches {', '.join(tasks)}; give the full task id")
    suites = list(dict.fromkeys(r.suite for r in every))
    return [_one_matrix([r for r in every if r.suite == suite], tasks[0], suite, sort_by,
                        metrics, prefer) for suite in suites]


def _one_matrix(rows: list[Ranked], task: str, suite: str, sort_by, metrics, prefer) -> Matrix:
    present = [m for _, m in sorted({(FAMILIES.index(r.family), r.metric) for r in rows})]
    columns = present
    if metrics:
        columns = []
        for query in metrics:
            hits = [m for m in present if matches(m, query) and m not in columns]
            if not hits:
                raise InputError(f"metric {query!r} matches none of {task}'s results: "
                                 f"{', '.join(present)}")
            columns += hits
        rows = [r for r in rows if r.metric in columns]
    # ``prefer``: a metric id (the default parameters; of any version, so a release
    # scored before a version bump sorts alike), or a name that names one column
    unversioned = None if prefer is None else prefer.rpartition("@")[0] or prefer
    preferred = ([m for m in columns if m == prefer]
                 or [m for m in columns if m.rpartition("@")[0] == unversioned]
                 or [m for m in columns if prefer is not None and matches(m, prefer)])
    key = preferred[0] if len(preferred) == 1 else columns[0]
    if sort_by is not None:  # the column itself, else the one column of that name
        named = ([m for m in columns if m == sort_by]
                 or [m for m in columns if matches(m, sort_by) or matches(m, short_name(sort_by))])
        if len(named) != 1:
            raise InputError(f"sort_by {sort_by!r} matches {len(named)} of the metrics of "
                             f"{task}: {', '.join(columns)}")
        key = named[0]
    explainers = {r.entry_id: r.explainer for r in rows}
    order = [r.entry_id for r in rows if r.metric == key]
    order += sorted(explainers.keys() - set(order), key=lambda e: (explainers[e], e))
    return Matrix(task=task, suite=suite, metrics=columns, order=order,
                  cells={(r.entry_id, r.metric): r for r in rows}, explainers=explainers,
                  direction={r.metric: r.direction for r in rows}, sort_key=key, rows=rows)
