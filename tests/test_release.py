"""Published releases: summary files written from entries read back to the same ranked
rows, shown beside a user's own entries (never ranked against them), and the release
shipped with the package readable and within its size limit."""

from __future__ import annotations

import json
import shlex

import pytest

from faithbench.benchmark.cli import main
from faithbench.benchmark.core.errors import InputError
from faithbench.leaderboard.cost import explain_costs, run_costs
from faithbench.leaderboard.entry import read_entries
from faithbench.leaderboard.rank import rank
from faithbench.leaderboard.release import MAX_BYTES, RELEASES, read_release, write_release

FAST = ["--batch-size", "16", "--no-progress"]


@pytest.fixture(scope="module")
def board(tmp_path_factory, isolated_cache):
    out = tmp_path_factory.mktemp("release") / "res"
    assert main(["run", "--out", str(out), "--explainers", "attention", "gradient", "--metrics",
                 "comprehensiveness", "token_f1", "--limit", "40", *FAST]) == 0
    return out / "leaderboard"


def test_a_release_reads_back_to_the_ranked_rows_without_per_example_values(board, tmp_path):
    entries = read_entries(board)
    files = write_release(entries, tmp_path / "v9", "v9", commands=["faithbench run ..."])
    assert sorted(f.name for f in files) == ["costs.jsonl", "curves.jsonl", "entries.jsonl",
                                             "manifest.json", "ranked.jsonl"]
    release = read_release(tmp_path / "v9")
    assert release.rows == rank(entries)  # every field, to the last bit
    want = explain_costs(entries)
    assert release.costs == want and all(c.seconds is not None for c in want.values())
    assert release.run_costs == run_costs(entries, short=False)  # per explainer, with share
    assert sum(c.share for c in release.run_costs) == pytest.approx(1.0)
    assert release.manifest["commands"] == ["faithbench run ..."]
    [suite] = release.manifest["suites"]
    assert "--limit 40" in suite["rerun"] and "--explainers attention@1 'gradient[norm=l2]@1'" in suite["rerun"]
    text = "".join(f.read_text() for f in files)
    ids = {row["id"] for e in entries for row in e.per_example}
    assert not any(f'"{i}"' in text for i in ids)  # no per-example dump
    assert all(f.stat().st_size < MAX_BYTES for f in files)


def test_the_rerun_command_trains_the_published_models(tmp_path, isolated_cache):
    """A reference run with non-default training (fewer epochs, fewer training rows, a
    model the gate refuses but the run allowed): the release's rerun command, run as
    printed, trains the same checkpoints."""
    ours = tmp_path / "ours"
    assert main(["run", "--out", str(ours), "--explainers", "attention", "--metrics",
                 "comprehensiveness", "--limit", "20", "--epochs", "1", "--train-limit", "300",
                 "--allow-weak-model", *FAST]) == 0
    write_release(read_entries(ours / "leaderboard"), tmp_path / "v9", "v9")
    [suite] = read_release(tmp_path / "v9").manifest["suites"]
    argv = shlex.split(suite["rerun"])
    assert argv[:4] == ["faithbench", "--threads", "1", "run"] and "--data-dir" not in argv
    assert "--epochs 1" in suite["rerun"] and "--train-limit 300" in suite["rerun"]
    assert "--allow-weak-model" in suite["rerun"]
    theirs = tmp_path / "theirs"
    argv[argv.index("--out") + 1] = str(theirs)
    assert main([*argv[3:], *FAST]) == 0

    def checkpoints(folder):
        return {r.provenance.checkpoint for e in read_entries(folder / "leaderboard")
                for r in e.results}
    assert checkpoints(theirs) == checkpoints(ours)


def test_published_rows_sit_beside_yours_in_their_own_suites(board, tmp_path, capsys):
    write_release(read_entries(board), tmp_path / "v9", "v9", commands=["faithbench run ..."])
    mine = tmp_path / "mine"
    assert main(["run", "--out", str(mine), "--explainers", "random", "--metrics",
                 "comprehensiveness", "--limit", "40", *FAST]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--published", str(tmp_path / "v9"), "--entries",
                 str(mine / "leaderboard"), "--metric", "comprehensiveness"]) == 0
    out = capsys.readouterr().out
    assert "published v9: test split, first 40 examples" in out
    assert "yours: test split, first 40 examples" in out  # same selection, its own suite
    ranks = [line.split() for line in out.splitlines() if "comprehensiveness ↑" in line]
    assert [r[r.index("↑") + 1] for r in ranks] == ["1", "2", "1"]  # random ranks alone
    assert "faithbench --threads 1 run --tasks synthetic" in out
    assert main(["leaderboard", "--published", str(tmp_path / "v9"), "--format", "json",
                 "--entries", str(tmp_path / "none")]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 4  # 2 explainers x 2 metrics
    assert main(["site", "--published", str(tmp_path / "v9"), "--entries",
                 str(mine / "leaderboard"), "--out", str(tmp_path / "site")]) == 0
    pages = {p.name: p.read_text() for p in (tmp_path / "site").glob("*.html")}
    assert len(pages) == 3 and all("Published release v9" in t for t in pages.values())
    assert "How the results were computed</h2><pre>faithbench run ..." in pages["index.html"]


def test_a_broken_release_is_named(tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(InputError, match="ranked.jsonl is missing"):
        read_release(tmp_path)


def test_the_shipped_release_reads_and_keeps_its_limits():
    shipped = sorted(p for p in RELEASES.glob("v*") if p.is_dir())
    if not shipped:
        pytest.skip("no release shipped yet")
    release = read_release()
    assert release.rows and release.manifest["version"] == shipped[-1].name
    assert all(f.stat().st_size < MAX_BYTES for p in shipped for f in p.iterdir())
    for suite in release.manifest["suites"]:
        assert suite["rerun"].startswith("faithbench --threads 1 run")
        # only explainers a run can rerun: no alignment read from a file (eflomal, ...)
        assert "eflomal" not in suite["rerun"] and "+intersect" not in suite["rerun"]


def test_agreement_records_ship_in_a_release_and_reach_its_site(board, tmp_path):
    from faithbench.benchmark.core.records import read_agreements

    run = board.parent
    assert main(["agreement", "--task", "synthetic", "--out", str(run), "--limit", "40",
                 "--explainers", "attention", "gradient", "--no-progress"]) == 0
    assert main(["release", "--entries", str(board), "--agreement", str(run),
                 "--version", "v9", "--out", str(tmp_path / "v9")]) == 0
    shipped = read_release(tmp_path / "v9").agreement
    assert shipped == read_agreements(run / "agreement.jsonl")
    assert main(["site", "--published", str(tmp_path / "v9"), "--out",
                 str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "agreement.html").read_text()
    row = shipped[0].rows[0]
    assert f"<td>{row['a']}</td><td>{row['b']}</td>" in page


def test_a_release_carries_the_suites_of_an_earlier_one_it_does_not_rerun(board, tmp_path,
                                                                          capsys):
    """v10 is written from entries of another task, carrying v9: v9's suite comes along
    as it was (rows, entries, curves, costs), marked as v9's; a task v10 has is never
    carried over it."""
    from faithbench.tasks.synthetic import generate

    write_release(read_entries(board), tmp_path / "v9", "v9", commands=["faithbench run a"])
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": " ".join(e.tokens), "y": e.label}) + "\n"
                            for e in generate("train", 600, 0)))
    other = tmp_path / "other"
    assert main(["run", "--tasks", "text", "--dataset", str(data), "--text-column", "text",
                 "--label-column", "y", "--explainers", "random", "--metrics",
                 "comprehensiveness", "--limit", "20", "--epochs", "3", "--out", str(other),
                 *FAST]) == 0
    assert main(["release", "--entries", str(other / "leaderboard"), "--version", "v10",
                 "--out", str(tmp_path / "v10"), "--carry", str(tmp_path / "v9")]) == 0
    old, new = read_release(tmp_path / "v9"), read_release(tmp_path / "v10")
    carried = [s for s in new.manifest["suites"] if s.get("from") == "v9"]
    assert [s["task"] for s in carried] == [s["task"] for s in old.manifest["suites"]]
    assert [r for r in new.rows if r.task.startswith("synthetic")] == old.rows
    assert {i: d for i, d in new.entries.items() if i in old.entries} == old.entries
    assert new.manifest["carried"] == {"from": "v9", "commands": ["faithbench run a"]}
    assert {r.task for r in new.rows} == {*(r.task for r in old.rows),
                                          *(t for e in read_entries(other / "leaderboard")
                                            for t in e.suite)}
    again = tmp_path / "v11"  # carrying v10 over v10's own tasks carries nothing
    assert main(["release", "--entries", str(other / "leaderboard"), str(board),
                 "--version", "v11", "--out", str(again), "--carry", str(tmp_path / "v10")]) == 0
    assert not any(s.get("from") for s in read_release(again).manifest["suites"])
    chain = tmp_path / "v12"  # carried again: a suite keeps the release it comes from
    assert main(["release", "--entries", str(other / "leaderboard"), "--version", "v12",
                 "--out", str(chain), "--carry", str(tmp_path / "v10")]) == 0
    twice = read_release(chain).manifest
    assert {s.get("from") for s in twice["suites"] if s["task"].startswith("synthetic")} == {"v9"}
    assert twice["carried"]["carried"] == {"from": "v9", "commands": ["faithbench run a"]}
