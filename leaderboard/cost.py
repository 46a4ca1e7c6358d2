"""What an explainer cost, read from its records' timing.

Each result record carries the explanation's cost (``Timing``: seconds, forward,
backward and requested rows, totals over the ``n_examples`` explained) and its
metric's (seconds, rows the metric asked of the perturbation engine).

The charging rule. The engine forwards each distinct variant once and answers the
next asker from memory, so the explainer or metric that asks first pays the forward
pass and the others nothing (occlusion's leave-one-out inputs are often a metric's).
Here every explainer is charged every row it asks for, answered from memory or not:
its cost alone, whatever ran beside it. Forward-equivalents = rows + 2 × backward rows
(``core.cost``). Records written before requested rows were counted are charged the
rows forwarded.

- ``explain_cost``: per (entry, task), the explaining's seconds and forward-equivalents
  per example (the mean over the model seeds' explanations): what the site and a
  release show beside the scores.
- ``run_costs``: per (task, suite) one row per explainer: explaining and its metrics,
  seconds and rows per example, and its share of the suite's seconds
  (``faithbench leaderboard --cost``).

A record without a field (written before faithbench measured it, or alignments scored
from a file) is left out; no record with it: None (a blank cell).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from faithbench.benchmark.core.records import BACKWARD_COST, ResultRecord
from faithbench.leaderboard.entry import Entry

COLUMNS = ("explain_s_per_example", "forward_equivalents_per_example")  # CSV
HEADERS = ("s/example", "fwd-eq/example")  # tables
NOTE = ("s/example: seconds spent explaining, per example; fwd-eq/example: rows asked of "
        "the model (those the shared engine answered from memory included) + 2 × backward "
        "rows, per example (a backward pass costs about two forward passes); means over the "
        "entry's records of the task (blank: not recorded).")


@dataclass(frozen=True)
class ExplainCost:
    """Per example: seconds explaining, and forward-equivalents (None: not recorded)."""

    seconds: float | None
    forward_equivalents: float | None

    def values(self) -> list[float | str]:
        """CSV cells: full precision, blank where unknown."""
        return ["" if v is None else v for v in (self.seconds, self.forward_equivalents)]

    def cells(self) -> list[str]:
        """Table cells.

        >>> ExplainCost(0.012345, 151.5).cells(), ExplainCost(None, None).cells()
        (['0.0123', '151.5'], ['', ''])
        """
        return ["" if self.seconds is None else f"{self.seconds:.3g}",
                "" if self.forward_equivalents is None else f"{self.forward_equivalents:.1f}"]


UNKNOWN = ExplainCost(None, None)


def _mean(recs: list[ResultRecord], name: str) -> float | None:
    values = [v for r in recs if (v := r.timing.per_example(name)) is not None]
    return sum(values) / len(values) if values else None


def charged_equivalents(timing) -> int | None:
    """Forward-equivalents charged to the explaining (the rule above): rows asked +
    2 × backward rows; the forwarded ones for a record without requested rows."""
    rows = timing.explain_requested_rows
    if rows is None or timing.explain_backward_rows is None:
        return timing.explain_forward_equivalents
    return rows + BACKWARD_COST * timing.explain_backward_rows


def explain_cost(entry: Entry, task: str) -> ExplainCost:
    """The entry's explainer cost per example on ``task`` (a canonical task id)."""
    recs = [r for r in entry.results if r.task == task]
    equivalents = [charged / r.timing.n_examples for r in recs
                   if (charged := charged_equivalents(r.timing)) is not None
                   and r.timing.n_examples]
    return ExplainCost(_mean(recs, "explain_s"),
                       sum(equivalents) / len(equivalents) if equivalents else None)


def explain_costs(entries: list[Entry]) -> dict[tuple[str, str], ExplainCost]:
    """(entry id, task id) -> its ``explain_cost``, for every task of every entry."""
    return {(e.entry_id, task): explain_cost(e, task)
            for e in entries for task in sorted({r.task for r in e.results})}


RUN_HEADERS = ("explainer", "n", "explain s/ex", "metrics s/ex", "share", "rows/ex",
               "fwd-eq/ex", "metric rows/ex")
RUN_COLUMNS = ("task", "suite", "entry_id", "explainer", "examples", "seeds", "explain_s",
               "metric_s", "share", "explain_rows", "explain_forward_equivalents",
               "metric_rows")
RUN_NOTE = ("Charging rule: an explainer pays for every row it asks of the model, also one "
            "the shared engine answers from memory (forwarded earlier for a metric or "
            "another explainer): its cost alone. explain s/ex and metrics s/ex: seconds per "
            "example explaining and scoring its explanations; share: those seconds, of the "
            "suite's total; rows/ex: rows asked of the model while explaining; fwd-eq/ex: "
            "rows + 2 x backward rows; metric rows/ex: rows its metrics asked for. Per "
            "example and model seed; blank: not recorded.")


@dataclass(frozen=True)
class RunCost:
    """One explainer's cost on one (task, suite), totals over its model seeds:
    ``examples`` explained per seed; seconds explaining and scoring; rows asked of the
    model while explaining (and forward-equivalents, charged by the rule above) and by
    its metrics; ``share`` of the suite's seconds (explaining + metrics)."""

    task: str
    suite: str
    entry_id: str
    explainer: str
    examples: int
    seeds: int
    explain_s: float | None
    metric_s: float | None
    share: float | None
    explain_rows: int | None
    explain_forward_equivalents: int | None
    metric_rows: int | None

    def per_example(self, value: float | None) -> float | None:
        return None if value is None or not self.examples else value / (self.examples
                                                                          * self.seeds)

    def cells(self) -> list[str]:
        """>>> RunCost("t", "s", "e", "lime", 10, 1, 2.0, 1.0, 0.25, 500, 500, 80).cells()
        ['lime', '10', '0.2', '0.1', '25%', '50.0', '50.0', '8.0']
        """
        def secs(v):
            return "" if v is None else f"{v:.3g}"

        def rows(v):
            return "" if v is None else f"{v:.1f}"

        return [self.explainer, str(self.examples), secs(self.per_example(self.explain_s)),
                secs(self.per_example(self.metric_s)),
                "" if self.share is None else f"{self.share:.0%}",
                rows(self.per_example(self.explain_rows)),
                rows(self.per_example(self.explain_forward_equivalents)),
                rows(self.per_example(self.metric_rows))]

    def values(self) -> list:
        return [getattr(self, c) for c in RUN_COLUMNS]


def _total(values: list) -> float | None:
    return None if not values or None in values else sum(values)


def _rows(values: list) -> int | None:
    total = _total(values)
    return None if total is None else int(total)


def run_costs(entries: list[Entry], *, short: bool = True) -> list[RunCost]:
    """Per (task, suite), one ``RunCost`` per entry, costliest first; ``short``:
    explainers by name (``distinct_labels``), else by id. Suites as ``rank`` labels them."""
    from faithbench.benchmark.core.ids import distinct_labels
    from faithbench.leaderboard.suite import by_suite, suite_labels

    out: list[RunCost] = []
    for task in sorted({r.task for e in entries for r in e.results}):
        groups = by_suite(entries, task)
        for group, label in zip(groups, suite_labels(groups, task)):
            names = (distinct_labels([e.explainer for e in group]) if short
                     else {e.explainer: e.explainer for e in group})
            rows = [_run_cost(e, task, label, names[e.explainer]) for e in group]
            spent = [(r.explain_s or 0.0) + (r.metric_s or 0.0) for r in rows]
            whole = sum(spent)
            rows = [replace(r, share=s / whole if whole else None)
                    for r, s in zip(rows, spent)]
            out += sorted(rows, key=lambda r: (-(r.share or 0.0), r.explainer))
    return out


def _run_cost(e: Entry, task: str, suite: str, name: str) -> RunCost:
    recs = [r for r in e.results if r.task == task]
    per_seed: dict[int, ResultRecord] = {}
    for r in recs:  # one explanation per seed: its records share the explaining's figures
        per_seed.setdefault(r.model_seed, r)
    explained = list(per_seed.values())
    examples = max((r.timing.n_examples or 0 for r in explained), default=0)
    rows = [r.timing.explain_requested_rows if r.timing.explain_requested_rows is not None
            else r.timing.explain_forward_rows for r in explained]
    return RunCost(task=task, suite=suite, entry_id=e.entry_id,
                   explainer=name, examples=examples, seeds=len(explained),
                   explain_s=_total([r.timing.explain_s for r in explained]),
                   metric_s=_total([r.timing.metric_s for r in recs]), share=None,
                   explain_rows=_rows(rows),
                   explain_forward_equivalents=_rows([charged_equivalents(r.timing)
                                                      for r in explained]),
                   metric_rows=_rows([r.timing.rows_requested for r in recs]))
