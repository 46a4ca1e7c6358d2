"""Text views of rankings and comparisons: terminal table, Markdown, CSV.

Tables show numbers to 3 decimals, as "mean [low, high]" with n beside them; CSV keeps
full precision in separate columns, so it reads back to the same numbers.
"""

from __future__ import annotations

import csv
import io
from collections import Counter

from tabulate import tabulate

from benchmark.core.errors import InputError
from leaderboard.entry import Entry
from leaderboard.rank import FAMILIES, matches, rank
from leaderboard.suite import short_name

FORMATS = ("table", "markdown", "csv")
ARROWS = {"higher": "↑", "lower": "↓", "none": "·"}
MISSING = "—"
OVERLAP = "≈"


def num(x: float) -> str:
    """Three decimals, without a sign on zero.

    >>> num(0.41249), num(-0.0001), num(2)
    ('0.412', '0.000', '2.000')
    """
    s = f"{x:.3f}"
    return "0.000" if s == "-0.000" else s


def cell(mean: float, low: float, high: float) -> str:
    """>>> cell(0.5, 0.4, 0.6)
    '0.500 [0.400, 0.600]'
    """
    return f"{num(mean)} [{num(low)}, {num(high)}]"


def render_leaderboard(rows: list[dict], fmt: str = "table") -> str:
    """Rows from ``rank`` as one table, grouped by family, task and metric."""
    _check_fmt(fmt)
    if fmt == "csv":
        cols = [
            "task",
            "family",
            "metric",
            "direction",
            "rank",
            "overlaps_above",
            "entry_id",
            "explainer",
            "mean",
            "ci_low",
            "ci_high",
            "n",
            "confidence",
        ]
        body = [
            [
                r["task"],
                r["family"],
                r["metric"],
                r["direction"],
                r["rank"],
                OVERLAP if r["overlaps_above"] else "",
                r["entry_id"],
                r["explainer"],
                r["mean"],
                r["ci_low"],
                r["ci_high"],
                r["n"],
                r["confidence"],
            ]
            for r in rows
        ]
        return _csv(cols, body)
    labels = _metric_labels([r["metric"] for r in rows])
    headers = ["task", "family", "metric", "rank", "explainer", f"mean [{_ci(rows)}]", "n"]
    body = [
        [
            r["task"],
            r["family"],
            f"{labels[r['metric']]} {ARROWS[r['direction']]}",
            f"{r['rank']} {OVERLAP}" if r["overlaps_above"] else str(r["rank"]),
            r["explainer"],
            cell(r["mean"], r["ci_low"], r["ci_high"]),
            str(r["n"]),
        ]
        for r in rows
    ]
    notes = []
    if any(r["overlaps_above"] for r in rows):
        notes.append(
            f"{OVERLAP}: the CI overlaps the one of the entry listed above it, so "
            "their order is not significant."
        )
    return _text(headers, body, fmt, "lllrllr", notes)


def render_matrix(
    entries: list[Entry],
    task: str,
    fmt: str = "table",
    *,
    family: str | None = None,
    sort_by: str | None = None,
) -> str:
    """Explainers as rows, the task's metrics as columns, sorted by ``sort_by``
    (a metric name or id; default the first column: faithfulness metrics first)."""
    _check_fmt(fmt)
    rows = rank(entries, task=task, family=family)
    tasks = sorted({r["task"] for r in rows})
    if len(tasks) > 1:
        raise InputError(f"task {task!r} matches {', '.join(tasks)}; give the full task id")
    metrics = sorted({(FAMILIES.index(r["family"]), r["metric"]) for r in rows})
    metrics = [m for _, m in metrics]
    direction = {r["metric"]: r["direction"] for r in rows}
    if sort_by is None:
        key = metrics[0]
    else:
        found = [m for m in metrics if matches(m, sort_by)]
        if len(found) != 1:
            raise InputError(
                f"sort_by {sort_by!r} matches {len(found)} of the metrics of "
                f"{tasks[0]}: {', '.join(metrics)}"
            )
        key = found[0]
    cells = {(r["entry_id"], r["metric"]): r for r in rows}
    ranked = [r for r in rows if r["metric"] == key]
    info = {r["entry_id"]: r for r in rows}
    order = [r["entry_id"] for r in ranked]
    order += sorted(info.keys() - set(order), key=lambda e: (info[e]["explainer"], e))
    if fmt == "csv":
        cols = ["explainer", "entry_id"] + [
            f"{m} {c}" for m in metrics for c in ("mean", "ci_low", "ci_high", "n")
        ]
        body = []
        for e in order:
            line = [info[e]["explainer"], e]
            for m in metrics:
                r = cells.get((e, m))
                line += [r["mean"], r["ci_low"], r["ci_high"], r["n"]] if r else ["", "", "", ""]
            body.append(line)
        return _csv(cols, body)
    labels = _metric_labels(metrics)
    heads = {m: f"{labels[m]} {ARROWS[direction[m]]}" for m in metrics}
    body = []
    for e in order:
        ns = sorted({cells[(e, m)]["n"] for m in metrics if (e, m) in cells})
        n = str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"
        body.append(
            [info[e]["explainer"], n]
            + [
                cell(cells[(e, m)]["mean"], cells[(e, m)]["ci_low"], cells[(e, m)]["ci_high"])
                if (e, m) in cells
                else MISSING
                for m in metrics
            ]
        )
    note = f"{tasks[0]}; sorted by {heads[key]}; cells: mean [{_ci(rows)}]"
    return _text(
        ["explainer", "n"] + [heads[m] for m in metrics],
        body,
        fmt,
        "lr" + "r" * len(metrics),
        [note],
    )


def render_comparison(rows: list[dict], fmt: str = "table") -> str:
    """Rows from ``compare``: means of A and B on the shared examples, A − B with CI, p."""
    _check_fmt(fmt)
    if fmt == "csv":
        cols = [
            "task",
            "family",
            "metric",
            "direction",
            "a",
            "b",
            "a_entry",
            "b_entry",
            "n",
            "mean_a",
            "mean_b",
            "diff",
            "ci_low",
            "ci_high",
            "p_value",
            "better",
        ]
        return _csv(cols, [[r[c] for c in cols] for r in rows])
    labels = _metric_labels([r["metric"] for r in rows])
    headers = ["task", "metric", "n", "A", "B", f"A − B [{_ci(rows)}]", "p", "better"]
    body = [
        [
            r["task"],
            f"{labels[r['metric']]} {ARROWS[r['direction']]}",
            str(r["n"]),
            num(r["mean_a"]),
            num(r["mean_b"]),
            cell(r["diff"], r["ci_low"], r["ci_high"]),
            p_value(r["p_value"]),
            r["better"],
        ]
        for r in rows
    ]
    pairs = sorted({(r["a"], r["a_entry"], r["b"], r["b_entry"]) for r in rows})
    notes = [f"A = {a} (entry {ae}); B = {b} (entry {be})" for a, ae, b, be in pairs]
    return _text(headers, body, fmt, "llrrrrrl", notes)


def p_value(p: float) -> str:
    """>>> p_value(0.0004998), p_value(0.5)
    ('<0.001', '0.500')
    """
    return "<0.001" if p < 0.001 else num(p)


def _check_fmt(fmt: str) -> None:
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def _metric_labels(metric_ids: list[str]) -> dict[str, str]:
    """Short names where they are unique among the shown metrics, full ids otherwise."""
    unique = set(metric_ids)
    counts = Counter(short_name(m) for m in unique)
    return {m: short_name(m) if counts[short_name(m)] == 1 else m for m in unique}


def _ci(rows: list[dict]) -> str:
    levels = {round(r["confidence"] * 100, 6) for r in rows}
    return f"{levels.pop():g}% CI" if len(levels) == 1 else "CI"


def _text(headers: list[str], body: list[list[str]], fmt: str, align: str, notes: list[str]) -> str:
    align_names = {"l": "left", "r": "right"}
    table = tabulate(
        body,
        headers=headers,
        tablefmt="github" if fmt == "markdown" else "simple",
        disable_numparse=True,
        colalign=[align_names[a] for a in align],
    )
    return "\n\n".join([table, *notes]) + "\n"


def _csv(cols: list[str], body: list[list]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(cols)
    writer.writerows(body)
    return buf.getvalue()
