"""Output for a terminal and for a log: every table printed by default fits 120 columns
(explainers by name; ``--full-ids`` for the ids), ``leaderboard --published`` has one
row per explainer, and where stderr is not a terminal a plain progress line comes at
least every ``FAITHBENCH_PROGRESS_EVERY`` seconds and stdout is flushed line by line,
so a killed run keeps what it printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from faithbench.benchmark.cli import main
from faithbench.leaderboard.release import RELEASES

pytestmark = pytest.mark.usefixtures("one_thread")
FAST = ["--batch-size", "8", "--no-progress"]
WIDTH = 120
# a plugin that takes its time on batches bigger than validation's 12 examples (so
# `submit` checks it quickly, then explains slowly); its scores depend on the row only
SLOW = '''
import time
from faithbench.api import ExplainerSpec
class Slow:
    spec = ExplainerSpec(name="slow", version="1")
    def explain(self, model, batch, target, *, rng):
        time.sleep({seconds} if len(batch) > {small} else 0)
        return batch.ids.float()
EXPLAINER = Slow()
'''


def widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


@pytest.fixture(scope="module")
def run_out(tmp_path_factory, synthetic_ready):
    out = tmp_path_factory.mktemp("wide") / "run"
    return out


def test_every_default_table_fits_120_columns(run_out, capsys):
    """The run with every reference explainer and default metric (explainer ids up to
    76 characters, 12 metrics) and the views of its entries."""
    assert main(["run", "--out", str(run_out), "--limit", "12", *FAST]) == 0
    printed = {"run": capsys.readouterr().out}
    board = str(run_out / "leaderboard")
    views = {"leaderboard": ["leaderboard", "--entries", board],
             "wide": ["leaderboard", "--entries", board, "--wide"],
             "cost": ["leaderboard", "--entries", board, "--cost"],
             "compare": ["compare", "lime", "integrated_gradients", "--entries", board],
             "list": ["list"]}
    for name, argv in views.items():
        assert main(argv) == 0, name
        printed[name] = capsys.readouterr().out
    # list's last column is the canonical id, kept whole so it can be copied: only it
    # may run past the width (the longest, F-Fidelity's, is 170 characters)
    ids = printed.pop("list")
    for line in ids.splitlines():
        assert len(line.rsplit("  ", 1)[0]) <= WIDTH, line
    for name, text in printed.items():
        assert widest(text) <= WIDTH, (name, max(text.splitlines(), key=len))
    # the summary's matrix names explainers, in blocks that each repeat them
    assert "integrated_gradients[baseline=" not in printed["run"]
    assert printed["run"].count("\nexplainer ") >= 4 and "| " not in printed["run"]
    assert main(["leaderboard", "--entries", board, "--wide", "--full-ids"]) == 0
    assert "integrated_gradients[baseline=baseline_id" in capsys.readouterr().out


def test_the_published_board_has_one_row_per_explainer(capsys):
    if not any(RELEASES.glob("v*/manifest.json")):
        pytest.skip("no release shipped yet")
    assert main(["leaderboard", "--published", "--task", "sentiment@1"]) == 0
    text = capsys.readouterr().out
    assert widest(text) <= WIDTH
    blocks = [b for b in text.split("\n\n") if b.startswith("explainer ")]
    firsts = [line.split()[0] for line in blocks[0].splitlines()[2:]]
    assert len(firsts) == len(set(firsts)) >= 15  # one row per explainer, every reference
    assert all([line.split()[0] for line in b.splitlines()[2:]] == firsts for b in blocks)
    assert main(["leaderboard", "--published", "--task", "sentiment@1", "--metric",
                 "comprehensiveness"]) == 0  # its rankings: one row per explainer each
    one = capsys.readouterr().out
    assert widest(one) <= WIDTH
    rows = [line.split() for line in one.split("\n\n")[0].splitlines()[2:]]
    by_metric: dict[str, list[str]] = {}
    for row in rows:  # the explainer stands before its entry id (8 hex digits)
        at = next(i for i, cell in enumerate(row) if re.fullmatch("[0-9a-f]{8}", cell))
        by_metric.setdefault(row[0], []).append(row[at - 1])
    assert by_metric and all(sorted(v) == sorted(firsts) for v in by_metric.values())


def test_a_log_gets_a_progress_line_at_least_every_interval(tmp_path, capfd, monkeypatch):
    """stderr is not a terminal here: no bar, but a plain line every 0.2 s while the run
    is under way: what it does (the overall units, the explainer), how far, elapsed."""
    plugin = tmp_path / "slow.py"
    plugin.write_text(SLOW.format(seconds=0.15, small=0))
    monkeypatch.setenv("FAITHBENCH_PROGRESS_EVERY", "0.2")
    monkeypatch.delenv("FAITHBENCH_PROGRESS", raising=False)
    assert main(["run", "--out", str(tmp_path / "o"), "--explainers", str(plugin),
                 "--metrics", "comprehensiveness", "--limit", "24", "--batch-size", "2",
                 "--time-budget", "30"]) == 0
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("progress ")]
    assert len(lines) >= 5 and "\r" not in err
    pattern = re.compile(r"progress \d\d:\d\d:\d\d: units 0/1 \(0%\); explain slow (\d+)/24$")
    counts = [int(m.group(1)) for m in map(pattern.match, lines) if m]
    assert counts == sorted(counts) and len(set(counts)) >= 3, lines  # it advances
    monkeypatch.setenv("FAITHBENCH_PROGRESS_EVERY", "0.05")
    assert main(["run", "--out", str(tmp_path / "p"), "--explainers", str(plugin),
                 "--metrics", "comprehensiveness", "--limit", "8", "--time-budget", "30",
                 "--no-progress"]) == 0
    assert "progress " not in capfd.readouterr().err  # --no-progress: no lines either


def test_a_killed_process_keeps_what_it_printed(tmp_path, synthetic_ready):
    """stdout to a file (nohup, tee): after ``main`` printed a table (a few hundred bytes,
    far less than a block), the text is in the file while the process still runs, and
    after it is killed (block-buffered, it was lost)."""
    assert main(["run", "--out", str(tmp_path / "r"), "--explainers", "random", "--metrics",
                 "sufficiency", "--limit", "4", *FAST]) == 0
    log = tmp_path / "out.log"
    code = ("import time; from faithbench.benchmark.cli import main; "
            f"main(['leaderboard', '--entries', {str(tmp_path / 'r' / 'leaderboard')!r}]); "
            "time.sleep(120)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # Python's own
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out,
                                stderr=subprocess.DEVNULL, cwd=tmp_path, env=env)
        try:
            deadline = time.monotonic() + 30
            while "sufficiency" not in log.read_text() and time.monotonic() < deadline:
                assert proc.poll() is None
                time.sleep(0.2)
        finally:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "sufficiency ↓" in text and "random" in text and len(text.encode()) < 4096


def test_run_help_fits_and_every_verb_prints_within_width(capsys):
    for verb in ("run", "submit", "leaderboard"):
        with pytest.raises(SystemExit):
            main([verb, "--help"])
        assert widest(capsys.readouterr().out) <= WIDTH


def test_the_shipped_release_renders_within_width_in_every_task(capsys):
    if not any(RELEASES.glob("v*/manifest.json")):
        pytest.skip("no release shipped yet")
    assert main(["leaderboard", "--published"]) == 0
    assert widest(capsys.readouterr().out) <= WIDTH
    assert main(["leaderboard", "--published", "--cost"]) == 0
    assert widest(capsys.readouterr().out) <= WIDTH


def test_the_published_note_says_how_to_rank_yourself_in_lines_that_fit(capsys):
    """Under a published table: ``submit --published`` where the release ships the
    suite's models, the rerun command (cut into shell lines) where it does not."""
    from faithbench.leaderboard.release import read_release

    if not any(RELEASES.glob("v*/manifest.json")):
        pytest.skip("no release shipped yet")
    release = read_release()
    for suite in release.manifest["suites"]:
        name = suite["task"].split("[")[0].split("@")[0]
        assert main(["leaderboard", "--published", "--task", suite["task"]]) == 0
        text = capsys.readouterr().out
        assert widest(text) <= WIDTH
        if suite.get("models"):
            assert f"--published --tasks {name}" in " ".join(text.split())
        else:
            assert "faithbench --threads 1 run --tasks " + name in text and " \\\n" in text
