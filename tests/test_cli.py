"""The plugin and leaderboard verbs through the CLI: validate, submit, leaderboard,
compare, list; exit codes 0 / 1 / 2 as documented."""

import json
import random
import time
from pathlib import Path

import pytest

from faithbench import submissions
from faithbench.benchmark.cli import build_parser, main
from faithbench.benchmark.core.api import Example, capabilities
from faithbench.benchmark.core.errors import InputError
from faithbench.leaderboard.entry import read_entries

PLUGINS = Path(__file__).parent / "plugins"
TEMPLATE = Path(__file__).resolve().parent.parent / "submissions" / "TEMPLATE.py"
FAST = ["--limit", "12", "--batch-size", "6", "--no-progress"]


def test_every_verb_has_an_epilog_with_examples():
    parser = build_parser()
    verbs = parser._subparsers._group_actions[0].choices
    assert set(verbs) == {"run", "explain", "score", "predict", "validate", "submit",
                          "leaderboard", "compare", "site", "release", "list", "agreement",
                          "align", "roar", "meta-eval", "debate"}
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


def test_validate_unknown_plugin_is_bad_input(capsys):
    assert main(["validate", "no_such_module_xyz", "--no-progress"]) == 2
    assert "unknown explainer 'no_such_module_xyz'" in capsys.readouterr().err


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
    assert "comprehensiveness[bins=0.01,0.05,0.1,0.2,0.5;eraser=delete;rounding=ceil]@2" in out
    assert "sentiment@1" in out


@pytest.mark.parametrize("argv", [["leaderboard", "--entries", "/nonexistent/x"],
                                  ["compare", "a", "b", "--entries", "/nonexistent/x"]])
def test_leaderboard_without_entries_is_an_input_error(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "error:" in err


# --- seeds, names and parameters checked before any work ----------------------------------


def _parsed_config(argv):
    from faithbench.benchmark.cli.options import config as _config

    return _config(build_parser().parse_args(argv))


@pytest.mark.parametrize("verb", ["run", "roar"])
def test_seed_on_run_and_roar_is_honoured(verb):
    assert _parsed_config([verb, "--seed", "3"]).seeds == (3,)
    assert _parsed_config([verb, "--seeds", "1", "2"]).seeds == (1, 2)
    assert _parsed_config([verb]).seeds == (0,)
    assert _parsed_config([verb, "--seed", "4", "--seeds", "4"]).seeds == (4,)


def test_seed_and_seeds_that_disagree_are_refused(tmp_path, capsys):
    assert main(["run", "--seed", "3", "--seeds", "1", "--out", str(tmp_path / "o")]) == 2
    assert "--seed 3 and --seeds 1 disagree" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_run_with_seed_records_that_seed(tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["run", "--seed", "3", "--out", str(out), "--explainers", "random",
                 "--metrics", "flip_rate", *FAST]) == 0
    [record] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["model_seed"] == 3 and record["provenance"]["seeds"]["model"] == 3


@pytest.fixture
def no_model(monkeypatch):
    """Preparing any task model fails the test: the checks must come first."""
    import faithbench.benchmark.runner
    import faithbench.benchmark.session
    import faithbench.benchmark.verbs

    def refuse(*args, **kwargs):
        raise AssertionError("a model was prepared before the names were checked")

    for module in (faithbench.benchmark.session, faithbench.benchmark.runner, faithbench.benchmark.verbs):
        monkeypatch.setattr(module, "open_session", refuse)


@pytest.mark.parametrize("args, needle", [
    (["run", "--explainers", "gradiant"], "did you mean 'gradient'"),
    (["run", "--explainers", "random", "gradiant[norm=l2]"], "did you mean 'gradient'"),
    (["run", "--explainers", "no_such_file.py"], "no such file: no_such_file.py"),
    (["run", "--metrics", "comprehensivness"], "did you mean 'comprehensiveness'"),
    (["run", "--tasks", "sentimnet"], "did you mean 'sentiment'"),
    (["run", "--metrics", "comprehensiveness[eraser=foo]"],
     "eraser='foo' is not delete | mask | pad | retokenize"),
    (["run", "--metrics", "aopc_morf[k_max=2.5]"], "k_max=2.5 is not int >= 1"),
    (["run", "--explainers", "integrated_gradients[rows_per_pass=8]"],
     "no settable parameter 'rows_per_pass'"),
    (["run", "--explainers", "integrated_gradients[n_steps=2.5]"],
     "n_steps=2.5 is not int >= 1 (settable: n_steps: int >= 1)"),
    (["explain", "--task", "synthetic", "--explainer", "gradiant", "--out", "x.jsonl"],
     "did you mean 'gradient'"),
    (["score", "--task", "synthetic", "--explanations", "x.jsonl", "--metrics", "flip_rat"],
     "did you mean 'flip_rate'"),
    (["agreement", "--task", "synthetic", "--explainers", "random", "occlusio"],
     "did you mean 'occlusion'"),
    (["roar", "--explainers", "gradiant"], "did you mean 'gradient'"),
    (["run", "--limit", "5", "--sample", "5"], "give a sample smaller than the limit"),
])
def test_bad_names_and_parameters_exit_2_before_any_work(args, needle, tmp_path, no_model,
                                                         capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = ["--out", str(tmp_path / "res")] if args[0] in ("run", "roar", "agreement") else []
    assert main([*args, *out, "--no-progress"]) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "res").exists() and not (tmp_path / "x.jsonl").exists()


def test_metric_parameters_are_checked_and_listed_when_resolved():
    from faithbench import metrics
    for name, metric in metrics.REGISTRY.items():  # every parameter has a declared check
        assert {k for k, _ in metric.spec.params} <= set(metrics.PARAMS), name
        assert metrics.check_params(metric) is metric, name  # and its default passes it
    with pytest.raises(InputError, match=r"bins=\(0, 0.5\) is not one or more fractions"):
        metrics.resolve("sufficiency[bins=0,0.5]")
    with pytest.raises(InputError, match="settable: k_frac: None | a fraction in"):
        metrics.resolve("token_f1[k_frac=2]")
    with pytest.raises(InputError, match="positive_only=1 is not None | True | False"):
        metrics.resolve("comprehensiveness[positive_only=1]")
    one = metrics.resolve("comprehensiveness[bins=0.5]")  # one bin is a list of one
    assert one.spec.param("bins") == (0.5,) and metrics.resolve(one.spec.id).spec == one.spec


def test_agreement_default_set_leaves_out_what_the_model_cannot_serve(tmp_path, synthetic_ready,
                                                                      capsys):
    out = tmp_path / "res"
    assert main(["agreement", "--task", "synthetic", "--out", str(out), *FAST]) == 0
    assert not (out / "failures.jsonl").exists()
    [record] = [json.loads(line) for line in (out / "agreement.jsonl").read_text().splitlines()]
    names = {e.split("[")[0].split("@")[0] for e in record["explainers"]}
    # every reference explainer the BiLSTM serves (counted from the registry, which grows);
    # attention_rollout and value_zeroing need a Transformer's layers
    assert names == {n for n in submissions.REFERENCE
                     if submissions.get_explainer(n).spec.requires
                     <= capabilities(synthetic_ready.model)}
    assert "lrp" in names and not names & {"attention_rollout", "value_zeroing"}
    assert "examples: first 12 of the split" in capsys.readouterr().out


def test_hub_load_fails_fast_with_the_data_dir_hint(monkeypatch):
    """No network here: the hub must be given up on within seconds (``datasets`` alone
    retried for 25-46 s), with the way out in the message."""
    import faithbench.tasks.data

    monkeypatch.setattr(faithbench.tasks.data, "hub_reachable", lambda *a, **k: False)  # as offline
    start = time.perf_counter()
    with pytest.raises(InputError) as caught:
        faithbench.tasks.data.load_hub("faithbench-tests/no-such-dataset", ["test"])
    assert time.perf_counter() - start < 5
    message = str(caught.value)
    assert "--data-dir" in message and "$FAITHBENCH_DATA" in message
    assert "did not answer within 3 s" in message


def test_hub_probe_answers_within_its_timeout():
    import faithbench.tasks.data

    start = time.perf_counter()
    reachable = faithbench.tasks.data.hub_reachable(timeout=1.0)
    assert isinstance(reachable, bool) and time.perf_counter() - start < 5


# --- --limit (first N) and --sample (seeded random N) -------------------------------------


class _Sorted:
    """A split sorted by label, as the CR file is: 30 negatives, then 30 positives;
    ``group_of`` puts rows ``k-0`` and ``k-1`` of one pair together."""

    def __init__(self, pairs=False):
        self.pairs = pairs
        self.rows = [Example(f"{i}-{t}" if pairs else str(i), ("w",), int(i >= 30))
                     for i in range(60) for t in ((0, 1) if pairs else (0,))]

    def examples(self, split, limit=None):
        return self.rows[:limit] if limit else self.rows

    def group_of(self, example):
        return example.id.split("-")[0]


def test_limit_takes_the_first_rows_and_sample_a_seeded_draw():
    from faithbench.benchmark.plan import RunConfig, select

    task = _Sorted()
    first = select(task, "test", RunConfig(limit=20))
    assert [e.id for e in first] == [str(i) for i in range(20)]
    assert {e.label for e in first} == {0}  # the bias --sample exists for
    drawn = select(task, "test", RunConfig(sample=20, sample_seed=7))
    want = sorted(random.Random(7).sample([str(i) for i in range(60)], 20), key=int)
    assert [e.id for e in drawn] == want  # the documented draw, in split order
    assert {e.label for e in drawn} == {0, 1}
    assert select(task, "test", RunConfig(sample=20, sample_seed=7)) == drawn
    assert select(task, "test", RunConfig(sample=20, sample_seed=8)) != drawn
    assert select(task, "test", RunConfig(sample=100)) == task.rows
    pairs = select(_Sorted(pairs=True), "test", RunConfig(sample=5, sample_seed=1))
    chosen = sorted(random.Random(1).sample([str(i) for i in range(60)], 5), key=int)
    assert [e.id for e in pairs] == [f"{i}-{t}" for i in chosen for t in (0, 1)]


def test_sample_and_limit_are_other_units_and_other_suites(tmp_path, synthetic_ready, capsys):
    out = tmp_path / "res"
    base = ["run", "--out", str(out), "--explainers", "random", "--metrics", "flip_rate",
            "--batch-size", "6", "--no-progress"]
    assert main([*base, "--limit", "12"]) == 0
    assert "examples: first 12 of each task's split" in capsys.readouterr().out
    assert main([*base, "--sample", "12", "--sample-seed", "5"]) == 0
    printed = capsys.readouterr().out
    assert "examples: random 12 (seed 5) of each task's split" in printed
    assert "1 units computed, 0 already done" in printed  # not the --limit 12 result
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    scored = [[json.loads(x)["id"] for x in (out / r["per_example_file"]).read_text()
               .splitlines()] for r in records]
    ids = [e.id for e in synthetic_ready.examples("test")]
    assert scored[0] == ids[:12]
    assert scored[1] == sorted(random.Random(5).sample(ids, 12), key=ids.index)
    assert records[1]["provenance"]["config"]["run"]["sample"] == 12
    # two suites, two entries: the second run's did not replace the first's
    entries = read_entries(out / "leaderboard")
    assert sorted(e.suite["synthetic[seed=0]@1"]["examples"] for e in entries) == [
        "first 12", "random 12 (seed 5)"]


def test_the_explainer_seed_is_its_own_and_defaults_to_the_model_seed(tmp_path):
    """``Seeds``: a random explainer's scores follow --explainer-seed; left unset it is
    the model seed, and the unit keeps the key it always had."""
    def one(out, *extra):
        assert main(["run", "--seed", "1", "--out", str(tmp_path / out), "--explainers",
                     "random", "--metrics", "comprehensiveness", *extra, *FAST]) == 0
        [record] = [json.loads(line) for line in (tmp_path / out / "results.jsonl").open()]
        scores = [json.loads(line)["scores"]
                  for p in (tmp_path / out / "explanations").glob("*.jsonl") for line in p.open()]
        return record, scores

    default, scores = one("a")
    same, same_scores = one("b", "--explainer-seed", "1")
    other, other_scores = one("c", "--explainer-seed", "5")
    assert default["provenance"]["seeds"] == {"model": 1, "explainer": 1, "bootstrap": 0}
    assert other["provenance"]["seeds"] == {"model": 1, "explainer": 5, "bootstrap": 0}
    assert default["key"] == same["key"] != other["key"]
    assert scores == same_scores != other_scores
    assert default["provenance"]["checkpoint"] == other["provenance"]["checkpoint"]


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys):
    """No traceback: a run stopped with Ctrl-C resumes with the same command."""
    from faithbench.benchmark import runner

    def stopped(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run", stopped)
    assert main(["run", "--explainers", "random", "--limit", "2"]) == 130
    err = capsys.readouterr().err
    assert "interrupted: faithbench run stopped" in err and "Traceback" not in err
