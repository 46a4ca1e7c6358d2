"""``run --executor pool``: the same result lines as the in-process run (keys, values
within float32 rounding, per-example rows), on the synthetic task and on a 300-sentence
SST-2 slice; a second run resumes with nothing to do; a driver killed mid-run resumes
without losing or duplicating a unit; a failing plugin is reported and skipped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faithbench.benchmark.cli import main
from faithbench.benchmark.core.records import read_jsonl

# one torch thread here, as in the pool's workers: a matmul split over two threads rounds
# differently, and the explanations are compared bit for bit
pytestmark = pytest.mark.usefixtures("one_thread")

FAST = ["--batch-size", "8", "--no-progress"]
SYNTHETIC = ["--explainers", "attention", "gradient", "occlusion", "random", "--metrics",
             "comprehensiveness", "sufficiency", "flip_rate", "taucorr_loo", "token_f1",
             "--limit", "30", "--seeds", "0", "1", *FAST]


def same_results(a: Path, b: Path, tol: float = 1e-6) -> None:
    """The two folders hold the same units with the same values (up to ``tol``)."""
    ours = {r["key"]: r for r in read_jsonl(a / "results.jsonl")}
    theirs = {r["key"]: r for r in read_jsonl(b / "results.jsonl")}
    assert ours.keys() == theirs.keys() and len(read_jsonl(b / "results.jsonl")) == len(theirs)
    for key, r in ours.items():
        o = theirs[key]
        assert (r["explainer"], r["metric"], r["model_seed"]) == (
            o["explainer"], o["metric"], o["model_seed"])
        assert r["provenance"]["checkpoint"] == o["provenance"]["checkpoint"]
        for field in ("mean", "ci_low", "ci_high"):
            x, y = r["estimate"][field], o["estimate"][field]
            assert (x is None and y is None) or abs(x - y) <= tol, (key, field, x, y)
        rows = read_jsonl(a / r["per_example_file"])
        other = read_jsonl(b / o["per_example_file"])
        assert [x["id"] for x in rows] == [x["id"] for x in other]
        for x, y in zip(rows, other):
            if x.get("value") is None or y.get("value") is None:
                assert x.get("value") == y.get("value")
            else:
                assert abs(x["value"] - y["value"]) <= tol, (key, x["id"])


def test_the_pool_writes_the_in_process_runs_results(tmp_path, synthetic_ready, capsys):
    here, pool = tmp_path / "here", tmp_path / "pool"
    assert main(["run", "--out", str(here), *SYNTHETIC]) == 0
    assert main(["run", "--out", str(pool), "--executor", "pool", "--workers", "2",
                 *SYNTHETIC]) == 0
    same_results(here, pool)
    # the explanations came back into the driver's cache, and the entries were written
    assert sorted(p.name for p in (pool / "explanations").glob("*.jsonl")) == sorted(
        p.name for p in (here / "explanations").glob("*.jsonl"))
    assert len(list((pool / "leaderboard").glob("*/header.json"))) == 4
    capsys.readouterr()
    # a second run finds every unit done: nothing computed, nothing written twice
    assert main(["run", "--out", str(pool), "--executor", "pool", "--workers", "2",
                 *SYNTHETIC]) == 0
    assert "0 units computed, 40 already done" in capsys.readouterr().out
    same_results(here, pool)


def test_explanations_in_chunks_are_those_of_one_process(tmp_path, synthetic_ready,
                                                          monkeypatch, caplog):
    """Explaining in chunks of 2 batches of 4 (30 examples: 4 chunks per explainer and
    model) gives each example the scores it gets in one process, bit for bit, and the
    same results: every explainer chunked, then only the big one (integrated gradients'
    150 passes per example against occlusion's 11 and random's 1)."""
    monkeypatch.setattr("faithbench.benchmark.distributed.CHUNK_BATCHES", 2)
    args = ["--explainers", "occlusion", "integrated_gradients", "random", "--metrics",
            "comprehensiveness", "flip_rate", "--limit", "30", "--seeds", "0", "1",
            "--batch-size", "4", "--no-progress"]
    here = tmp_path / "here"
    assert main(["run", "--out", str(here), *args]) == 0
    for every, plan in ((True, "24 chunk(s) of examples and 0 job(s) of units"),  # 3 x 2 x 4
                        (False, "8 chunk(s) of examples and 4 job(s) of units")):
        pool = tmp_path / f"pool-{every}"
        if every:
            monkeypatch.setattr("faithbench.benchmark.distributed._big", lambda *a: True)
        else:
            monkeypatch.undo()
            monkeypatch.setattr("faithbench.benchmark.distributed.CHUNK_BATCHES", 2)
        caplog.clear()
        with caplog.at_level("INFO", logger="faithbench.benchmark.distributed"):
            assert main(["run", "--out", str(pool), "--executor", "pool", "--workers", "2",
                         *args]) == 0
        assert plan in caplog.text
        for path in sorted((here / "explanations").glob("*.jsonl")):
            mine = [(x["id"], x["scores"], x["target"]) for x in read_jsonl(path)]
            theirs = [(x["id"], x["scores"], x["target"])
                      for x in read_jsonl(pool / "explanations" / path.name)]
            assert mine == theirs, path.name
        same_results(here, pool)


def test_a_failing_plugin_is_reported_and_skipped_on_the_pool(tmp_path, synthetic_ready):
    plugin = tmp_path / "nan_plugin.py"
    plugin.write_text(
        "import torch\n"
        "from faithbench.api import ExplainerSpec\n"
        "class NaNs:\n"
        "    spec = ExplainerSpec(name='nans', version='1')\n"
        "    def explain(self, model, batch, target, *, rng):\n"
        "        return torch.full(batch.ids.shape, float('nan'))\n"
        "EXPLAINER = NaNs()\n")
    out = tmp_path / "out"
    code = main(["run", "--out", str(out), "--executor", "pool", "--workers", "2",
                 "--explainers", "random", str(plugin), "--metrics", "comprehensiveness",
                 "--limit", "16", *FAST])
    assert code == 1  # a plugin failed
    failures = read_jsonl(out / "failures.jsonl")
    assert [f["explainer"] for f in failures] == ["nans@1"] and "NaN" in failures[0]["message"]
    results = read_jsonl(out / "results.jsonl")
    assert [r["explainer"] for r in results] == ["random[distribution=uniform]@1"]


def test_kill_9_of_the_driver_loses_or_duplicates_no_unit(tmp_path):
    env = {**os.environ, "FAITHBENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "faithbench.benchmark.cli", "--threads", "1", "run",
           "--out", str(out), "--executor", "pool", "--workers", "2", "--explainers",
           "attention", "gradient", "occlusion", "random", "gradient_x_input",
           "integrated_gradients", "--metrics", "comprehensiveness", "sufficiency",
           "aopc_morf", "--limit", "60", "--seeds", "0", "1", "--train-limit", "600",
           "--epochs", "2", "--no-progress"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and len(read_jsonl(out / "results.jsonl")) < 4:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = read_jsonl(out / "results.jsonl")
    assert 4 <= len(before) < 2 * 6 * 3, "the run finished before the kill"
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    after = read_jsonl(out / "results.jsonl")
    assert after[: len(before)] == before  # nothing lost or rewritten
    assert len(after) == 2 * 6 * 3 == len({r["key"] for r in after})


def test_fresh_is_refused_on_an_executor(tmp_path, synthetic_ready, capsys):
    code = main(["run", "--out", str(tmp_path), "--executor", "pool", "--fresh",
                 "--explainers", "random", "--limit", "4", *FAST])
    assert code == 2 and "--fresh runs in-process only" in capsys.readouterr().err


def test_an_sst2_slice_on_the_pool_matches_in_process(tmp_path, shared_data):
    """The acceptance check of ``--executor pool`` on real data: 300 SST-2 test
    sentences, a BiLSTM trained on the 6,920 training sentences (2 epochs)."""
    args = ["--tasks", "sentiment", "--data-dir", str(shared_data), "--variant", "sentences",
            "--epochs", "2", "--limit", "300", "--explainers", "attention", "gradient",
            "occlusion", "random", "--metrics", "comprehensiveness", "sufficiency",
            "flip_rate", "token_f1", *FAST]
    here, pool = tmp_path / "here", tmp_path / "pool"
    assert main(["run", "--out", str(here), *args]) == 0
    assert main(["run", "--out", str(pool), "--executor", "pool", "--workers", "2", *args]) == 0
    same_results(here, pool)
