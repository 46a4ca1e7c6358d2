"""What the verbs print beyond one table: a run's summary (run, submit), plugin
check tables (validate, submit), explainers x metrics matrices (run, leaderboard)."""

from __future__ import annotations

import sys

from faithbench.benchmark.core.ids import short_name
from faithbench.leaderboard.render import safe_table


def checks(results) -> bool:
    """Print plugin checks; True when every one passed."""
    print(safe_table([(c.check, "PASS" if c.passed else "FAIL", c.detail) for c in results],
                     headers=["check", "result", "detail"]))
    return all(c.passed for c in results)


def matrix(entries, task: str, fmt: str, *, family=None, sort_by=None, metrics=None,
           prefer: str | None = None, cost=None, short: bool = False, rows=None) -> str:
    """Explainers x metrics, sorted by ``sort_by`` (a metric the user named: it must
    match one) or else by ``prefer`` where the task has it, else the first column."""
    from faithbench.leaderboard.render import render_matrix

    return render_matrix(entries, task, fmt, family=family, sort_by=sort_by, metrics=metrics,
                         prefer=prefer, cost=cost, short=short, rows=rows)


SANITY = "sanity"


def matrices(entries, task: str, fmt: str, *, family=None, sort_by=None, metrics=None,
             prefer: str | None = None, cost=None, short: bool = False) -> str:
    """``matrix``; but where neither a family nor columns are asked for, the sanity
    checks (family "sanity": does the explanation change with the model?) get a table of
    their own after the task's other metrics, as they answer another question."""
    from faithbench.benchmark.core.names import FAMILIES
    from faithbench.leaderboard.rank import matches, rank

    rows = [] if family or metrics else rank(entries, task=task)
    families = {r.family for r in rows}
    if SANITY not in families or families == {SANITY}:
        return matrix(entries, task, fmt, family=family, sort_by=sort_by, metrics=metrics,
                      prefer=prefer, cost=cost, short=short, rows=rows or None)
    order = sorted({(FAMILIES.index(r.family), r.metric) for r in rows if r.family != SANITY})
    sanity_sort = sort_by is not None and any(matches(r.metric, sort_by) for r in rows
                                              if r.family == SANITY)
    # both tables from the rows ranked once (ranking bootstraps every cell)
    rest = matrix(entries, task, fmt, metrics=[m for _, m in order], prefer=prefer,
                  sort_by=None if sanity_sort else sort_by, cost=cost, short=short, rows=rows)
    return rest + "\n" + matrix(entries, task, fmt, family=SANITY, rows=rows,
                                sort_by=sort_by if sanity_sort else None, cost=cost, short=short)


def summary(result) -> None:
    """A run's models, its entries per task, metric flags, sharing, and failures."""
    for task, acc in result.accuracy.items():
        print(f"model {task}: accuracy " + ", ".join(f"{k} {v:.4f}" for k, v in acc.items()))
    entries = result.entries  # as the run wrote them: nothing is read back
    for task in sorted({r.task for r in result.results}):
        print(f"\n{task}")
        print(matrices(entries, task, "table", prefer="comprehensiveness"))
    flags = [(r.task, r.explainer, short_name(r.metric), name, count, r.estimate.n)
             for r in result.results for name, count in sorted(r.extra.items())]
    if flags:
        print("\n" + safe_table(flags, headers=["task", "explainer", "metric", "flag", "count", "n"]))
    if result.rows_requested:
        share = result.rows_forwarded / result.rows_requested
        print(f"\nperturbed rows: {result.rows_requested:,} requested by the explainers and metrics, "
              f"{result.rows_forwarded:,} forwarded ({share:.0%}; identical variants are "
              "forwarded once and shared)")
    print(f"\nexamples: {result.selection} of each task's split")
    print(f"{result.computed} units computed, {result.skipped} already done, "
          f"{len(result.failures)} failures; {result.seconds:.1f}s; results in {result.out}")
    failures(result.failures)


def failures(found) -> None:
    for f in found:
        print(f"FAILED: {f.message}", file=sys.stderr)
