"""Two runs of one plugin into one ``--out`` at the same time: each unit is computed
once, the second run waits for the first and takes its results, and a run killed
while it holds a claim leaves nothing that blocks the next. Before: both computed
every unit, and the duplicate rows left the explainer's units stuck for good.

The plugin's ``explain`` blocks until the test creates a release file, so the first
run is mid-computation while the second starts, whatever the machine's speed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from faithbench.benchmark.core.records import read_results
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import run
from faithbench.leaderboard.entry import read_entries

pytestmark = pytest.mark.usefixtures("one_thread")
METRICS = ("comprehensiveness", "flip_rate")
WAITING = "waiting for another faithbench process"

BLOCKING = '''
import os, time
from faithbench.benchmark.core.api import ExplainerSpec


class Blocking:
    spec = ExplainerSpec(name="slow_claims", version="1")

    def explain(self, model, batch, target, *, rng):
        end = time.monotonic() + 300
        while not os.path.exists(RELEASE) and time.monotonic() < end:
            time.sleep(0.02)
        return batch.ids.float()


EXPLAINER = Blocking()
'''

RUN = '''
import json, logging, sys
logging.basicConfig(level=logging.INFO)
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import run
s = run(RunConfig(out=sys.argv[1], explainers=(sys.argv[2],), metrics=METRICS, limit=24,
                  batch_size=8, progress=False, time_budget_s=None))
print(json.dumps({"computed": s.computed, "skipped": s.skipped, "failures": len(s.failures)}))
'''.replace("METRICS", repr(METRICS))


def config(out: Path, plugin: str) -> RunConfig:
    return RunConfig(out=str(out), explainers=(plugin,), metrics=METRICS, limit=24, batch_size=8,
                     progress=False, time_budget_s=None)


@pytest.fixture
def plugin(tmp_path) -> tuple[str, Path]:
    """A plugin file whose explain waits for the returned release path to exist."""
    release = tmp_path / "release"
    path = tmp_path / "slow_claims.py"
    path.write_text(textwrap.dedent(BLOCKING).replace("RELEASE", repr(str(release))))
    return str(path), release


class Child:
    """``run`` in another process, its log lines read as they come."""

    def __init__(self, out: Path, plugin: str):
        self.proc = subprocess.Popen([sys.executable, "-c", RUN, str(out), plugin], text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, "OMP_NUM_THREADS": "1"})
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.log.append(line)

    def says(self, text: str, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.proc.poll() is None:
            if any(text in line for line in self.log):
                return True
            time.sleep(0.05)
        return any(text in line for line in self.log)

    def finish(self) -> dict:
        stdout = self.proc.stdout.read()
        self.proc.wait(timeout=600)
        self._reader.join(timeout=10)
        assert self.proc.returncode == 0, "".join(self.log)
        return json.loads(stdout.strip().splitlines()[-1])


def holds_claim(out: Path, pid: int, timeout: float) -> bool:
    """Whether process ``pid`` takes a claim under ``out`` within ``timeout`` seconds (a
    holder writes its pid into the lock file; reading it takes no lock)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        locks = (out / "claims").glob("*.lock") if (out / "claims").is_dir() else ()
        if any(lock.read_text().startswith(f"pid {pid} ") for lock in locks):
            return True
        time.sleep(0.05)
    return False


def unit_keys(out: Path) -> list[str]:
    return [r.key for r in read_results(out / "results.jsonl")]


def test_concurrent_runs_compute_each_unit_once(tmp_path, plugin, synthetic_ready):
    path, release = plugin
    out = tmp_path / "out"
    first = Child(out, path)
    holds_claim(out, first.proc.pid, timeout=60)  # without claims: by then it is explaining
    second = Child(out, path)
    second.says(WAITING, timeout=60)  # without claims: by then it is explaining too
    release.touch()
    answers = [first.finish(), second.finish()]
    assert answers == [{"computed": 2, "skipped": 0, "failures": 0},
                       {"computed": 0, "skipped": 2, "failures": 0}]
    waits = [line for line in second.log if WAITING in line and "slow_claims@1" in line]
    assert len(waits) == 1 and f"(pid {first.proc.pid} on " in waits[0]
    keys = unit_keys(out)
    assert len(keys) == len(set(keys)) == len(METRICS)
    for r in read_results(out / "results.jsonl"):  # per-example files whole: 24 rows each
        assert len((out / r.per_example_file).read_text().splitlines()) == 24
    assert [e.name for e in read_entries(out / "leaderboard")] == ["slow_claims"]
    again = run(config(out, path))
    assert (again.computed, again.skipped, again.failures) == (0, 2, [])


def test_a_run_killed_while_holding_a_claim_blocks_nothing(tmp_path, plugin, synthetic_ready):
    path, release = plugin
    out = tmp_path / "out"
    doomed = Child(out, path)
    assert holds_claim(out, doomed.proc.pid, timeout=120), "".join(doomed.log)
    doomed.proc.send_signal(signal.SIGKILL)
    doomed.proc.wait(timeout=60)
    release.touch()
    start_s = time.perf_counter()
    summary = run(config(out, path))
    assert (summary.computed, summary.skipped, summary.failures) == (2, 0, [])
    assert time.perf_counter() - start_s < 120
    keys = unit_keys(out)
    assert len(keys) == len(set(keys)) == len(METRICS)


def test_a_forked_child_does_not_keep_its_parents_claims(tmp_path):
    """A claim's lock lasts while any descriptor of it is open: a child forked while the
    claim is held (a pool worker) closes its copy, so the claim ends with its holder even
    when the child lives on (as orphaned workers of a kill -9'd run did)."""
    import fcntl
    import multiprocessing

    from faithbench.benchmark.core.claims import claim

    ctx = multiprocessing.get_context("fork")
    release, started = ctx.Event(), ctx.Event()

    def child():
        started.set()
        release.wait(30)

    with claim(tmp_path, "k", "a test unit"):
        worker = ctx.Process(target=child)
        worker.start()
        assert started.wait(30)
    try:  # the parent let go; the child still runs: the lock must be free
        fd = os.open(tmp_path / "claims" / "k.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError if kept
        finally:
            os.close(fd)
    finally:
        release.set()
        worker.join(30)
