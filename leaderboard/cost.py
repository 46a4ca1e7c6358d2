"""What an entry's explainer cost per example, read from its records' timing (``faithbench
leaderboard --cost`` shows it beside the scores).

Each result record carries the explanation's cost (``Timing``: seconds, forward and
backward rows, forward-equivalents = forward rows + 2 × backward rows, all totals over
the ``n_examples`` explained). Per (entry, task): the mean over the entry's records of
that task of each record's total / ``n_examples``; the records of one model seed share
one explanation, so this is the mean over seeds. A record without the field (written
before faithbench measured it, or alignments scored from a file) is left out; no
record with it: None (a blank cell).
"""

from __future__ import annotations

from dataclasses import dataclass

from faithbench.benchmark.core.records import ResultRecord
from faithbench.leaderboard.entry import Entry

COLUMNS = ("explain_s_per_example", "forward_equivalents_per_example")  # CSV
HEADERS = ("s/example", "fwd-eq/example")  # tables
NOTE = ("s/example: seconds spent explaining, per example; fwd-eq/example: forward rows + "
        "2 × backward rows through the model, per example (a backward pass costs about two "
        "forward passes); means over the entry's records of the task (blank: not recorded).")


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


def explain_cost(entry: Entry, task: str) -> ExplainCost:
    """The entry's explainer cost per example on ``task`` (a canonical task id)."""
    recs = [r for r in entry.results if r.task == task]
    return ExplainCost(_mean(recs, "explain_s"), _mean(recs, "explain_forward_equivalents"))


def explain_costs(entries: list[Entry]) -> dict[tuple[str, str], ExplainCost]:
    """(entry id, task id) -> its ``explain_cost``, for every task of every entry."""
    return {(e.entry_id, task): explain_cost(e, task)
            for e in entries for task in sorted({r.task for r in e.results})}
