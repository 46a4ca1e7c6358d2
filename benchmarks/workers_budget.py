"""How long a run's units take on 1, 2, ... N workers (``run --executor pool|ray``),
modelled from the seconds its result files recorded.

    python benchmarks/workers_budget.py runs/sentiment runs/nli runs/alignment runs/tf/sentiment

Each folder's units form one job per (task, model seed, explainer), as
``--executor`` sends them: the explainer's seconds (``timing.explain_s``, recorded once
per explanation) plus its metrics' seconds (``timing.metric_s``), all measured on one
thread. The jobs go to the workers in the run's order, each to the first worker free
(what a process pool or Ray does with equal workers), so the wall-clock for N workers
is the makespan of that list schedule. The model trainings before them (one job per
model) and start-up are not in the records and not counted; nor is any slow-down of
workers sharing memory bandwidth, which the measured 1- and 2-worker runs in
docs/guides/run-and-resume.md show.
"""

from __future__ import annotations

import argparse
import heapq
from pathlib import Path

from tabulate import tabulate

from faithbench.benchmark.core.records import latest_results

WORKERS = (1, 2, 4, 8, 16, 32)


def jobs(folder: Path) -> list[float]:
    """Seconds of each (task, seed, explainer) job of ``folder``, in run order."""
    seconds: dict[tuple, float] = {}
    for r in latest_results(folder / "results.jsonl"):
        key = (r.task, r.model_seed, r.explainer)
        t = r.timing
        if key not in seconds:
            seconds[key] = t.explain_s or 0.0
        seconds[key] += t.metric_s or 0.0
    return list(seconds.values())


def makespan(seconds: list[float], workers: int) -> float:
    """Wall-clock of the jobs given in order to ``workers`` workers, each job to the
    first worker free."""
    free = [0.0] * workers
    for s in seconds:
        heapq.heapreplace(free, free[0] + s)
    return max(free)


def hours(s: float) -> str:
    return f"{s / 3600:.2f} h" if s >= 3600 else f"{s / 60:.1f} min"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", type=Path, help="result folders (--out of runs)")
    args = p.parse_args(argv)
    rows, every = [], []
    for folder in args.folders:
        js = jobs(folder)
        every += js
        rows.append([str(folder), len(js), hours(max(js))]
                    + [hours(makespan(js, w)) for w in WORKERS])
    rows.append(["all, one after another", len(every), hours(max(every))]
                + [hours(makespan(every, w)) for w in WORKERS])
    print(tabulate(rows, headers=["results", "jobs", "longest job",
                                  *(f"{w} worker{'s' * (w > 1)}" for w in WORKERS)],
                   tablefmt="github"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
