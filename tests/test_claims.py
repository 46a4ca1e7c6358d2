"""Two runs of one plugin into one ``--out`` at the same time: each unit is computed
once, the second run waits for the first and takes its results, and a run killed
while it holds a claim leaves nothing that blocks the next. Before: both computed
every unit, and the duplicate rows left the explainer's units stuck for good."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from benchmark.core.records import read_results
from benchmark.plan import RunConfig
from benchmark.runner import run
from leaderboard.entry import read_entries

pytestmark = pytest.mark.usefixtures("one_thread")
METRICS = ("comprehensiveness", "flip_rate")

SLOW = '''
import time
from benchmark.core.api import ExplainerSpec


class Slow:
    spec = ExplainerSpec(name="slow_claims", version="1")

    def explain(self, model, batch, target, *, rng):
        time.sleep(0.4)
        return batch.ids.float()


EXPLAINER = Slow()
'''

RUN = '''
import json, logging, sys
logging.basicConfig(level=logging.INFO)
from benchmark.plan import RunConfig
from benchmark.runner import run
s = run(RunConfig(out=sys.argv[1], explainers=(sys.argv[2],), metrics=METRICS, limit=24,
                  batch_size=8, progress=False))
print(json.dumps({"computed": s.computed, "skipped": s.skipped, "failures": len(s.failures)}))
'''.replace("METRICS", repr(METRICS))


@pytest.fixture
def slow_plugin(tmp_path) -> str:
    path = tmp_path / "slow_claims.py"
    path.write_text(textwrap.dedent(SLOW))
    return str(path)


def start(out: Path, plugin: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RUN, str(out), plugin], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})


def wait_for_claim(out: Path, timeout: float = 120.0) -> None:
    """Until some process holds a claim under ``out`` (a lock we cannot take)."""
    import fcntl

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for lock in (out / "claims").glob("*.lock") if (out / "claims").exists() else ():
            with open(lock, "a") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return
        time.sleep(0.05)
    raise AssertionError("no claim was taken")


def unit_keys(out: Path) -> list[str]:
    return [r.key for r in read_results(out / "results.jsonl")]


def test_concurrent_runs_compute_each_unit_once(tmp_path, slow_plugin, synthetic_ready):
    out = tmp_path / "out"
    first = start(out, slow_plugin)
    wait_for_claim(out)
    second = start(out, slow_plugin)
    answers, logs = [], []
    for p in (first, second):
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr
        answers.append(json.loads(stdout.strip().splitlines()[-1]))
        logs.append(stderr)
    assert answers[0] == {"computed": 2, "skipped": 0, "failures": 0}
    assert answers[1] == {"computed": 0, "skipped": 2, "failures": 0}
    assert f"waiting for another faithbench process (pid {first.pid} on" in logs[1]
    keys = unit_keys(out)
    assert len(keys) == len(set(keys)) == len(METRICS)
    names = [e.name for e in read_entries(out / "leaderboard")]
    assert names == ["slow_claims"]
    again = run(RunConfig(out=str(out), explainers=(slow_plugin,), metrics=METRICS, limit=24,
                          batch_size=8, progress=False))
    assert (again.computed, again.skipped) == (0, 2)


def test_a_run_killed_while_holding_a_claim_blocks_nothing(tmp_path, slow_plugin,
                                                          synthetic_ready):
    out = tmp_path / "out"
    doomed = start(out, slow_plugin)
    wait_for_claim(out)
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=60)
    start_s = time.perf_counter()
    summary = run(RunConfig(out=str(out), explainers=(slow_plugin,), metrics=METRICS, limit=24,
                            batch_size=8, progress=False))
    assert summary.computed == 2 and not summary.failures
    assert time.perf_counter() - start_s < 120
    keys = unit_keys(out)
    assert len(keys) == len(set(keys)) == len(METRICS)
