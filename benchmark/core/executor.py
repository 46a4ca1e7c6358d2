"""Executors run independent jobs (e.g. the retraining jobs of a ROAR sweep). Every
executor returns results in job order, so results do not depend on which one ran them.
In-process is the default; a process pool and a cluster executor plug in behind the
same ``map``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


class InProcessExecutor:
    """Runs jobs one after another in this process."""

    name = "in-process"

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any]) -> list[Any]:
        return [fn(job) for job in jobs]
