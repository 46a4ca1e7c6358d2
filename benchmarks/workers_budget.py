"""How long a run's units take on 1, 2, ... N workers (``run --executor pool|ray``),
modelled from the seconds its result files recorded.

    python benchmarks/workers_budget.py runs/sentiment runs/nli runs/alignment runs/tf/sentiment

Each folder's units become jobs as ``--executor`` makes them
(``faithbench.benchmark.distributed.Stages``), from the seconds recorded on one
thread: an explainer whose explaining is big (``_big``: more than half of a worker's
share of all explaining) is split into chunks of 8 batches of 32 examples (its
recorded ``explain_s`` spread evenly over them), followed by one job of its metrics'
seconds once its last chunk is done; every other (task, model seed, explainer) is one
job of its explain and metric seconds. Jobs go out longest first, each to the first
worker free, a follow-up joining the queue when it is ready (what a process pool or
Ray does with equal workers); the wall-clock for N workers is the simulated finish.
The model trainings before them (one job per model) and start-up are not in the
records and not counted; nor is any slow-down of workers sharing memory bandwidth,
which the measured 1- and 2-worker runs in docs/results/workers.md show.
"""

from __future__ import annotations

import argparse
import heapq
import math
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from faithbench.benchmark.core.records import latest_results
from faithbench.benchmark.distributed import CHUNK_BATCHES, _big

BATCH = 32  # examples per explain batch (the runs' --batch-size)

WORKERS = (1, 2, 4, 8, 16, 32)


@dataclass
class Group:
    """One (task, model seed, explainer): its recorded explain and metric seconds and
    how many examples it explained."""

    explain: float = 0.0
    metrics: float = 0.0
    examples: int = 0


def groups(folder: Path) -> list[Group]:
    """The (task, seed, explainer) groups of ``folder``, in run order."""
    found: dict[tuple, Group] = {}
    for r in latest_results(folder / "results.jsonl"):
        key = (r.task, r.model_seed, r.explainer)
        t = r.timing
        if key not in found:
            found[key] = Group(t.explain_s or 0.0, 0.0, t.n_examples or r.estimate.n)
        found[key].metrics += t.metric_s or 0.0
    return list(found.values())


def makespan(found: list[Group], workers: int) -> float:
    """Simulated wall-clock of the groups' jobs on ``workers`` workers (module docstring).

    >>> makespan([Group(6.0, 1.0, 32), Group(1.0, 1.0, 32)], 2)  # two whole jobs
    7.0
    >>> # 16 batches: 2 chunks of 4 s side by side, then the small job (2 s) beside the
    >>> # chunked explainer's metrics (1 s)
    >>> makespan([Group(8.0, 1.0, 512), Group(1.0, 1.0, 32)], 2)
    6.0
    """
    total = sum(g.explain for g in found)
    jobs: list[tuple[float, int, bool]] = []  # (seconds, group, is a chunk)
    chunks_of: dict[int, int] = {}
    for i, g in enumerate(found):
        n = -(-math.ceil(g.examples / BATCH) // CHUNK_BATCHES)  # chunks of 8 batches
        if n > 1 and _big(g.explain, total, workers):
            chunks_of[i] = n
            jobs += [(g.explain / n, i, True)] * n
        else:
            jobs.append((g.explain + g.metrics, i, False))
    queue = deque(sorted(jobs, key=lambda j: -j[0]))
    waiting: list[tuple[float, int]] = []  # (ready at, group): follow-ups not yet queued
    ready_at: dict[int, float] = {}
    free = [(0.0, w) for w in range(workers)]
    finish = 0.0
    while queue or waiting:
        now, w = heapq.heappop(free)
        while waiting and (waiting[0][0] <= now or not queue):
            at, i = heapq.heappop(waiting)
            queue.append((found[i].metrics, i, False))
            now = max(now, at)
        seconds, i, chunk = queue.popleft()
        end = now + seconds
        if chunk:
            chunks_of[i] -= 1
            ready_at[i] = max(ready_at.get(i, 0.0), end)
            if chunks_of[i] == 0:
                heapq.heappush(waiting, (ready_at[i], i))
        finish = max(finish, end)
        heapq.heappush(free, (end, w))
    return finish


def hours(s: float) -> str:
    return f"{s / 3600:.2f} h" if s >= 3600 else f"{s / 60:.1f} min"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", type=Path, help="result folders (--out of runs)")
    args = p.parse_args(argv)
    rows, every = [], []
    for folder in args.folders:
        found = groups(folder)
        every += found
        rows.append([str(folder), len(found), hours(max(g.explain + g.metrics for g in found))]
                    + [hours(makespan(found, w)) for w in WORKERS])
    rows.append(["all, one after another", len(every),
                 hours(max(g.explain + g.metrics for g in every))]
                + [hours(makespan(every, w)) for w in WORKERS])
    print(tabulate(rows, headers=["results", "groups", "longest group",
                                  *(f"{w} worker{'s' * (w > 1)}" for w in WORKERS)],
                   tablefmt="github"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
