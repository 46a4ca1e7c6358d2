"""Text views of rankings and comparisons: terminal table, Markdown, CSV, LaTeX
(``faithbench.leaderboard.latex``) and JSON.

Tables show numbers to 3 decimals, as "mean [low, high]" with n beside them, and with
several model seeds "mean [low, high] s min–max", the range of the per-seed means.
Where the metric is undefined on some examples (NaN, left out of n and the mean), n
reads "n (+k undefined)". CSV keeps full precision in separate columns, so it reads
back to the same numbers. Every table ends with notes that say how its intervals and
p-values were computed, and that CI overlap on a leaderboard is no significance test.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from tabulate import tabulate

from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.ids import distinct_labels, short_name
from faithbench.leaderboard import latex
from faithbench.leaderboard.cost import COLUMNS as COST_COLUMNS
from faithbench.leaderboard.cost import HEADERS as COST_HEADERS
from faithbench.leaderboard.cost import NOTE as COST_NOTE
from faithbench.leaderboard.cost import (
    RUN_COLUMNS,
    RUN_HEADERS,
    RUN_NOTE,
    UNKNOWN,
    ExplainCost,
    RunCost,
)
from faithbench.leaderboard.entry import Entry
from faithbench.leaderboard.rank import Matrix, matrices, matrices_of_rows
from faithbench.leaderboard.rows import Compared, Ranked

FORMATS = ("table", "markdown", "csv", "latex", "json")
MARKDOWN = ("github", "pipe")  # the tabulate formats of Markdown tables
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


OVERLAP_IS_NO_TEST = (
    "Overlap or separation of the CIs of adjacent rows is not a significance test; "
    "use `faithbench compare A B` (paired sign-flip test, Holm-corrected)."
)
SEED_COLS = ("n_seeds", "seed_sd", "seed_min", "seed_max")
MATRIX_COLS = ("mean", "ci_low", "ci_high", "n", "undefined", *SEED_COLS)
UNDEFINED_NOTE = ("+k undefined: k examples left out of n and the mean, where the metric "
                  "is undefined (NaN, e.g. a constant score vector) under some seed or "
                  "for either entry.")


def n_cell(row: Ranked | Compared) -> str:
    """n, and the examples left out as undefined where there are any.

    >>> from types import SimpleNamespace as Row
    >>> n_cell(Row(n=198, undefined=2)), n_cell(Row(n=200, undefined=0))
    ('198 (+2 undefined)', '200')
    """
    k = row.undefined
    return f"{row.n} (+{k} undefined)" if k else str(row.n)


def undefined_note(rows: Sequence[Ranked | Compared]) -> list[str]:
    return [UNDEFINED_NOTE] if any(r.undefined for r in rows) else []


def cell(mean: float, low: float, high: float) -> str:
    """>>> cell(0.5, 0.4, 0.6)
    '0.500 [0.400, 0.600]'
    """
    return f"{num(mean)} [{num(low)}, {num(high)}]"


def seed_cell(row: Ranked) -> str:
    """A ranked row's cell; with several seeds, the range of the per-seed means after "s".

    >>> from types import SimpleNamespace as Row
    >>> seed_cell(Row(mean=0.524, ci_low=0.508, ci_high=0.539, n_seeds=3, seed_min=0.5112,
    ...               seed_max=0.5306))
    '0.524 [0.508, 0.539] s 0.511–0.531'
    """
    text = cell(row.mean, row.ci_low, row.ci_high)
    if row.n_seeds > 1:
        text += f" s {num(row.seed_min)}–{num(row.seed_max)}"
    return text


def seed_note(rows: Sequence[Ranked]) -> list[str]:
    """The note that explains the seed range and how the CIs with several seeds were
    computed (each row's ``ci_method``), where some row has several seeds.

    >>> from types import SimpleNamespace as Row
    >>> print(*seed_note([Row(n_seeds=3, ci_method="t over seed means (S-1 df) + "
    ...                       "example variance"), Row(n_seeds=1)]))
    CI with several seeds: t over seed means (S-1 df) + example variance; \
s: range of the per-seed means over 3 seeds
    >>> seed_note([Row(n_seeds=1)])
    []
    """
    seeded = [r for r in rows if r.n_seeds > 1]
    if not seeded:
        return []
    counts = sorted({r.n_seeds for r in seeded})
    over = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    methods = "; ".join(sorted({r.ci_method for r in seeded}))
    return [f"CI with several seeds: {methods}; s: range of the per-seed means over {over} seeds"]


def render_leaderboard(rows: list[Ranked], fmt: str = "table",
                       cost: Mapping[tuple[str, str], ExplainCost] | None = None) -> str:
    """Rows from ``rank`` as one table, grouped by family, task and metric; with ``cost``
    (``leaderboard.cost.explain_costs``), each row's explainer cost per example beside it."""
    _check_fmt(fmt)
    costs = None if cost is None else [cost.get((r.entry_id, r.task), UNKNOWN) for r in rows]
    if fmt == "csv":
        cols = [
            "task",
            "suite",
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
            "ci_method",
            "n",
            "undefined",
            "confidence",
            *SEED_COLS,
        ]
        body = [
            [
                r.task,
                r.suite,
                r.family,
                r.metric,
                r.direction,
                r.rank,
                OVERLAP if r.overlaps_above else "",
                r.entry_id,
                r.explainer,
                r.mean,
                r.ci_low,
                r.ci_high,
                r.ci_method,
                r.n,
                r.undefined,
                r.confidence,
                *(getattr(r, c) for c in SEED_COLS),
            ]
            for r in rows
        ]
        if costs is not None:
            cols += COST_COLUMNS
            body = [line + c.values() for line, c in zip(body, costs)]
        return _csv(cols, body)
    if fmt == "json":
        extra = [{}] * len(rows) if costs is None else [
            dict(zip(COST_COLUMNS, c.values())) for c in costs]
        return _json([{**r.as_dict(), **more} for r, more in zip(rows, extra)])
    labels = _metric_labels([r.metric for r in rows], fmt)
    suites = list(dict.fromkeys((r.task, r.suite) for r in rows))
    several = len(suites) > len({task for task, _ in suites})  # a column only then
    # on a terminal, a column that would hold one value throughout is said once, in the
    # notes (the publication formats keep their columns)
    tasks = fmt != "table" or len({r.task for r in rows}) > 1
    families = fmt != "table" or len({r.family for r in rows}) > 1
    headers = [*(["task"] if tasks else []), *(["suite"] if several else []),
               *(["family"] if families else []), "metric", "rank", "explainer",
               *entry_cell("entry", fmt), f"mean [{_ci(rows)}]", "n"]
    # a terminal names the suites S1, S2, ... and spells them out in the notes
    legend = ({suite: f"S{i}" for i, suite in enumerate(dict.fromkeys(r.suite for r in rows), 1)}
              if several and fmt == "table" else {})
    body = [
        [
            *([r.task] if tasks else []),
            *([legend.get(r.suite, r.suite)] if several else []),
            *([r.family] if families else []),
            f"{labels[r.metric]} {ARROWS[r.direction]}",
            f"{r.rank} {OVERLAP}" if r.overlaps_above else str(r.rank),
            r.explainer,
            *entry_cell(r.entry_id, fmt),
            seed_cell(r),
            n_cell(r),
        ]
        for r in rows
    ]
    notes = [] if several else [_inline(f"{task}: {suite}", fmt) for task, suite in suites]
    if rows and not families:
        notes.append(f"family: {rows[0].family}")
    if rows and not tasks and several:
        notes.insert(0, _inline(f"task: {rows[0].task}", fmt))
    notes += [f"{short}: {_inline(suite, fmt)}" for suite, short in legend.items()]
    if several:
        notes.append("Entries of one task scored on different suites (split, examples, "
                     "model checkpoints) are ranked apart, never against each other.")
    if any(r.overlaps_above for r in rows):
        notes.append(f"{OVERLAP}: its CI overlaps that of the entry listed just above it.")
    notes += seed_note(rows) + undefined_note(rows) + [OVERLAP_IS_NO_TEST]
    keep = tasks + several + families
    align = "l" * keep + "lrl" + "l" * len(entry_cell("", fmt)) + "lr"
    headers, body, align, notes = _with_costs(headers, body, align, notes, costs)
    mean_at = headers.index(f"mean [{_ci(rows)}]")
    bold = [[j == mean_at and r.rank == 1 for j in range(len(headers))] for r in rows]
    return _text(headers, body, fmt, align, notes, bold, keep=keep + 3)


def render_matrix(
    entries: list[Entry],
    task: str,
    fmt: str = "table",
    *,
    family: str | None = None,
    sort_by: str | None = None,
    metrics: list[str] | None = None,
    prefer: str | None = None,
    cost: Mapping[tuple[str, str], ExplainCost] | None = None,
    rows: list[Ranked] | None = None,
    short: bool = False,
    mark: str | None = None,
) -> str:
    """Explainers as rows, the task's metrics as columns (``rank.matrix`` picks, ranks
    and orders them; see there for ``sort_by``, ``prefer`` and ``metrics``); with
    ``cost`` (``leaderboard.cost.explain_costs``), each explainer's cost per example
    in the last columns; ``rows``: rows already ranked (a published release's) instead
    of ranking ``entries``; ``short``: explainers by name (``short_names``); ``mark``: an
    entry id whose row reads "(yours)"."""
    _check_fmt(fmt)
    found = (matrices(entries, task, family=family, sort_by=sort_by, metrics=metrics,
                      prefer=prefer) if rows is None else
             matrices_of_rows([r for r in rows if family is None or r.family == family], task,
                              sort_by=sort_by, metrics=metrics, prefer=prefer))
    if short:
        found = [replace(m, explainers=short_names(m.rows)) for m in found]
    if mark is not None:
        found = [replace(m, explainers={e: f"{x} (yours)" if e == mark else x
                                        for e, x in m.explainers.items()}) for m in found]
    if fmt == "csv":  # one CSV, a suite column telling the tables apart
        return "".join(_matrix_csv(m, cost, header=i == 0) for i, m in enumerate(found))
    return "\n".join(_matrix_text(m, fmt, cost) for m in found)


def short_names(rows: Sequence[Ranked]) -> dict[str, str]:
    """Entry id -> the explainer's name (``lime``, not its id with every parameter),
    where no other entry of its task and suite has that name; else the name with the
    parameters in which they differ (``distinct_labels``), so two settings of one
    explainer stay apart. For tables people read, not for matching."""
    suites: dict[tuple[str, str], dict[str, Ranked]] = {}
    for r in rows:
        suites.setdefault((r.task, r.suite), {})[r.entry_id] = r
    out: dict[str, str] = {}
    for entries in suites.values():
        labels = distinct_labels([r.explainer for r in entries.values()])
        out.update({e: labels[r.explainer] for e, r in entries.items()})
    return out


def with_short_names(rows: list[Ranked]) -> list[Ranked]:
    """``rows`` with each explainer shown by its ``short_names`` label."""
    names = short_names(rows)
    return [replace(r, explainer=names[r.entry_id]) for r in rows]


def _matrix_csv(m: Matrix, cost, header: bool) -> str:
    costs = None if cost is None else [cost.get((e, m.task), UNKNOWN) for e in m.order]
    cols = ["suite", "explainer", "entry_id"] + [f"{c} {k}" for c in m.metrics
                                                 for k in MATRIX_COLS]
    body: list[list] = []
    for e in m.order:
        line: list = [m.suite, m.explainers[e], e]
        for c in m.metrics:
            r = m.cells.get((e, c))
            line += [getattr(r, k) for k in MATRIX_COLS] if r else [""] * len(MATRIX_COLS)
        body.append(line)
    if costs is not None:
        cols += COST_COLUMNS
        body = [line + c.values() for line, c in zip(body, costs)]
    text = _csv(cols, body)
    return text if header else text.split("\n", 1)[1]


def _matrix_text(m: Matrix, fmt: str, cost) -> str:
    if fmt == "table":  # the column the rows are sorted by comes first on a terminal
        m = replace(m, metrics=[m.sort_key] + [c for c in m.metrics if c != m.sort_key])
    costs = None if cost is None else [cost.get((e, m.task), UNKNOWN) for e in m.order]
    labels = _metric_labels(m.metrics, fmt)
    heads = {c: f"{labels[c]} {ARROWS[m.direction[c]]}" for c in m.metrics}
    body = []
    for e in m.order:
        ns = sorted({m.cells[(e, c)].n for c in m.metrics if (e, c) in m.cells})
        n = str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"
        body.append([m.explainers[e], *entry_cell(e, fmt), n]
                    + [_matrix_cell(m.cells[(e, c)], seeds=fmt != "table")
                       if (e, c) in m.cells else MISSING for c in m.metrics])
    # a terminal's cells leave out the seeds' range (in the other formats), so three
    # columns fit in 120 characters
    ranged = fmt != "table" and any(r.n_seeds > 1 for r in m.rows)
    note = (f"{_inline(m.task, fmt)} ({_inline(m.suite, fmt)}); sorted by "
            f"{_inline(heads[m.sort_key], fmt)}; cells: mean [{_ci(m.rows)}]"
            + (" s min–max" if ranged else ""))
    headers = ["explainer", *entry_cell("entry", fmt), "n"] + [heads[c] for c in m.metrics]
    align = "l" + "l" * len(entry_cell("", fmt)) + "r" + "r" * len(m.metrics)
    seeds = seed_note(m.rows) if ranged else [
        n.split("; s:")[0] for n in seed_note(m.rows)]
    notes = [note, *seeds, *undefined_note(m.rows), OVERLAP_IS_NO_TEST]
    headers, body, align, notes = _with_costs(headers, body, align, notes, costs)
    first = len(headers) - len(m.metrics) - (0 if costs is None else len(COST_HEADERS))
    bold = [[first <= j < first + len(m.metrics) and (e, m.metrics[j - first]) in m.cells
             and m.cells[(e, m.metrics[j - first])].rank == 1 for j in range(len(headers))]
            for e in m.order]
    return _text(headers, body, fmt, align, notes, bold, keep=2 + len(entry_cell("", fmt)))


def entry_cell(entry_id: str, fmt: str) -> list[str]:
    """The entry column of a terminal table: the first 8 characters of the id, which
    ``compare`` takes as a unique prefix. Publication formats (Markdown, LaTeX) leave
    it out: an entry id hashes this machine's checkpoints, so it names nothing in a
    reader's folder (CSV and JSON carry the whole id)."""
    return [entry_id[:8]] if fmt == "table" else []


def _with_costs(headers: list, body: list, align: str, notes: list, costs) -> tuple:
    """A table's parts with the two cost columns and their note added (``costs``: one
    ``ExplainCost`` per row, or None for none)."""
    if costs is None:
        return headers, body, align, notes
    return ([*headers, *COST_HEADERS], [line + c.cells() for line, c in zip(body, costs)],
            align + "rr", [*notes, COST_NOTE])


def _matrix_cell(row: Ranked, *, seeds: bool = True) -> str:
    """A matrix cell: the n column holds every metric's n, so the undefined go here;
    ``seeds``: with the range of the per-seed means where there are several."""
    k = row.undefined
    text = seed_cell(row) if seeds else cell(row.mean, row.ci_low, row.ci_high)
    return text + (f" (+{k} undefined)" if k else "")


def render_costs(rows: list[RunCost], fmt: str = "table") -> str:
    """``leaderboard.cost.run_costs`` rows: one table per (task, suite), one row per
    explainer, costliest first; CSV and JSON with every total at full precision."""
    _check_fmt(fmt)
    if fmt == "csv":
        return _csv(list(RUN_COLUMNS), [r.values() for r in rows])
    if fmt == "json":
        return _json([dict(zip(RUN_COLUMNS, r.values())) for r in rows])
    out = []
    for task, suite in dict.fromkeys((r.task, r.suite) for r in rows):
        mine = [r for r in rows if (r.task, r.suite) == (task, suite)]
        out.append(_text(list(RUN_HEADERS), [r.cells() for r in mine], fmt, "lrrrrrrr",
                         [_inline(f"{task}: {suite}", fmt), RUN_NOTE]))
    return "\n".join(out)


def render_comparison(rows: list[Compared], fmt: str = "table") -> str:
    """Rows from ``compare``: means of A and B on the shared examples, A − B with CI,
    the raw and the Holm-adjusted p."""
    _check_fmt(fmt)
    if fmt == "csv":
        cols = [
            "task",
            "suite",
            "family",
            "metric",
            "direction",
            "a",
            "b",
            "a_entry",
            "b_entry",
            "n",
            "undefined",
            "mean_a",
            "mean_b",
            "diff",
            "ci_low",
            "ci_high",
            "ci_method",
            "n_seeds",
            "p_value",
            "p_holm",
            "test",
            "better",
        ]
        return _csv(cols, [[getattr(r, c) for c in cols]
                           for r in rows])
    if fmt == "json":
        return _json([r.as_dict() for r in rows])
    labels = _metric_labels([r.metric for r in rows], fmt)
    # on a terminal: one task is said in the notes, and the winner by name
    tasks = fmt != "table" or len({r.task for r in rows}) > 1
    names = distinct_labels([x for r in rows for x in (r.a, r.b)]) if fmt == "table" else {}
    headers = [*(["task"] if tasks else []), "metric", "n", "A", "B",
               f"A − B [{_ci(rows)}]", "p", "p (Holm)", "better"]
    body = [
        [
            *([r.task] if tasks else []),
            f"{labels[r.metric]} {ARROWS[r.direction]}",
            n_cell(r),
            num(r.mean_a),
            num(r.mean_b),
            cell(r.diff, r.ci_low, r.ci_high),
            p_value(r.p_value),
            p_value(r.p_holm),
            names.get(r.better, r.better),
        ]
        for r in rows
    ]
    pairs = sorted({(r.a, r.a_entry, r.b, r.b_entry) for r in rows})
    notes = [_inline(f"A = {a} (entry {ae}); B = {b} (entry {be})", fmt)
             for a, ae, b, be in pairs]
    notes += [_inline(f"{task}: {suite}", fmt)
              for task, suite in dict.fromkeys((r.task, r.suite) for r in rows)]
    notes += [comparison_note(rows), *undefined_note(rows)]
    return _text(headers, body, fmt, ("l" if tasks else "") + "lrrrrrrl", notes, keep=1 + tasks)


def comparison_note(rows: list[Compared]) -> str:
    """How the comparison's p-values and intervals were computed.

    >>> from types import SimpleNamespace as Row
    >>> print(comparison_note([Row(test="sign-flip exact", n_seeds=1, confidence=0.95)] * 2))
    p: paired two-sided sign-flip test (exact) of mean(A − B) = 0 on the shared examples
    (conditional on the model checkpoint); p (Holm): Holm–Bonferroni over the 2 rows;
    better: named only where p (Holm) < 0.05 and the CI of A − B excludes 0. CI of A − B:
    bootstrap over examples.
    >>> t = "t over seed means (S-1 df) + example variance"
    >>> print(comparison_note([Row(test=t, ci_method=t, n_seeds=3, confidence=0.95)]))
    p: with several model seeds, t over seed means (S-1 df) + example variance of the
    (seeds × examples) differences A − B, which also covers retraining (p < alpha exactly
    where its CI excludes 0); p (Holm): Holm–Bonferroni over the 1 row; better: named only
    where p (Holm) < 0.05 and the CI of A − B excludes 0. CI of A − B: t over seed means
    (S-1 df) + example variance (several seeds).
    """
    flips = [r for r in rows if r.test.startswith("sign-flip")]
    swaps = [r for r in rows if r.test.startswith("swap")]
    seeded = [r for r in rows if r.n_seeds > 1]
    kinds = sorted({r.test.removeprefix("sign-flip ") for r in flips})
    alphas = sorted({round(1 - r.confidence, 6) for r in rows})
    alpha = f"{alphas[0]:g}" if len(alphas) == 1 else "1 − CI level"
    methods = []
    if any(r.n_seeds == 1 for r in rows):
        methods.append("bootstrap over examples")
    methods += [f"{m} (several seeds)" for m in sorted({r.ci_method for r in seeded})]
    plural = "" if len(rows) == 1 else "s"
    tests = []
    if flips:
        tests.append(f"paired two-sided sign-flip test ({', '.join(kinds)}) of mean(A − B) = 0 "
                     "on the shared examples")
    if swaps:
        swap_kinds = sorted({r.test.removeprefix("swap ") for r in swaps})
        tests.append(f"{'for corpus-level metrics, ' if flips else ''}approximate "
                     f"randomization ({', '.join(swap_kinds)}): each shared example's statistics "
                     "swapped between A and B, the corpus values re-aggregated")
    one_seed = "; ".join(tests) + " (conditional on the model checkpoint)" if tests else ""
    several = ""
    if seeded:
        several = (f"with several model seeds, {'; '.join(sorted({r.test for r in seeded}))}"
                   " of the (seeds × examples) differences A − B, which also covers retraining "
                   "(p < alpha exactly where its CI excludes 0)")
    return (
        f"p: {'; '.join(t for t in (one_seed, several) if t)}; p (Holm): Holm–Bonferroni over "
        f"the {len(rows)} row{plural}; better: named only where p (Holm) < {alpha} and the CI "
        f"of A − B excludes 0. CI of A − B: {'; '.join(methods)}."
    )


def p_value(p: float) -> str:
    """>>> p_value(0.0004998), p_value(0.5)
    ('<0.001', '0.500')
    """
    return "<0.001" if p < 0.001 else num(p)


def _check_fmt(fmt: str) -> None:
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def _metric_labels(metric_ids: list[str], fmt: str = "table") -> dict[str, str]:
    """Short names where they are unique among the shown metrics; else, on a terminal,
    the name with the parameters in which they differ (``distinct_labels``), and in the
    publication formats the full id (as the published tables have always read).

    >>> ids = ["aer@1", "aer[fraction=0.5;links=threshold]@1", "alignment_precision@1"]
    >>> list(_metric_labels(ids).values())
    ['aer', 'aer[fraction=0.5;links=threshold]', 'alignment_precision']
    >>> list(_metric_labels(ids, "markdown").values())
    ['aer@1', 'aer[fraction=0.5;links=threshold]@1', 'alignment_precision']
    """
    if fmt == "table":
        return distinct_labels(metric_ids)
    unique = list(dict.fromkeys(metric_ids))
    counts = Counter(short_name(m) for m in unique)
    return {m: short_name(m) if counts[short_name(m)] == 1 else m for m in unique}


def _ci(rows: Sequence[Ranked | Compared]) -> str:
    levels = {round(r.confidence * 100, 6) for r in rows}
    return f"{levels.pop():g}% CI" if len(levels) == 1 else "CI"


def escape(value, tablefmt: str = "simple") -> str:
    r"""One table cell as text that cannot change the table's shape: control characters
    (newlines, tabs, escapes) become spaces; in a Markdown (``github``/``pipe``) table a
    backslash and ``|`` are escaped (a name ending in a backslash would otherwise turn
    the escaped pipe after it into a column break), and so is a ``<`` that could open
    raw HTML (a tag, a comment) — not the one of "<0.001". CSV cells go through the csv
    module, which quotes.

    >>> escape("a|b\nc", "github"), escape("x\\|y", "github")
    ('a\\|b c', 'x\\\\\\|y')
    >>> escape("<script>alert(1)</script>", "github"), escape("<0.001", "github")
    ('&lt;script>alert(1)&lt;/script>', '<0.001')
    """
    text = "".join(c if c.isprintable() else " " for c in str(value))
    if tablefmt not in MARKDOWN:
        return text
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text)


def visible(text, keep: str = "") -> str:
    r"""``text`` with every character that prints nothing or reorders the line (control
    characters, bidi overrides and isolates, zero-width and other format characters,
    line separators) shown as ``[U+XXXX]``, except those in ``keep``: what the site
    writes, so a name holding U+202E cannot render "tneidarg" as "gradient".

    >>> visible("\u202etneidarg"), visible("a\u200bb\n", keep="\n")
    ('[U+202E]tneidarg', 'a[U+200B]b\n')
    """
    return "".join(c if c.isprintable() or c in keep else f"[U+{ord(c):04X}]"
                   for c in str(text))


def _inline(text: str, fmt: str) -> str:
    """A note's names (from entries: any text) escaped as a cell is: one line, no markup."""
    return escape(text, "github" if fmt == "markdown" else "simple")


def safe_table(rows, headers=(), *, tablefmt: str = "simple", width: int | None = None,
               whole: tuple[str, ...] = (), **kwargs) -> str:
    """``tabulate`` with every cell and header escaped (``escape``): every table
    faithbench prints goes through here, so a name or a plugin's message cannot forge
    rows or columns. ``width``: the widest text columns are wrapped inside their cells
    until the table fits (``cell_widths``), except the columns headed ``whole`` (ids a
    user copies: they stay on one line even where the table is wider then)."""
    cells = [[v if isinstance(v, (int, float)) else escape(v, tablefmt) for v in row]
             for row in rows]
    heads = [escape(h, tablefmt) for h in headers]
    if width is not None and cells:
        widths = cell_widths(cells, heads, width, whole=[h in whole for h in headers])
        cells = [[_wrap(v, w) for v, w in zip(row, widths)] for row in cells]
    return tabulate(cells, headers=heads, tablefmt=tablefmt, **kwargs)


def _wrap(cell, width: int):
    """A text cell wrapped at spaces to ``width`` (a word longer than that, such as a
    name, stays whole: tabulate's own wrapping would cut it)."""
    if isinstance(cell, (int, float)) or len(cell) <= width:
        return cell
    return textwrap.fill(cell, width, break_long_words=False, break_on_hyphens=False)


def cell_widths(rows, headers, width: int, least: int = 12,
                whole: list[bool] | None = None) -> list[int]:
    """The widest a cell of each column may be (longer text wraps in its cell) for a
    plain table of at most ``width`` characters: the widest columns give way first,
    none below ``least`` or its header, and a ``whole`` column not at all. A ``whole``
    last column is left out of the sum: it may run past ``width`` (a terminal folds it)
    without squeezing the others.

    >>> cell_widths([["a", "x" * 100, "y" * 40]], ["h", "id", "text"], 60)
    [3, 26, 27]
    >>> cell_widths([["a", "x" * 30, "y" * 40]], ["h", "id", "text"], 60, whole=[False, True, False])
    [3, 30, 23]
    >>> cell_widths([["a", "y" * 80, "x" * 90]], ["h", "text", "id"], 60, whole=[False, False, True])
    [3, 55, 90]
    """
    # tabulate pads a column to its header + 2 at least
    heads = [len(str(h)) + 2 for h in headers] if headers else [0] * len(rows[0])
    widths = [max([heads[j]] + [len(str(r[j])) for r in rows]) for j in range(len(heads))]
    whole = whole or [False] * len(heads)
    floor = [w if keep else max(least, h) for w, h, keep in zip(widths, heads, whole)]
    past = widths[-1] + 2 if whole[-1] else 0
    while sum(widths) - past + 2 * (len(widths) - 1) > width:
        j = max(range(len(widths)), key=lambda k: widths[k] - floor[k])
        if widths[j] <= floor[j]:
            break
        widths[j] -= 1
    return widths


def _text(headers: list[str], body: list[list[str]], fmt: str, align: str, notes: list[str],
          bold: list[list[bool]] | None = None, keep: int = 1) -> str:
    """A table with its notes below it, or in LaTeX in its caption (``bold``: the cells
    set in bold there, the best of each metric). A terminal table wider than ``WIDTH``
    is cut into blocks of columns that fit, each repeating the first ``keep`` columns
    (the explainer), and its notes are wrapped at ``WIDTH``."""
    if fmt == "latex":
        caption = " ".join(n if n.endswith(".") else f"{n}." for n in notes)
        return latex.table(headers, body, align, caption, bold)
    align_names = {"l": "left", "r": "right"}
    if fmt == "markdown":
        text = safe_table(body, headers, tablefmt="github", disable_numparse=True,
                          colalign=[align_names[a] for a in align])
        return "\n\n".join([text, *notes]) + "\n"
    blocks = [safe_table([[row[j] for j in cols] for row in body], [headers[j] for j in cols],
                         disable_numparse=True, colalign=[align_names[align[j]] for j in cols])
              for cols in column_blocks(headers, body, keep)]
    wrapped = [textwrap.fill(n, WIDTH, break_on_hyphens=False) for n in notes]
    return "\n\n".join([*blocks, *wrapped]) + "\n"


WIDTH = 120  # columns of a terminal table and its notes, as printed by default


def column_blocks(headers: Sequence[str], body: Sequence[Sequence[str]], keep: int = 1,
                  width: int = WIDTH) -> list[list[int]]:
    """The columns of each block of a table cut to ``width`` characters (tabulate's
    plain format: columns two spaces apart): the first ``keep`` in every block, then as
    many of the others, in order, as fit (at least one).

    >>> column_blocks(["name", "a", "b", "c"], [["x" * 10, "1" * 50, "2" * 50, "3" * 50]],
    ...               width=120)
    [[0, 1, 2], [0, 3]]
    """
    # tabulate pads a column to its header + 2 at least
    widths = [max([len(str(h)) + 2] + [len(str(row[j])) for row in body])
              for j, h in enumerate(headers)]
    fixed = sum(widths[:keep]) + 2 * max(keep - 1, 0)
    blocks: list[list[int]] = []
    current: list[int] = []
    used = fixed
    for j in range(keep, len(headers)):
        step = widths[j] + (2 if keep or current else 0)
        if current and used + step > width:
            blocks.append(current)
            current, used = [], fixed
        current.append(j)
        used += step
    if current or not blocks:
        blocks.append(current)
    return [list(range(keep)) + b for b in blocks]


def _csv(cols: list[str], body: list[list]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(cols)
    writer.writerows(body)
    return buf.getvalue()


def _json(value) -> str:
    """JSON with full precision (NaN, where a value is undefined, as null)."""
    return json.dumps(json_safe(value), indent=1, ensure_ascii=False) + "\n"


def json_safe(value):
    """``value`` with every NaN as None (JSON's null), in nested dicts and lists."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
