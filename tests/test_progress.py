"""A run's progress: one overall line (units done of the run's total, with tqdm's rate
and time remaining) on a terminal; nothing at all when stderr is not a terminal (a log
file, CI, a pipe), unless ``FAITHBENCH_PROGRESS=1`` forces it; ``--no-progress`` hides
everything. Before: every explain and score step drew its own bar, whatever stderr
was, so a log file filled with carriage returns, and no line said how far the run was.
"""

from __future__ import annotations

import re

import pytest

from faithbench.benchmark.cli import main
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import run

pytestmark = pytest.mark.usefixtures("one_thread")
FAST = {"limit": 24, "batch_size": 8}
OVERALL = re.compile(r"units:\s+\d+%\|[^|\r\n]*\|\s*(\d+)/(\d+)")


def overall(err: str) -> list[tuple[int, int]]:
    """(n, total) of every state of the overall line written to ``err``."""
    return [(int(n), int(total)) for n, total in OVERALL.findall(err)]


def bar_text(err: str) -> bool:
    return "\r" in err or "%|" in err or "it/s" in err or "s/it" in err


def test_quiet_when_stderr_is_not_a_terminal(tmp_path, synthetic_ready, capfd, monkeypatch):
    monkeypatch.delenv("FAITHBENCH_PROGRESS", raising=False)
    summary = run(RunConfig(out=str(tmp_path / "out"), explainers=("gradient",),
                            metrics=("comprehensiveness", "sufficiency"), **FAST))
    assert summary.computed == 2  # progress=True, the default: stderr decides
    err = capfd.readouterr().err
    assert not bar_text(err), err[-2000:]


def test_cli_quiet_when_stderr_is_not_a_terminal(tmp_path, synthetic_ready, capfd,
                                                  monkeypatch):
    monkeypatch.delenv("FAITHBENCH_PROGRESS", raising=False)
    assert main(["--threads", "1", "run", "--explainers", "attention", "--metrics",
                 "comprehensiveness", "--limit", "24", "--batch-size", "8",
                 "--out", str(tmp_path / "out")]) == 0
    err = capfd.readouterr().err
    assert not bar_text(err), err[-2000:]


def test_forced_progress_counts_every_unit(tmp_path, synthetic_ready, capfd, monkeypatch):
    monkeypatch.setenv("FAITHBENCH_PROGRESS", "1")
    config = RunConfig(out=str(tmp_path / "out"), explainers=("attention", "gradient"),
                       metrics=("comprehensiveness", "sufficiency"), **FAST)
    summary = run(config)
    assert summary.computed == 4
    states = overall(capfd.readouterr().err)
    assert states, "no overall progress line"
    assert {total for _, total in states} == {4}  # models x explainers x metrics
    assert states[0][0] == 0 and states[-1] == (4, 4)
    assert [n for n, _ in states] == sorted(n for n, _ in states)
    # resumed: the units already done count as done from the start
    again = run(config)
    assert (again.computed, again.skipped) == (0, 4)
    states = overall(capfd.readouterr().err)
    assert states and set(states) == {(4, 4)}


def test_no_progress_hides_everything_even_when_forced(tmp_path, synthetic_ready, capfd,
                                                       monkeypatch):
    monkeypatch.setenv("FAITHBENCH_PROGRESS", "1")
    assert main(["--threads", "1", "run", "--explainers", "attention", "--metrics",
                 "comprehensiveness", "--limit", "24", "--batch-size", "8", "--no-progress",
                 "--out", str(tmp_path / "out")]) == 0
    err = capfd.readouterr().err
    assert not bar_text(err) and not overall(err), err[-2000:]


def test_help_documents_the_switch(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "FAITHBENCH_PROGRESS=1" in text
    assert "recompute the units this command selects" in text
