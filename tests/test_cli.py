"""The plugin and leaderboard verbs through the CLI: validate, submit, leaderboard,
compare, list; exit codes 0 / 1 / 2 as documented."""

from pathlib import Path

import pytest

from benchmark.cli import build_parser, main
from leaderboard.entry import read_entries

PLUGINS = Path(__file__).parent / "plugins"
TEMPLATE = Path(__file__).resolve().parent.parent / "submissions" / "TEMPLATE.py"
FAST = ["--limit", "12", "--batch-size", "6", "--no-progress"]


def test_every_verb_has_an_epilog_with_examples():
    parser = build_parser()
    verbs = parser._subparsers._group_actions[0].choices
    assert set(verbs) == {"run", "explain", "score", "predict", "validate", "submit",
                          "leaderboard", "compare", "list", "agreement", "align", "roar"}
    for name, sub in verbs.items():
        assert "faithbench " + name in (sub.epilog or ""), name


def test_validate_template_passes_and_broken_fails(synthetic_ready, capsys):
    assert main(["validate", str(TEMPLATE), "--no-progress"]) == 0
    out = capsys.readouterr().out
    for check in ("load", "spec", "shape_and_finite", "determinism", "alone_vs_batch",
                  "time_per_example"):
        assert check in out
    assert "FAIL" not in out
    assert main(["validate", str(PLUGINS / "wrong_shape.py"), "--no-progress"]) == 1
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert "FAIL" in lines["shape_and_finite"] and "expected (B, T)" in lines["shape_and_finite"]
    assert "PASS" in lines["load"] and "PASS" in lines["spec"]


def test_validate_unknown_plugin_fails(capsys):
    assert main(["validate", "no_such_module_xyz", "--no-progress"]) == 1
    assert "no_such_module_xyz" in capsys.readouterr().out


def test_submit_leaderboard_compare(tmp_path, synthetic_ready, capsys):
    out = tmp_path / "res"
    assert main(["run", "--out", str(out), "--explainers", "attention", "random",
                 "--metrics", "comprehensiveness", "token_f1", *FAST]) == 0
    assert main(["submit", str(TEMPLATE), "--out", str(out), *FAST]) == 0
    entries = read_entries(out / "leaderboard")
    assert sorted(e.name for e in entries) == ["attention", "my_explainer", "random"]
    capsys.readouterr()
    assert main(["leaderboard", "--entries", str(out / "leaderboard"), "--metric",
                 "comprehensiveness", "--format", "csv"]) == 0
    table = capsys.readouterr().out
    assert "my_explainer" in table and "attention" in table and "random" in table
    assert main(["compare", "attention", "random", "--entries", str(out / "leaderboard")]) == 0
    cmp = capsys.readouterr().out
    assert "comprehensiveness" in cmp and "token_f1" in cmp
    # a broken submission is refused before it runs, and adds no entry
    assert main(["submit", str(PLUGINS / "returns_nan.py"), "--out", str(out), *FAST]) == 1
    assert len(read_entries(out / "leaderboard")) == 3


def test_list_shows_canonical_ids(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "gradient[norm=l2]@1" in out
    assert "comprehensiveness[bins=0.01,0.05,0.1,0.2,0.5;eraser=delete;rounding=ceil]@1" in out
    assert "sentiment@1" in out


@pytest.mark.parametrize("argv", [["leaderboard", "--entries", "/nonexistent/x"],
                                  ["compare", "a", "b", "--entries", "/nonexistent/x"]])
def test_leaderboard_without_entries_is_an_input_error(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "error:" in err
