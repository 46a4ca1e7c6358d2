"""Progress: bars on a terminal (or in a notebook), plain lines in a log.

A bar is drawn only where someone watches it: stderr a terminal, or a notebook's
widgets. Written to a file or a pipe (CI, ``2> run.log``, ``nohup``, a job scheduler) a
bar is carriage returns and half lines, so none is drawn there; instead a ``Heartbeat``
writes one plain line at least every ``EVERY_S`` seconds (what the run is doing, how
far, time elapsed), so a log shows where a run is and a killed run keeps what it said.
``FAITHBENCH_PROGRESS=1`` draws the bars anyway, ``FAITHBENCH_PROGRESS=0`` never (the
lines stay); ``--no-progress`` (``show`` False) hides bars and lines.

``Overall`` is a run's one overall line: units done of the run's units, with tqdm's
rate and time remaining; the explain, score and train steps have bars of their own
below it (``progress_bar``), cleared when they end. Every bar, drawn or not, reports to
``STATUS``, which the heartbeat reads.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Self

from tqdm.auto import tqdm
from tqdm.autonotebook import tqdm as notebook_or_std
from tqdm.std import tqdm as std_tqdm

ENV = "FAITHBENCH_PROGRESS"
ON, OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
EVERY_S = 10.0  # a log's progress line at least this often (FAITHBENCH_PROGRESS_EVERY)
EVERY_ENV = "FAITHBENCH_PROGRESS_EVERY"


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


class Status:
    """What a run is doing now, for the heartbeat's lines: the stage (e.g. preparing a
    model), the overall units, and the steps under way (train, explain, score), each
    with how far it is. Updated by the run's thread, read by the heartbeat's."""

    def __init__(self):
        self.lock = threading.Lock()
        self.stage: str | None = None
        self.units: tuple[int, int] | None = None
        self.steps: list[Step] = []

    def line(self) -> str | None:
        """The current state in one line, or None when nothing is under way.

        >>> s = Status(); s.units = (3, 12); s.stage = "prepare sentiment@1 seed 0"
        >>> s.line()
        'units 3/12 (25%); prepare sentiment@1 seed 0'
        """
        with self.lock:
            done, total = self.units or (0, 0)
            parts = [] if self.units is None else [
                f"units {done:,}/{total:,} ({done / max(total, 1):.0%})"]
            parts += [self.stage] if self.stage else []
            parts += [step.describe() for step in self.steps]
        return "; ".join(parts) or None


STATUS = Status()


class Step:
    """One bar's progress as ``STATUS`` sees it: a tqdm bar (drawn or disabled) whose
    count is kept here too, since a disabled tqdm counts nothing."""

    def __init__(self, bar: tqdm, iterable: Iterable | None, desc: str, total: int | None,
                 initial: int = 0):
        self.bar, self.iterable, self.desc = bar, iterable, desc
        self.total, self.count = total, initial
        with STATUS.lock:
            STATUS.steps.append(self)

    def describe(self) -> str:
        total = f"/{self.total:,}" if self.total else ""
        return f"{self.desc} {self.count:,}{total}"

    def __iter__(self) -> Iterator:
        try:
            for item in self.bar if self.iterable is None or not self.bar.disable \
                    else self.iterable:
                yield item
                self.count += 1
        finally:
            self.close()

    def update(self, n: int = 1) -> None:
        self.bar.update(n)
        self.count += n

    def close(self) -> None:
        self.bar.close()
        with STATUS.lock:
            if self in STATUS.steps:
                STATUS.steps.remove(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress_bar(iterable: Iterable | None = None, *, show: bool, **kwargs) -> Step:
    """``tqdm.auto.tqdm(iterable, **kwargs)``, disabled unless ``shown(show)``; its
    progress reported to ``STATUS`` either way."""
    bar = tqdm(iterable, disable=not shown(show), **kwargs)
    total = kwargs.get("total")
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    return Step(bar, iterable, kwargs.get("desc", ""), total, kwargs.get("initial", 0))


@contextlib.contextmanager
def stage(text: str) -> Iterator[None]:
    """``text`` is what the run is doing inside the block (e.g. reading data and
    preparing a model, which no bar counts)."""
    with STATUS.lock:
        before, STATUS.stage = STATUS.stage, text
    try:
        yield
    finally:
        with STATUS.lock:
            STATUS.stage = before


def interval() -> float:
    """Seconds between a log's progress lines (``FAITHBENCH_PROGRESS_EVERY``, default
    ``EVERY_S``)."""
    try:
        return max(0.05, float(os.environ.get(EVERY_ENV, EVERY_S)))
    except ValueError:
        return EVERY_S


@contextlib.contextmanager
def heartbeat(show: bool = True, stream=None) -> Iterator[None]:
    """Inside the block, where no bar is drawn (``shown`` is False: stderr is a log) and
    ``show`` allows it, a line ``progress 0:01:20: units 45/180 (25%); explain lime
    320/1,821`` every ``interval()`` seconds while something is under way."""
    if not show or shown(True):
        yield
        return
    out = stream or sys.stderr
    start, stop = time.monotonic(), threading.Event()

    def beat() -> None:
        while not stop.wait(interval()):
            line = STATUS.line()
            if line:
                elapsed = time.strftime("%H:%M:%S", time.gmtime(time.monotonic() - start))
                try:
                    print(f"progress {elapsed}: {line}", file=out, flush=True)
                except (OSError, ValueError):  # the stream went away (a closed pipe)
                    return

    thread = threading.Thread(target=beat, name="faithbench-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=1.0)


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
        STATUS.units = (self.n, self.total)
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
        STATUS.units = (self.n, self.total)
        if self.bar is not None:
            if failed:
                self.bar.set_postfix_str(f"{self.failed} failed", refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        STATUS.units = None
        if self.bar is not None:
            self.bar.close()
            self.bar = None
