"""Undefined values (NaN: taucorr_loo on a constant score vector, comprehensiveness with
``positive_only`` and nothing scored above 0) are left out of the estimate and counted,
never a crash; the leaderboard shows the count and compares on what both define."""

import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.records import read_jsonl
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.verbs import score_file


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize(("metric", "undefined_scores"), [
    ("taucorr_loo", lambda n: [0.5] * n),  # constant: Kendall tau undefined
    ("comprehensiveness[positive_only=True]", lambda n: [-1.0] * n),  # no positive unit
])
def test_undefined_examples_are_left_out_and_counted(tmp_path, synthetic_ready, metric,
                                                     undefined_scores):
    examples = synthetic_ready.examples("test", 10)
    rows = [{"id": e.id, "tokens": list(e.tokens),
             "scores": [float((i * 7 + j * 3) % 5) + 1 for j in range(len(e.tokens))]}
            for i, e in enumerate(examples)]
    bad = [dict(rows[i], scores=undefined_scores(len(rows[i]["tokens"]))) for i in (2, 5)]
    with_bad = rows[:2] + [bad[0]] + rows[3:5] + [bad[1]] + rows[6:]
    without = [r for i, r in enumerate(rows) if i not in (2, 5)]
    config = RunConfig(metrics=(metric,), progress=False)
    per = tmp_path / "per.jsonl"
    [got] = score_file("synthetic", _write(tmp_path / "a.jsonl", with_bad), config, str(per))
    [ref] = score_file("synthetic", _write(tmp_path / "b.jsonl", without), config)
    # the estimate is that of the 8 defined rows alone, to the last bit
    assert (got["n"], got["undefined"], ref["undefined"]) == (8, 2, 0)
    assert (got["mean"], got["ci_low"], got["ci_high"]) == (ref["mean"], ref["ci_low"],
                                                           ref["ci_high"])
    values = {r["id"]: r["value"] for r in read_jsonl(per)}
    assert [i for i, v in values.items() if v is None] == [rows[2]["id"], rows[5]["id"]]
    assert math.fsum(v for v in values.values() if v is not None) / 8 == pytest.approx(got["mean"])


def test_a_metric_undefined_everywhere_is_an_input_error(tmp_path, synthetic_ready):
    examples = synthetic_ready.examples("test", 3)
    rows = [{"id": e.id, "tokens": list(e.tokens), "scores": [0.5] * len(e.tokens)}
            for e in examples]
    config = RunConfig(metrics=("taucorr_loo",), progress=False)
    with pytest.raises(InputError, match=r"taucorr_loo.*undefined \(NaN\) on all 3 examples"):
        score_file("synthetic", _write(tmp_path / "a.jsonl", rows), config)



def test_a_corpus_metric_with_a_zero_denominator_is_an_input_error(tmp_path, synthetic_ready,
                                                                  capsys):
    """The synthetic task's rationales are possible links only: recall of sure links has
    nothing to divide by, which names the metric and the statistic, not a traceback."""
    from faithbench.benchmark.cli import main

    assert main(["run", "--out", str(tmp_path / "r"), "--explainers", "random", "--metrics",
                 "alignment_recall", "--limit", "12", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"alignment_recall@1 is undefined on synthetic.*denominator \(sure\) is 0 "
                     r"over all 12 examples", err), err


# --- the leaderboard: counted in rank, render and compare; pairs on what both define --------

TAU = "taucorr_loo@1"
NAN = float("nan")


def _entry(root, explainer, per_seed):
    """An entry as the runner writes it, through the session's own estimate and rows."""
    from faithbench.benchmark.plan import Seeds
    from faithbench.benchmark.session import EvaluationSession, Scored, per_example_rows
    from faithbench.leaderboard.entry import read_entry, write_entry

    metric = SimpleNamespace(spec=SimpleNamespace(aggregation=None, id=TAU))
    session = SimpleNamespace(spec=SimpleNamespace(id="sentiment@1"), seeds=Seeds(0))
    results, rows = [], []
    for seed, values in per_seed.items():
        scored = Scored(ids=[f"ex{i}" for i in range(len(values))], values=np.array(values))
        results.append({
            "key": f"{explainer}-{seed}", "task": "sentiment@1", "model_seed": seed,
            "explainer": explainer, "metric": TAU, "family": "faithfulness",
            "direction": "higher", "split": "validation",
            "estimate": EvaluationSession.estimate(session, metric, scored).as_dict(),
            "per_example_file": "x.jsonl", "timing": {}, "record_type": "result",
            "schema_version": 1, "provenance": {"data_fingerprint": "fp",
                                                "checkpoint": f"ckpt{seed}"}})
        rows += [{"task": "sentiment@1", "model_seed": seed, "metric": TAU, **r}
                 for r in per_example_rows(scored)]
    spec = {"name": explainer.split("@")[0]}
    return read_entry(write_entry(root, explainer_spec=spec, results=results, per_example=rows))


def test_leaderboard_counts_undefined_and_compares_on_what_both_define(tmp_path):
    from faithbench.leaderboard.compare import compare
    from faithbench.leaderboard.rank import rank
    from faithbench.leaderboard.render import render_comparison, render_leaderboard

    a = _entry(tmp_path, "attention@1", {0: [0.1, NAN, 0.3, 0.4, NAN, 0.6]})
    b = _entry(tmp_path, "gradient@1", {0: [0.2, 0.2, NAN, 0.1, 0.1, 0.1]})
    rows = {r.explainer: r for r in rank([a, b])}
    assert (rows["attention@1"].n, rows["attention@1"].undefined) == (4, 2)
    assert (rows["gradient@1"].n, rows["gradient@1"].undefined) == (5, 1)
    assert rows["attention@1"].mean == pytest.approx((0.1 + 0.3 + 0.4 + 0.6) / 4)
    table = render_leaderboard(rank([a, b]), "markdown")
    assert "| 4 (+2 undefined) |" in table and "| 5 (+1 undefined) |" in table
    assert "+k undefined: k examples left out of n and the mean" in table
    # both define ex0, ex3, ex5: d = (-0.1, 0.3, 0.5), mean 0.7/3; of the 8 sign patterns
    # +-0.1 +-0.3 +-0.5 four reach |0.7| (0.9, 0.7, -0.7, -0.9): exact p = 0.5
    (row,) = compare(a, b)
    assert (row.n, row.undefined, row.p_value) == (3, 3, 0.5)
    assert row.diff == pytest.approx(0.7 / 3)
    assert "| 3 (+3 undefined) |" in render_comparison([row], "markdown")


def test_with_seeds_an_example_undefined_under_one_seed_is_left_out(tmp_path):
    from faithbench.leaderboard.rank import rank

    # ex1 undefined under seed 0, ex3 under seed 1: both defined on ex0, ex2 only
    e = _entry(tmp_path, "attention@1", {0: [1.0, NAN, 2.0, 5.0], 1: [3.0, 7.0, 6.0, NAN]})
    (row,) = rank([e])
    assert (row.n, row.undefined, row.n_seeds) == (2, 2, 2)
    # seed means over ex0, ex2: 1.5 and 4.5
    assert (row.mean, row.seed_min, row.seed_max) == (3.0, 1.5, 4.5)


def test_score_prints_the_undefined_count_beside_n(tmp_path, synthetic_ready, capsys):
    from faithbench.benchmark.cli import main

    examples = synthetic_ready.examples("test", 4)
    rows = [{"id": e.id, "tokens": list(e.tokens),
             "scores": [float(j) for j in range(len(e.tokens))]} for e in examples]
    rows[1]["scores"] = [0.5] * len(rows[1]["tokens"])  # constant: taucorr_loo undefined
    path = _write(tmp_path / "e.jsonl", rows)
    assert main(["score", "--task", "synthetic", "--explanations", path,
                 "--metrics", "taucorr_loo", "flip_rate", "--no-progress"]) == 0
    out = capsys.readouterr().out
    lines = {line.split("[")[0]: line for line in out.splitlines()
             if line.startswith(("tau", "flip"))}
    assert lines["taucorr_loo"].endswith("  3 (+1 undefined)")
    assert lines["flip_rate"].split()[-1] == "4"
