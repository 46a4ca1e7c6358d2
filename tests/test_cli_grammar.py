"""One CLI grammar: every option has help that states its default (the parser walked
here), the global options work after the verb too, the top-level help is for users,
every name a user types gets "did you mean", a data folder without the task's files is
an error listing them, and ``submit`` prepares only the models its tasks need."""

from __future__ import annotations

import argparse
import csv

import pytest

from faithbench.benchmark.cli import build_parser, main
from faithbench.tasks.synthetic import generate

pytestmark = pytest.mark.usefixtures("one_thread")
FAST = ["--batch-size", "16", "--no-progress"]


def actions():
    """(verb, action) of every option and positional of every verb, and the top level's."""
    parser = build_parser()
    out = [("faithbench", a) for a in parser._actions]
    for sub in (a for a in parser._actions if isinstance(a, argparse._SubParsersAction)):
        out += [(verb, a) for verb, p in sub.choices.items() for a in p._actions]
    return [(v, a) for v, a in out if not isinstance(a, (argparse._HelpAction,
                                                         argparse._SubParsersAction))]


def test_every_option_has_help_stating_its_default():
    """Or that it is required (alone, with another option, or one of a group)."""
    missing, silent = [], []
    for verb, a in actions():
        name = f"{verb} {'/'.join(a.option_strings) or a.dest}"
        if not (a.help or "").strip():
            missing.append(name)
        flag = isinstance(a, (argparse._StoreTrueAction, argparse._StoreConstAction))
        said = "default" in a.help.lower() or "required" in a.help.lower()
        if a.option_strings and not flag and not a.required and not said:
            silent.append(name)
    assert not missing, f"options without help: {missing}"
    assert not silent, f"options whose help states no default: {silent}"
    assert len(actions()) > 300  # every verb walked


def test_global_options_are_taken_after_the_verb_too(tmp_path):
    parser = build_parser()
    assert parser.parse_args(["--threads", "3", "leaderboard"]).threads == 3
    assert parser.parse_args(["leaderboard", "--threads", "2", "-v"]).threads == 2
    late = parser.parse_args(["leaderboard", "--verbose"])
    assert late.verbose and parser.parse_args(["leaderboard"]).threads is None
    assert main(["run", "--threads", "1", "--out", str(tmp_path / "o"), "--explainers",
                 "random", "--metrics", "sufficiency", "--limit", "4", *FAST]) == 0


def test_the_top_level_help_is_for_users(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "``" not in text and "submit an explainer" in text and "your own data" in text
    assert "faithbench submit my_explainer.py --published" in text
    assert "Exit status: 0 ok; 1 an explainer plugin failed" in text


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    out = tmp_path_factory.mktemp("names") / "run"
    assert main(["run", "--out", str(out), "--explainers", "gradient", "random", "--metrics",
                 "comprehensiveness", "sufficiency", "--limit", "8", *FAST]) == 0
    return str(out / "leaderboard")


@pytest.mark.parametrize("argv, needle", [
    (["leaderboard", "--task", "synthetc"], "did you mean 'synthetic'"),
    (["leaderboard", "--metric", "comprehensivness"], "did you mean 'comprehensiveness'"),
    (["leaderboard", "--wide", "--metric", "suficiency"], "did you mean 'sufficiency'"),
    (["leaderboard", "--cost", "--task", "sentimnt"], "unknown task 'sentimnt'"),
    (["compare", "gradiant", "random"], "did you mean 'gradient'"),
    (["compare", "gradient", "random", "--metric", "sufficency"], "did you mean 'sufficiency'"),
    (["compare", "gradient", "random", "--task", "synthetik"], "did you mean 'synthetic'"),
])
def test_every_name_a_user_types_gets_did_you_mean(board, argv, needle, capsys):
    assert main([*argv, "--entries", board]) == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize("argv, needle", [
    (["run", "--tasks", "sentimnet"], "did you mean 'sentiment'"),
    (["run", "--explainers", "lrpp"], "did you mean 'lrp'"),
    (["run", "--metrics", "aopc_mof"], "did you mean 'aopc_morf'"),
    (["meta-eval", "--tasks", "shortcut_singel"], "did you mean 'shortcut_single'"),
    (["agreement", "--task", "nil"], "did you mean 'nli'"),
    (["submit", "my.py"], "no such file: my.py"),
])
def test_names_in_the_run_verbs(argv, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert needle in capsys.readouterr().err


def test_a_data_folder_without_the_tasks_files_lists_them(tmp_path, capsys):
    (tmp_path / "data" / "sst2").mkdir(parents=True)
    (tmp_path / "data" / "sst2" / "test.jsonl").write_text('{"idx": 0, "sentence": "a", '
                                                         '"label": 1}\n')
    assert main(["run", "--tasks", "sentiment", "--data-dir", str(tmp_path / "data"),
                 "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "lacks sst2/validation.jsonl, sst2_phrases/train.jsonl" in err
    assert "reads these JSON Lines files there: sst2/validation.jsonl, sst2/test.jsonl, " \
        "sst2_phrases/train.jsonl" in err and "idx, sentence, label" in err
    assert main(["run", "--tasks", "nli", "--data-dir", str(tmp_path / "none"), "--out",
                 str(tmp_path / "o"), "--no-progress"]) == 2
    assert "does not exist; task nli reads these JSON Lines files there: snli/train.jsonl" \
        in capsys.readouterr().err


def test_submit_prepares_only_the_models_its_tasks_need(tmp_path, monkeypatch):
    """``submit --tasks text`` checks the plugin on the text task's own model; no
    synthetic model is trained beside it (it was, for the checks, before)."""
    from pathlib import Path

    from faithbench import submissions

    cache = tmp_path / "cache"
    monkeypatch.setenv("FAITHBENCH_CACHE", str(cache))
    data = tmp_path / "d.csv"
    with open(data, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["text", "label"])
        writer.writerows((" ".join(e.tokens), e.label) for e in generate("train", 600, 0))
    template = Path(submissions.__file__).resolve().parent / "TEMPLATE.py"
    assert main(["submit", str(template), "--tasks", "text", "--dataset", str(data),
                 "--text-column", "text", "--label-column", "label", "--limit", "20",
                 "--out", str(tmp_path / "o"), "--epochs", "3", *FAST]) == 0
    models = sorted(p.name.split("-")[0] for p in (cache / "models").glob("*.pt"))
    assert models == ["text"]
