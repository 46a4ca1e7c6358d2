"""Progress bars: on a terminal (or in a notebook), never in a log file.

A bar is drawn only where someone watches it: stderr a terminal, or a notebook's
widgets. Written to a file or a pipe (CI, ``2> run.log``, a job scheduler) a bar is
carriage returns and half lines, so nothing is drawn there. ``FAITHBENCH_PROGRESS=1``
draws the bars anyway, ``FAITHBENCH_PROGRESS=0`` never; ``--no-progress`` (``show``
False) hides every bar whatever the variable says.

``Overall`` is a run's one overall line: units done of the run's units, with tqdm's
rate and time remaining; the explain, score and train steps have bars of their own
below it (``progress_bar``), cleared when they end.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence

from tqdm.auto import tqdm
from tqdm.autonotebook import tqdm as notebook_or_std
from tqdm.std import tqdm as std_tqdm

ENV = "FAITHBENCH_PROGRESS"
ON, OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def shown(show: bool = True) -> bool:
    """Whether bars are drawn: never without ``show``; else as ``FAITHBENCH_PROGRESS``
    says (1 or 0), else in a notebook, else when stderr is a terminal."""
    if not show:
        return False
    forced = os.environ.get(ENV, "").strip().lower()
    if forced in ON:
        return True
    if forced in OFF:
        return False
    if notebook_or_std is not std_tqdm:  # tqdm.auto draws widgets, not characters
        return True
    try:
        return bool(sys.stderr is not None and sys.stderr.isatty())
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


def progress_bar(iterable: Iterable | None = None, *, show: bool, **kwargs) -> tqdm:
    """``tqdm.auto.tqdm(iterable, **kwargs)``, disabled unless ``shown(show)``."""
    return tqdm(iterable, disable=not shown(show), **kwargs)


class Overall:
    """A run's units done of its total, one line.

    ``planned`` is each model's count of units before it is prepared (``plan.planned``);
    ``model(i, units, done)`` replaces model ``i``'s count by its units once they are
    known and counts ``done`` (their keys already in the results) as done from the
    start: they move the count, not the rate, so the time remaining is that of the
    units still to compute. ``finish(key)`` counts a unit computed, taken from another
    process or failed (each key once). The line appears when the first model's units
    are known (its model trained or loaded) and stays when the run ends.
    """

    def __init__(self, planned: Sequence[int], *, show: bool):
        self.planned = list(planned)
        self.enabled = shown(show)
        self.counted: set[str] = set()
        self.failed = 0
        self.bar: tqdm | None = None

    @property
    def total(self) -> int:
        return sum(self.planned)

    @property
    def n(self) -> int:
        return len(self.counted)

    def model(self, i: int, units: Iterable[str], done: Iterable[str]) -> None:
        """Model ``i``'s units are ``units`` (keys), ``done`` of them already done."""
        units = list(units)
        self.planned[i] = len(units)
        new = set(done) & set(units) - self.counted
        self.counted |= new
        if not self.enabled:
            return
        if self.bar is None:
            self.bar = tqdm(total=self.total, initial=self.n, desc="units", unit="unit",
                            smoothing=0, miniters=1, mininterval=0, dynamic_ncols=True)
            return
        bar = self.bar
        bar.total = self.total
        # done before the run: counted, but not in the rate (tqdm: (n - initial) / elapsed)
        bar.initial += len(new)
        bar.n += len(new)
        bar.last_print_n += len(new)
        bar.refresh()

    def finish(self, key: str, *, failed: bool = False) -> None:
        """Unit ``key`` is done (computed now, or by another process) or failed."""
        if key in self.counted:
            return
        self.counted.add(key)
        self.failed += failed
        if self.bar is not None:
            if failed:
                self.bar.set_postfix_str(f"{self.failed} failed", refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
