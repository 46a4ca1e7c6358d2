"""Leaderboard: entries on disk, ranking, paired comparison, rendering.

Every expected value below is worked out by hand from the per-example values and
confidence intervals the test writes; none is read back from the code under test.
"""

import csv
import io
import json
import math
import re
from pathlib import Path

import pytest

import faithbench.leaderboard.entry as entry_module
from faithbench.benchmark.core.errors import (
    DataFileError,
    InputError,
    IntegrityError,
    UnknownNameError,
)
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.stats import SEED_T, bootstrap
from faithbench.leaderboard import (
    compare,
    find_entry,
    rank,
    read_entries,
    read_entry,
    render_comparison,
    render_leaderboard,
    render_matrix,
    write_entry,
)
from faithbench.leaderboard.compare import NO_DIFFERENCE
from faithbench.leaderboard.render import OVERLAP_IS_NO_TEST
from faithbench.leaderboard.rows import Ranked

TASK = "sentiment@1"
COMP = "comprehensiveness[bins=0.01,0.05,0.1,0.2,0.5;eraser=delete;rounding=ceil]@2"
SUFF = "sufficiency[bins=0.01,0.05,0.1,0.2,0.5;eraser=delete;rounding=ceil]@2"
F1 = "token_f1@1"
ATT, GRAD, OCC = "attention@1", "gradient[norm=l2]@1", "occlusion@1"
DIRECTION = {COMP: "higher", SUFF: "lower", F1: "higher"}
FIXTURES = Path(__file__).parent / "fixtures" / "leaderboard" / "entries"


def record(
    explainer,
    metric,
    values,
    *,
    seed=0,
    ci=None,
    task=TASK,
    split="validation",
    fingerprint="fp-sst2",
    checkpoint=None,
):
    """A result record as the runner writes it; ``ci`` sets the interval by hand."""
    mean = math.fsum(values) / len(values)
    if ci is None:
        estimate = bootstrap(values).as_dict()
    else:
        estimate = {
            "mean": mean,
            "ci_low": ci[0],
            "ci_high": ci[1],
            "n": len(values),
            "n_resamples": 2000,
            "confidence": 0.95,
            "bootstrap_seed": 0,
        }
    return {
        "key": content_hash([explainer, metric, task, seed]),
        "task": task,
        "model_seed": seed,
        "explainer": explainer,
        "metric": metric,
        "family": "plausibility" if metric == F1 else "faithfulness",
        "direction": DIRECTION[metric],
        "split": split,
        "estimate": estimate,
        "per_example_file": "per_example/x.jsonl",
        "provenance": {
            "faithbench": "0.1.0",
            "git_commit": "abc123",
            "data_fingerprint": fingerprint,
            "checkpoint": checkpoint or f"ckpt-{task}-seed{seed}",
            "model_accuracy": 0.85,
        },
        "timing": {"explain_s": 1.0},
        "extra": {},
        "created_at": 0.0,
        "record_type": "result",
        "schema_version": 1,
    }


def rows_of(metric, values, *, seed=0, task=TASK, ids=None):
    ids = ids or [f"ex{i}" for i in range(len(values))]
    return [
        {"task": task, "model_seed": seed, "metric": metric, "id": i, "value": v}
        for i, v in zip(ids, values)
    ]


def make_entry(root, explainer, scores, *, ids=None, **record_kw):
    """``scores``: metric -> values, or metric -> (values, (ci_low, ci_high))."""
    results, per_example = [], []
    for metric, spec in scores.items():
        values, ci = spec if isinstance(spec, tuple) else (spec, None)
        results.append(record(explainer, metric, values, ci=ci, **record_kw))
        per_example += rows_of(metric, values, seed=record_kw.get("seed", 0), ids=ids)
    name = explainer.split("[")[0].split("@")[0]
    path = write_entry(
        root,
        explainer_spec={"name": name, "version": "1"},
        results=results,
        per_example=per_example,
    )
    return read_entry(path)


@pytest.fixture
def board(tmp_path):
    """3 explainers x 2 faithfulness metrics (+1 plausibility), intervals set by hand in
    the records, which rankings never show: they recompute intervals from the rows.

    comprehensiveness (higher): attention 0.625 [0.55, 0.70] and gradient 0.625
    [0.625, 0.625] tie for rank 1 (gradient overlaps attention); occlusion 0.125
    [0.10, 0.15] is rank 3, clear of gradient.
    sufficiency (lower): occlusion 0.125 [0.10, 0.15] rank 1; gradient 0.1875
    [0.14, 0.24] rank 2, overlapping occlusion; attention 0.5 [0.45, 0.55] rank 3, clear.
    token_f1 (plausibility, higher): attention 0.75, gradient 0.5.
    """
    root = tmp_path / "entries"
    make_entry(
        root,
        ATT,
        {
            COMP: ([0.5, 0.75, 0.5, 0.75], (0.55, 0.70)),
            SUFF: ([0.5] * 4, (0.45, 0.55)),
            F1: ([0.75] * 4, (0.7, 0.8)),
        },
    )
    make_entry(
        root,
        GRAD,
        {
            COMP: ([0.625] * 4, (0.625, 0.625)),
            SUFF: ([0.25, 0.125, 0.25, 0.125], (0.14, 0.24)),
            F1: ([0.5] * 4, (0.45, 0.55)),
        },
    )
    make_entry(root, OCC, {COMP: ([0.125] * 4, (0.10, 0.15)), SUFF: ([0.125] * 4, (0.10, 0.15))})
    return root


# --- rank ---------------------------------------------------------------------------------


def test_rank_orders_by_direction_with_ties_and_overlap_marker(board):
    rows = rank(read_entries(board))
    got = [(r.metric, r.explainer, r.rank, r.overlaps_above) for r in rows]
    assert got == [
        (COMP, ATT, 1, False),
        (COMP, GRAD, 1, True),
        (COMP, OCC, 3, False),
        (SUFF, OCC, 1, False),
        (SUFF, GRAD, 2, True),
        (SUFF, ATT, 3, False),
        (F1, ATT, 1, False),
        (F1, GRAD, 2, False),
    ]
    by = {(r.metric, r.explainer): r for r in rows}
    assert by[(COMP, ATT)].mean == 0.625 and by[(SUFF, GRAD)].mean == 0.1875
    # the interval is the bootstrap of the rows, not the (0.14, 0.24) the record claims
    want = bootstrap([0.25, 0.125, 0.25, 0.125])
    assert (by[(SUFF, GRAD)].ci_low, by[(SUFF, GRAD)].ci_high) == (want.ci_low, want.ci_high)
    assert by[(SUFF, GRAD)].n == 4 and by[(SUFF, GRAD)].model_seeds == [0]
    one_seed = {k: getattr(by[(SUFF, GRAD)], k) for k in ("n_seeds", "seed_sd", "seed_min", "seed_max")}
    assert one_seed == {"n_seeds": 1, "seed_sd": 0.0, "seed_min": 0.1875, "seed_max": 0.1875}
    assert [r.family for r in rows] == ["faithfulness"] * 6 + ["plausibility"] * 2


def test_rank_filters_by_metric_name_id_task_and_family(board):
    entries = read_entries(board)
    assert [r.explainer for r in rank(entries, metric="sufficiency")] == [OCC, GRAD, ATT]
    assert rank(entries, metric=SUFF) == rank(entries, metric="sufficiency")
    plaus = rank(entries, family="plausibility")
    assert [(r.metric, r.explainer) for r in plaus] == [(F1, ATT), (F1, GRAD)]
    assert len(rank(entries, task="sentiment", family="faithfulness")) == 6
    with pytest.raises(InputError, match="no results match metric='aopc_morf'.*sufficiency"):
        rank(entries, metric="aopc_morf")
    with pytest.raises(InputError, match="unknown family"):
        rank(entries, family="faithful")


def seeded_entry(root, explainer, per_seed, *, metric=COMP):
    """One entry with ``per_seed``: model seed -> per-example values (ids ex0, ex1, ...)."""
    results = [record(explainer, metric, v, seed=s) for s, v in per_seed.items()]
    rows = [row for s, v in per_seed.items() for row in rows_of(metric, v, seed=s)]
    spec = {"name": explainer.split("[")[0].split("@")[0]}
    return read_entry(write_entry(root, explainer_spec=spec, results=results, per_example=rows))


def test_rank_ci_over_seeds_and_examples(tmp_path):
    # seed 0: ex0..ex2 = 1, 2, 3; seed 1: 3, 4, 5 and an ex3 seed 0 lacks -> left out.
    e = seeded_entry(tmp_path, ATT, {0: [1.0, 2.0, 3.0], 1: [3.0, 4.0, 5.0, 9.0]})
    (row,) = rank([e])
    assert (row.mean, row.n, row.model_seeds) == (3.0, 3, [0, 1])
    # per-seed means 2 and 4: sd sqrt(((2 - 3)^2 + (4 - 3)^2) / 1)
    assert (row.n_seeds, row.seed_sd, row.seed_min, row.seed_max) == (
        2,
        math.sqrt(2),
        2.0,
        4.0,
    )
    # t over the seed means: v_seed = var(2, 4) / 2 = 1 on 1 df; the example means 2, 3, 4
    # (variance 1, no interaction) add v_example = 1/3 on 2 df; t tables 12.706, 4.303
    half = math.hypot(12.706204736174698, 4.302652729749464 / math.sqrt(3))
    assert (row.ci_low, row.ci_high) == pytest.approx((3.0 - half, 3.0 + half), abs=1e-12)
    assert (row.ci_method, row.undefined) == (SEED_T, 1)  # ex3 counted, not compared


def test_rank_ci_covers_seeds_that_disagree(tmp_path):
    # every example 0 under seed 0 and 1 under seed 1: the seed-averaged values are all
    # 0.5 (a one-level CI of [0.5, 0.5]); the seed means 0 and 1 have sd 1/sqrt(2), a
    # standard error of 0.5, read with t on 1 df (12.706): 0.5 +- 6.353. A percentile
    # bootstrap over the two seeds could not leave [0, 1].
    e = seeded_entry(tmp_path, ATT, {0: [0.0] * 4, 1: [1.0] * 4})
    (row,) = rank([e])
    half = 12.706204736174698 * 0.5
    assert (row.mean, row.ci_low, row.ci_high) == pytest.approx((0.5, 0.5 - half,
                                                                          0.5 + half))
    assert (bootstrap([0.5] * 4).ci_low, bootstrap([0.5] * 4).ci_high) == (0.5, 0.5)


def test_rank_ranks_entries_of_different_suites_apart(tmp_path):
    """It refused the whole folder ("not scored on the same suite"), so a quick run
    beside a full one made `faithbench leaderboard` print nothing. Each suite is now
    ranked on its own, and labels that would read the same name what differs."""
    a = make_entry(tmp_path / "a", ATT, {COMP: [0.5] * 3}, fingerprint="fp-a")
    b = make_entry(tmp_path / "b", GRAD, {COMP: [0.25] * 3}, fingerprint="fp-b")
    c = make_entry(tmp_path / "c", OCC, {COMP: [0.75] * 3}, fingerprint="fp-a")
    d = make_entry(tmp_path / "d", ATT, {COMP: [0.75] * 3}, checkpoint="other")
    rows = rank([a, b, c, d])
    assert [(r.explainer, r.rank, r.mean) for r in rows] == [
        (OCC, 1, 0.75), (ATT, 2, 0.5), (GRAD, 1, 0.25), (ATT, 1, 0.75)]
    labels = [r.suite for r in rows]
    assert labels[0] == labels[1] != labels[2] != labels[3]
    assert "data fp-a" in labels[0] and "data fp-b" in labels[2]
    with pytest.raises(InputError, match="data_fingerprint 'fp-a' vs 'fp-b'"):
        compare(a, b)


# --- compare ------------------------------------------------------------------------------


def test_compare_identical_values_gives_zero_and_p_one(tmp_path):
    values = [(i % 5) / 4 for i in range(50)]
    a = make_entry(tmp_path, ATT, {COMP: values})
    b = make_entry(tmp_path, GRAD, {COMP: values})
    (row,) = compare(a, b)
    assert (row.diff, row.p_value, row.p_holm, row.n) == (0.0, 1.0, 1.0, 50)
    assert row.test == "sign-flip monte carlo"  # 2^50 patterns: 2000 drawn
    assert row.better == NO_DIFFERENCE and row.better_entry is None


def test_compare_constant_shift_is_significant_in_the_metric_direction(tmp_path):
    base = [(i % 8) / 8 for i in range(200)]  # multiples of 1/8: a - b is exactly 0.5
    shifted = [v + 0.5 for v in base]
    a = make_entry(tmp_path, ATT, {COMP: shifted, SUFF: shifted})
    b = make_entry(tmp_path, GRAD, {COMP: base, SUFF: base})
    rows = {r.metric: r for r in compare(a, b)}
    for r in rows.values():
        assert r.diff == 0.5 and r.n == 200
        assert r.ci_low <= 0.5 <= r.ci_high and r.ci_low > 0
        # only the all-plus and all-minus of 2^200 sign patterns reach |0.5|; none of the
        # 2000 drawn does: p = (0 + 1) / 2001, and Holm over the 2 rows doubles it
        assert (r.p_value, r.p_holm, r.test) == (
            1 / 2001,
            2 / 2001,
            "sign-flip monte carlo",
        )
        assert r.mean_a - r.mean_b == 0.5
        assert (r.n_seeds, r.ci_method) == (1, "percentile bootstrap over examples")
    assert rows[COMP].better == ATT and rows[COMP].better_entry == a.entry_id
    assert rows[SUFF].better == GRAD  # lower sufficiency is better: b wins
    assert [r.metric for r in compare(a, b, metric="sufficiency")] == [SUFF]


def test_compare_one_example_names_no_winner(tmp_path):
    # one difference d: the patterns +d and -d both reach |d|, so p = 2/2 = 1
    a = make_entry(tmp_path, ATT, {COMP: [0.875]})
    b = make_entry(tmp_path, GRAD, {COMP: [0.125]})
    (row,) = compare(a, b)
    assert (row.diff, row.n, row.p_value, row.p_holm) == (0.75, 1, 1.0, 1.0)
    assert row.test == "sign-flip exact"
    assert row.better == NO_DIFFERENCE and row.better_entry is None


def test_compare_exact_p_on_three_examples(tmp_path):
    # d = 0.25 * [1, 2, 3]: of 8 sign patterns only all-plus and all-minus reach |6|/4
    a = make_entry(tmp_path, ATT, {COMP: [0.5, 0.75, 1.0]})
    b = make_entry(tmp_path, GRAD, {COMP: [0.25, 0.25, 0.25]})
    (row,) = compare(a, b)
    assert (row.diff, row.p_value, row.test) == (0.5, 0.25, "sign-flip exact")


def test_compare_holm_keeps_a_raw_p_below_alpha_from_naming_a_winner(tmp_path):
    # comprehensiveness: d = 0.25 on 6 examples, exact p = 2/64 = 0.03125 < 0.05;
    # sufficiency: d = 0, p = 1. Holm over the 2 rows: 2 * 0.03125 = 0.0625, then 1.
    a = make_entry(tmp_path, ATT, {COMP: [0.75] * 6, SUFF: [0.5] * 6})
    b = make_entry(tmp_path, GRAD, {COMP: [0.5] * 6, SUFF: [0.5] * 6})
    rows = {r.metric: r for r in compare(a, b)}
    assert (rows[COMP].p_value, rows[COMP].p_holm) == (0.03125, 0.0625)
    assert (rows[SUFF].p_value, rows[SUFF].p_holm) == (1.0, 1.0)
    assert rows[COMP].better == NO_DIFFERENCE and rows[SUFF].better == NO_DIFFERENCE
    # alone in its call, the same comparison is a family of one: p_holm = p < 0.05
    (alone,) = compare(a, b, metric="comprehensiveness")
    assert (alone.p_holm, alone.better, alone.better_entry) == (0.03125, ATT, a.entry_id)


def test_compare_with_seeds_is_a_t_over_seeds_and_examples(tmp_path):
    # a - b is 0 on every example under seed 0 and 1 under seed 1: seed means 0 and 1,
    # standard error 0.5 on 1 df (t 12.706), no example variance: 0.5 +- 6.353. p: the
    # alpha at which t(1 - alpha/2; 1 df) * 0.5 = 0.5, i.e. P(|Cauchy| > 1) = 0.5
    a = seeded_entry(tmp_path, ATT, {0: [0.5] * 4, 1: [1.5] * 4})
    b = seeded_entry(tmp_path, GRAD, {0: [0.5] * 4, 1: [0.5] * 4})
    (row,) = compare(a, b)
    assert (row.diff, row.n, row.model_seeds, row.n_seeds) == (0.5, 4, [0, 1], 2)
    half = 12.706204736174698 * 0.5
    assert (row.ci_low, row.ci_high) == pytest.approx((0.5 - half, 0.5 + half))
    assert row.ci_method == row.test == SEED_T
    assert (row.p_value, row.better) == (pytest.approx(0.5, abs=1e-9), NO_DIFFERENCE)


def test_compare_names_no_winner_when_the_seeds_disagree(tmp_path):
    # a - b is +1 on all 12 examples under seed 0 and -0.8 under seed 1: averaged over
    # the seeds it is +0.1 everywhere, so a sign-flip test conditional on these two
    # checkpoints would give p ~ 1/2001; but the seed means 1 and -0.8 have a standard
    # error of 0.9, t = 0.1 / 0.9 on 1 df: p = 1 - 2 atan(1/9) / pi, and a retrained
    # model could reverse the order
    a = seeded_entry(tmp_path, ATT, {0: [1.5] * 12, 1: [0.2] * 12})
    b = seeded_entry(tmp_path, GRAD, {0: [0.5] * 12, 1: [1.0] * 12})
    (row,) = compare(a, b)
    assert row.p_holm == row.p_value == pytest.approx(1 - 2 * math.atan(1 / 9) / math.pi)
    assert row.ci_low < 0 < row.ci_high and row.better == NO_DIFFERENCE


def test_compare_uses_only_shared_examples(tmp_path):
    a = make_entry(tmp_path, ATT, {COMP: [0.25] * 100})
    # b scored 50 more examples, with values far off; they must not count.
    b = make_entry(tmp_path, GRAD, {COMP: [0.25] * 100 + [100.0] * 50})
    (row,) = compare(a, b)
    assert (row.n, row.mean_b, row.diff) == (100, 0.25, 0.0)


def test_compare_mismatched_suite_names_what_differs(tmp_path):
    a = make_entry(tmp_path, ATT, {COMP: [0.5] * 3}, fingerprint="fp-a")
    b = make_entry(tmp_path, GRAD, {COMP: [0.5] * 3}, fingerprint="fp-b")
    with pytest.raises(InputError) as err:
        compare(a, b)
    msg = str(err.value)
    assert "data_fingerprint 'fp-a' vs 'fp-b'" in msg
    assert a.entry_id in msg and b.entry_id in msg and TASK in msg
    c = make_entry(tmp_path, OCC, {COMP: [0.5] * 3}, fingerprint="fp-a", checkpoint="other")
    with pytest.raises(
        InputError, match="checkpoint for model seed 0 'ckpt-sentiment@1-seed0' vs 'other'"
    ):
        compare(a, c)
    d = make_entry(tmp_path, "random@1", {COMP: [0.5] * 3}, fingerprint="fp-a", split="test")
    with pytest.raises(InputError, match="split 'validation' vs 'test'"):
        compare(a, d)


def test_compare_without_shared_examples_or_metrics_fails(tmp_path):
    a = make_entry(tmp_path, ATT, {COMP: [0.5] * 3}, ids=["a0", "a1", "a2"])
    b = make_entry(tmp_path, GRAD, {COMP: [0.5] * 3}, ids=["b0", "b1", "b2"])
    with pytest.raises(InputError, match="share no examples"):
        compare(a, b)
    c = make_entry(tmp_path, OCC, {SUFF: [0.5] * 3})
    with pytest.raises(InputError, match="share no \\(task, metric\\) results"):
        compare(a, c)


# --- entries on disk ----------------------------------------------------------------------


def test_write_entry_twice_replaces_one_folder(tmp_path):
    first = make_entry(tmp_path, ATT, {COMP: [0.25, 0.75]})
    second = make_entry(tmp_path, ATT, {COMP: [0.5, 1.0]})
    assert first.entry_id == second.entry_id
    assert [p.name for p in tmp_path.iterdir()] == [first.entry_id]  # no leftovers either
    (e,) = read_entries(tmp_path)
    assert e.results[0].estimate.mean == 0.75
    assert sorted(e.values(TASK, COMP).values()) == [0.5, 1.0]
    # the same explainer on the same task, another model: the newer entry replaces it
    other = make_entry(tmp_path, ATT, {COMP: [0.5, 1.0]}, checkpoint="retrained")
    assert other.entry_id != first.entry_id
    assert [e.entry_id for e in read_entries(tmp_path)] == [other.entry_id]


def test_header_holds_the_suite_and_hashes_it(tmp_path):
    results = [record(GRAD, COMP, [0.5] * 3, seed=s) for s in (1, 0)]
    results.append(record(GRAD, COMP, [0.5] * 2, seed=0, task="nli@1", fingerprint="fp-snli"))
    rows = (
        rows_of(COMP, [0.5] * 3, seed=1)
        + rows_of(COMP, [0.5] * 3, seed=0)
        + rows_of(COMP, [0.5] * 2, seed=0, task="nli@1")
    )
    spec = {
        "name": "gradient",
        "version": "1",
        "requires": frozenset({"gradients"}),
        "params": (("norm", "l2"),),
    }
    path = write_entry(
        tmp_path, explainer_spec=spec, results=results, per_example=rows, notes="first try"
    )
    header = json.loads((path / "header.json").read_text())
    suite = {
        "nli@1": {
            "split": "validation",
            "model_seeds": [0],
            "checkpoints": ["ckpt-nli@1-seed0"],
            "data_fingerprint": "fp-snli",
            "n": 2,
        },
        TASK: {
            "split": "validation",
            "model_seeds": [0, 1],
            "checkpoints": ["ckpt-sentiment@1-seed0", "ckpt-sentiment@1-seed1"],
            "data_fingerprint": "fp-sst2",
            "n": 3,
        },
    }
    assert header["suite"] == suite
    assert header["entry_id"] == path.name == content_hash({"explainer": GRAD, "suite": suite})
    assert header["explainer_spec"]["requires"] == ["gradients"]
    assert header["explainer_spec"]["params"] == [["norm", "l2"]]
    assert (header["explainer"], header["explainer_name"], header["notes"]) == (
        GRAD,
        "gradient",
        "first try",
    )
    assert header["git_commits"] == ["abc123"] and header["faithbench_versions"] == ["0.1.0"]


def test_half_written_folders_are_ignored(tmp_path):
    e = make_entry(tmp_path, ATT, {COMP: [0.5] * 3})
    crashed = tmp_path / "0123456789abcdef"  # killed before header.json was written
    crashed.mkdir()
    (crashed / "results.jsonl").write_text("")
    hidden = tmp_path / f".tmp-{e.entry_id}-x"  # a temp folder, complete or not
    hidden.mkdir()
    (hidden / "header.json").write_text("{}")
    assert [x.entry_id for x in read_entries(tmp_path)] == [e.entry_id]


def test_failed_rewrite_keeps_the_old_entry(tmp_path, monkeypatch):
    e = make_entry(tmp_path, ATT, {COMP: [0.25, 0.75]})

    def broken(path, rows):
        raise OSError("disk full")

    monkeypatch.setattr(entry_module, "write_jsonl_atomic", broken)
    with pytest.raises(OSError, match="disk full"):
        make_entry(tmp_path, ATT, {COMP: [0.5, 1.0]})
    assert [p.name for p in tmp_path.iterdir()] == [e.entry_id]
    assert read_entries(tmp_path)[0].results[0].estimate.mean == 0.5


def test_write_entry_refuses_results_its_rows_do_not_back(tmp_path):
    rec = record(ATT, COMP, [0.5, 0.5, 0.5])
    spec = {"name": "attention"}
    with pytest.raises(InputError, match="n=3 but 2 per-example rows"):
        write_entry(
            tmp_path, explainer_spec=spec, results=[rec], per_example=rows_of(COMP, [0.5, 0.5])
        )
    with pytest.raises(InputError, match="mean 0.5 but its per-example rows average 0.6"):
        write_entry(
            tmp_path, explainer_spec=spec, results=[rec], per_example=rows_of(COMP, [0.6, 0.6, 0.6])
        )
    del rec["provenance"]["checkpoint"]
    with pytest.raises(DataFileError, match="results\\[0\\]: field 'provenance.checkpoint'"):
        write_entry(
            tmp_path, explainer_spec=spec, results=[rec], per_example=rows_of(COMP, [0.5] * 3)
        )
    mixed = [record(ATT, COMP, [0.5]), record(GRAD, SUFF, [0.5])]
    with pytest.raises(InputError, match="one explainer"):
        write_entry(
            tmp_path,
            explainer_spec={},
            results=mixed,
            per_example=rows_of(COMP, [0.5]) + rows_of(SUFF, [0.5]),
        )
    bad = rows_of(COMP, [0.5, 0.5, float("nan")])
    with pytest.raises(DataFileError, match="line 3: field 'value': not a finite number"):
        write_entry(
            tmp_path, explainer_spec=spec, results=[record(ATT, COMP, [0.5] * 3)], per_example=bad
        )
    assert read_entries(tmp_path) == []


@pytest.mark.parametrize("field", ["suite", "explainer", "entry_id", "schema_version"])
def test_malformed_header_names_file_and_field(tmp_path, field):
    e = make_entry(tmp_path, ATT, {COMP: [0.5] * 3})
    path = e.path / "header.json"
    header = json.loads(path.read_text())
    del header[field]
    path.write_text(json.dumps(header))
    with pytest.raises(DataFileError) as err:
        read_entries(tmp_path)
    assert err.value.field == field
    assert str(path) in str(err.value) and repr(field) in str(err.value)


def test_malformed_suite_and_json_name_file_and_field(tmp_path):
    e = make_entry(tmp_path, ATT, {COMP: [0.5] * 3})
    path = e.path / "header.json"
    header = json.loads(path.read_text())
    del header["suite"][TASK]["data_fingerprint"]
    path.write_text(json.dumps(header))
    with pytest.raises(DataFileError, match=f"field 'suite.{TASK}.data_fingerprint'"):
        read_entries(tmp_path)
    path.write_text('{"schema_version": 1,\n  "entry_id": }')
    with pytest.raises(DataFileError, match="not valid JSON") as err:
        read_entries(tmp_path)
    assert (err.value.path, err.value.line) == (str(path), 2)


def test_find_entry_by_id_prefix_explainer_and_name(tmp_path):
    l2 = make_entry(tmp_path, GRAD, {COMP: [0.5] * 3})
    l1 = make_entry(tmp_path, "gradient[norm=l1]@1", {COMP: [0.5] * 3})
    att = make_entry(tmp_path, ATT, {COMP: [0.5] * 3})
    assert find_entry(tmp_path, l2.entry_id).entry_id == l2.entry_id
    assert find_entry(tmp_path, att.entry_id[:10]).entry_id == att.entry_id
    assert find_entry(tmp_path, "gradient[norm=l1]@1").entry_id == l1.entry_id
    assert find_entry(tmp_path, "attention").entry_id == att.entry_id
    with pytest.raises(InputError, match="matches 2 entries") as err:
        find_entry(tmp_path, "gradient")
    assert l1.entry_id in str(err.value) and l2.entry_id in str(err.value)
    with pytest.raises(UnknownNameError, match="did you mean 'gradient'"):
        find_entry(tmp_path, "gradiant")


def test_entries_from_before_hashes_are_refused(tmp_path):
    """faithbench 0.1.0's entries (tests/fixtures/leaderboard) kept no content hashes:
    nothing shows their rows are the ones written, and an entry that drops its hashes
    to pose as one of them would be ranked too (issue 44), so they are refused."""
    with pytest.raises(IntegrityError, match="field 'hashes' is missing"):
        read_entries(FIXTURES)


def test_schema_1_entries_still_read_rank_and_compare(tmp_path):
    """Schema 1 entries (before the header seal) with their file hashes: the fixtures,
    hashed as faithbench wrote schema 1 from the version that kept hashes on."""
    import shutil

    from faithbench.benchmark.core.files import file_hash

    for folder in FIXTURES.iterdir():
        shutil.copytree(folder, tmp_path / folder.name)
        header = json.loads((folder / "header.json").read_text())
        header["hashes"] = {n: file_hash(folder / n) for n in entry_module.HASHED}
        (tmp_path / folder.name / "header.json").write_text(json.dumps(header))
    entries = read_entries(tmp_path)
    assert [e.header["schema_version"] for e in entries] == [1, 1]
    rows = rank(entries)
    assert [(r.explainer, r.rank, r.mean, r.n) for r in rows] == [
        ("gradient_x_input@1", 1, 0.5, 4),
        ("attention@1", 2, 0.25, 4),
    ]
    assert [r.n_seeds for r in rows] == [1, 1]
    (row,) = compare(find_entry(entries, "gradient_x_input"), find_entry(entries, "attention"))
    assert (row.diff, row.n) == (0.25, 4)
    # d = 0.25, 0.5, 0, 0.25: 4 of the 16 sign patterns reach |sum d| = 1
    assert (row.p_value, row.test, row.better) == (0.25, "sign-flip exact", NO_DIFFERENCE)


# --- render -------------------------------------------------------------------------------


def hand_row(**kw):
    row = {
        "task": TASK,
        "family": "faithfulness",
        "metric": COMP,
        "metric_name": "comp",
        "direction": "higher",
        "rank": 1,
        "suite": "test split, all examples, model seeds 0",
        "overlaps_above": False,
        "entry_id": "e1",
        "explainer": ATT,
        "explainer_name": "attention",
        "mean": 0.5,
        "ci_low": 0.4,
        "ci_high": 0.6,
        "n": 200,
        "confidence": 0.95,
        "model_seeds": [0],
        "n_seeds": 1,
        "seed_sd": 0.0,
        "seed_min": 0.5,
        "seed_max": 0.5,
        "ci_method": "percentile bootstrap over examples",
        "undefined": 0,
    }
    return Ranked(**{**row, **kw})


HAND_ROWS = [
    hand_row(),
    hand_row(
        rank=2,
        overlaps_above=True,
        entry_id="e2",
        explainer=GRAD,
        mean=0.41249999,
        ci_low=0.3,
        ci_high=0.45,
        n=180,
        seed_min=0.41249999,
        seed_max=0.41249999,
    ),
]


def test_render_markdown_cells():
    md = render_leaderboard(HAND_ROWS, "markdown")
    lines = md.splitlines()
    assert "| 0.500 [0.400, 0.600] |" in lines[2]
    assert "0.412 [0.300, 0.450]" in lines[3] and "2 ≈" in lines[3]
    assert lines[0].startswith("| task") and "mean [95% CI]" in lines[0]
    assert re.fullmatch(r"\|(-+\|)+", lines[1])
    assert "comprehensiveness ↑" in lines[2] and "| 200 |" in lines[2]
    assert lines[-5] == f"{TASK}: test split, all examples, model seeds 0"  # the suite
    assert lines[-3] == "≈: its CI overlaps that of the entry listed just above it."
    assert lines[-1] == OVERLAP_IS_NO_TEST
    assert "entry" not in lines[0]  # a publication format: no machine-local entry ids
    assert OVERLAP_IS_NO_TEST == (
        "Overlap or separation of the CIs of adjacent rows is not a significance test; "
        "use `faithbench compare A B` (paired sign-flip test, Holm-corrected)."
    )
    assert " s " not in md and "several seeds" not in md  # one seed: no seed range, no seed note


def md_cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_render_shows_the_seed_range_and_says_what_it_is():
    rows = [
        hand_row(
            mean=0.524,
            ci_low=0.508,
            ci_high=0.539,
            model_seeds=[0, 1, 2],
            n_seeds=3,
            seed_sd=0.0097,
            seed_min=0.5112,
            seed_max=0.5306,
            ci_method=SEED_T,
        ),
        hand_row(entry_id="e2", explainer=GRAD, rank=2),
    ]
    lines = render_leaderboard(rows, "markdown").splitlines()
    assert md_cells(lines[2])[-2:] == ["0.524 [0.508, 0.539] s 0.511–0.531", "200"]
    assert md_cells(lines[3])[-2:] == ["0.500 [0.400, 0.600]", "200"]  # one seed: no range
    assert lines[-3] == (
        "CI with several seeds: t over seed means (S-1 df) + example variance; "
        "s: range of the per-seed means over 3 seeds"
    )
    assert lines[-1] == OVERLAP_IS_NO_TEST
    parsed = list(csv.reader(io.StringIO(render_leaderboard(rows, "csv"))))
    line = dict(zip(parsed[0], parsed[1]))
    assert (line["n_seeds"], float(line["seed_sd"])) == ("3", 0.0097)
    assert (float(line["seed_min"]), float(line["seed_max"])) == (0.5112, 0.5306)


def test_render_csv_reads_back_the_same_numbers():
    parsed = list(csv.reader(io.StringIO(render_leaderboard(HAND_ROWS, "csv"))))
    head, body = parsed[0], parsed[1:]
    assert len(body) == 2
    got = [{k: v for k, v in zip(head, line)} for line in body]
    for row, line in zip(HAND_ROWS, got):
        assert line["metric"] == COMP  # commas inside the id survive quoting
        assert (float(line["mean"]), float(line["ci_low"]), float(line["ci_high"])) == (
            row.mean,
            row.ci_low,
            row.ci_high,
        )
        assert int(line["n"]) == row.n and int(line["rank"]) == row.rank
        assert (int(line["n_seeds"]), float(line["seed_sd"])) == (1, 0.0)
        assert float(line["seed_min"]) == float(line["seed_max"]) == row.mean
    assert got[1]["overlaps_above"] == "≈" and got[0]["overlaps_above"] == ""


def paragraphs(text: str) -> list[str]:
    """A terminal table's blocks and notes, each note unwrapped to one line."""
    return [p.replace("\n", " ") if "  " not in p else p for p in text.strip().split("\n\n")]


def test_render_table_layout():
    """On a terminal, a column that would hold one value throughout (one task, one
    family) is said once in the notes; notes are wrapped at 120 characters."""
    text = render_leaderboard(HAND_ROWS, "table")
    lines = text.splitlines()
    assert lines[0].split() == ["metric", "rank", "explainer", "entry", "mean", "[95%", "CI]",
                                "n"]
    assert set(lines[1]) == {"-", " "}
    assert lines[2].split()[-5:] == ["e1", "0.500", "[0.400,", "0.600]", "200"]
    assert lines[3].split()[2:4] == ["2", "≈"]
    notes = paragraphs(text)[1:]
    assert notes[0].startswith(f"{TASK}: test split") and notes[1] == "family: faithfulness"
    assert notes[2].startswith("≈:") and notes[3] == OVERLAP_IS_NO_TEST and len(notes) == 4
    assert len({len(line) for line in lines[:4]}) == 1  # aligned columns
    assert max(len(line) for line in lines) <= 120
    wide = render_leaderboard(HAND_ROWS, "markdown").splitlines()[0]
    assert wide.startswith("| task") and "family" in wide  # publication formats keep them


def test_render_labels_name_the_parameters_in_which_colliding_metrics_differ():
    """On a terminal the name and the parameters the two differ in; the publication
    formats keep the full ids the published tables have always shown."""
    other = COMP.replace("eraser=delete", "eraser=mask")
    rows = [hand_row(), hand_row(metric=other, entry_id="e3")]
    out = render_leaderboard(rows, "table")
    assert "comprehensiveness[eraser=delete] ↑" in out
    assert "comprehensiveness[eraser=mask] ↑" in out and COMP not in out
    md = render_leaderboard(rows, "markdown")
    assert f"{COMP} ↑" in md and f"{other} ↑" in md
    with pytest.raises(InputError, match="unknown format 'html'"):
        render_leaderboard(HAND_ROWS, "html")


def test_render_matrix(board):
    entries = read_entries(board)
    lines = render_matrix(entries, "sentiment").splitlines()
    assert lines[0].split() == [
        "explainer",
        "entry",
        "n",
        "comprehensiveness",
        "↑",
        "sufficiency",
        "↓",
        "token_f1",
        "↑",
    ]
    body = [line.split()[0] for line in lines[2:5]]
    assert body == [ATT, GRAD, OCC]  # by comprehensiveness, ties by explainer id
    assert "0.125 [0.125, 0.125]" in lines[4] and lines[4].rstrip().endswith("—")
    notes = paragraphs(render_matrix(entries, "sentiment"))
    assert notes[-2] == (f"{TASK} (validation split, model seeds 0); sorted by "
                         "comprehensiveness ↑; cells: mean [95% CI]")
    assert notes[-1] == OVERLAP_IS_NO_TEST
    md = render_matrix(entries, TASK, "markdown", sort_by="sufficiency", family="faithfulness")
    assert [line.split("|")[1].strip() for line in md.splitlines()[2:5]] == [OCC, GRAD, ATT]
    assert "token_f1" not in md
    parsed = list(csv.reader(io.StringIO(render_matrix(entries, TASK, "csv"))))
    assert parsed[0][:4] == ["suite", "explainer", "entry_id", f"{COMP} mean"]
    assert float(parsed[3][parsed[0].index(f"{SUFF} mean")]) == 0.125
    assert parsed[3][parsed[0].index(f"{F1} mean")] == ""
    assert parsed[0][3:12] == [
        f"{COMP} {c}"
        for c in ("mean", "ci_low", "ci_high", "n", "undefined", "n_seeds", "seed_sd",
                  "seed_min", "seed_max")
    ]
    assert parsed[3][parsed[0].index(f"{SUFF} n_seeds")] == "1"


def test_render_matrix_with_seeds(tmp_path):
    # seed means 2 and 4 (attention), 1 and 1 (gradient); see test_rank_ci_over_seeds_...
    seeded_entry(tmp_path, ATT, {0: [1.0, 2.0, 3.0], 1: [3.0, 4.0, 5.0]})
    seeded_entry(tmp_path, GRAD, {0: [1.0, 1.0, 1.0], 1: [1.0, 1.0, 1.0]})
    lines = render_matrix(read_entries(tmp_path), TASK, "markdown").splitlines()
    assert lines[2].startswith(f"| {ATT} ") and " s 2.000–4.000 |" in lines[2]
    assert " 1.000 [1.000, 1.000] s 1.000–1.000 |" in lines[3]
    assert lines[-5] == (f"{TASK} (validation split, model seeds 0 1); sorted by "
                         "comprehensiveness ↑; cells: mean [95% CI] s min–max")
    assert lines[-3].endswith("s: range of the per-seed means over 2 seeds")
    assert lines[-1] == OVERLAP_IS_NO_TEST


def test_render_comparison(tmp_path):
    base = [(i % 8) / 8 for i in range(200)]
    a = make_entry(tmp_path, ATT, {COMP: [v + 0.5 for v in base]})
    b = make_entry(tmp_path, GRAD, {COMP: base})
    rows = compare(a, b)
    md = render_comparison(rows, "markdown")
    lines = md.splitlines()
    assert md_cells(lines[0])[-3:] == ["p", "p (Holm)", "better"]
    # p = 1/2001, one row: p (Holm) = p
    assert md_cells(lines[2])[-4:] == ["0.500 [0.500, 0.500]", "<0.001", "<0.001", ATT]
    assert f"A = {ATT} (entry {a.entry_id}); B = {GRAD} (entry {b.entry_id})" in md
    assert lines[-1] == (
        "p: paired two-sided sign-flip test (monte carlo) of mean(A − B) = 0 on the shared "
        "examples (conditional on the model checkpoint); p (Holm): Holm–Bonferroni over the "
        "1 row; better: named only where p (Holm) < 0.05 and the CI of A − B excludes 0. "
        "CI of A − B: bootstrap over examples."
    )
    parsed = list(csv.reader(io.StringIO(render_comparison(rows, "csv"))))
    line = dict(zip(parsed[0], parsed[1]))
    assert float(line["diff"]) == 0.5 and int(line["n"]) == 200 and line["better"] == ATT
    assert float(line["p_value"]) == float(line["p_holm"]) == 1 / 2001
    assert (line["test"], line["n_seeds"]) == ("sign-flip monte carlo", "1")


def test_render_comparison_holm_column(tmp_path):
    # p = 0.03125 and 1 (see test_compare_holm_...): Holm 0.0625 and 1, no winner
    a = make_entry(tmp_path, ATT, {COMP: [0.75] * 6, SUFF: [0.5] * 6})
    b = make_entry(tmp_path, GRAD, {COMP: [0.5] * 6, SUFF: [0.5] * 6})
    lines = render_comparison(compare(a, b), "markdown").splitlines()
    assert md_cells(lines[2])[-3:] == ["0.031", "0.062", NO_DIFFERENCE]
    assert md_cells(lines[3])[-3:] == ["1.000", "1.000", NO_DIFFERENCE]
    assert "sign-flip test (exact)" in lines[-1] and "over the 2 rows" in lines[-1]



# --- which examples: part of the suite --------------------------------------------------


def chosen_entry(root, explainer, values, run, *, task=TASK):
    """An entry whose records say how their run chose the examples (``run``: the
    RunConfig fields limit / sample / sample_seed, as records carry them)."""
    rec = record(explainer, COMP, values, task=task)
    rec["provenance"]["config"] = {"run": run}
    path = write_entry(root, explainer_spec={"name": explainer.split("[")[0].split("@")[0]},
                       results=[rec],
                       per_example=rows_of(COMP, values, task=task))
    return read_entry(path)


def test_entries_on_other_examples_are_another_suite(tmp_path):
    full = chosen_entry(tmp_path, ATT, [0.5] * 4, {"limit": None})
    first = chosen_entry(tmp_path, OCC, [0.25] * 4, {"limit": 4})
    drawn = chosen_entry(tmp_path, GRAD, [0.75] * 4, {"sample": 4, "sample_seed": 3})
    assert (full.suite[TASK]["examples"], first.suite[TASK]["examples"],
            drawn.suite[TASK]["examples"]) == ("all", "first 4", "random 4 (seed 3)")
    # same split, data, checkpoint and n: only the examples differ, and that is enough
    # to rank them apart (each first in its own suite), and to refuse comparing them
    rows = rank([full, first, drawn])
    assert [(r.explainer, r.rank, r.suite) for r in rows] == [
        (ATT, 1, "validation split, all examples, model seeds 0"),
        (OCC, 1, "validation split, first 4 examples, model seeds 0"),
        (GRAD, 1, "validation split, random 4 (seed 3) examples, model seeds 0")]
    with pytest.raises(InputError, match="examples 'first 4' vs 'random 4 \\(seed 3\\)'"):
        compare(first, drawn)
    again = chosen_entry(tmp_path / "b", ATT, [0.25] * 4, {"limit": None})
    assert [r.explainer for r in rank([full, again])] == [ATT, ATT]


def test_a_rerun_on_other_examples_is_kept_beside_the_entry(tmp_path):
    """A quick ``--limit`` run must not delete the explainer's full-split entry (it did:
    a new entry replaced every entry of its explainer on its tasks); a re-run on the
    same selection (here: a retrained checkpoint) still replaces it."""
    full = chosen_entry(tmp_path, ATT, [0.5] * 6, {"limit": None})
    keep = chosen_entry(tmp_path, GRAD, [0.5] * 4, {"limit": 4})  # another explainer
    other_task = chosen_entry(tmp_path, ATT, [0.5] * 4, {"limit": 4}, task="nli@1")
    quick = chosen_entry(tmp_path, ATT, [0.25] * 4, {"limit": 4})
    assert sorted(e.entry_id for e in read_entries(tmp_path)) == sorted(
        [full.entry_id, quick.entry_id, keep.entry_id, other_task.entry_id])
    rec = record(ATT, COMP, [0.75] * 4, checkpoint="retrained")
    rec["provenance"]["config"] = {"run": {"limit": 4}}
    again = read_entry(write_entry(tmp_path, explainer_spec={"name": "attention"},
                                   results=[rec], per_example=rows_of(COMP, [0.75] * 4)))
    assert sorted(e.entry_id for e in read_entries(tmp_path)) == sorted(
        [full.entry_id, again.entry_id, keep.entry_id, other_task.entry_id])
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())




def test_compare_names_resolve_within_the_suite(tmp_path):
    """`compare integrated_gradients attention --task sentiment` failed with "matches 2
    entries" once a quick --limit run sat beside the full one. The names now resolve to
    the pair that shares a suite; two such pairs, or none, list the candidates."""
    from faithbench.leaderboard.compare import find_pair
    full_a = chosen_entry(tmp_path, ATT, [0.5] * 4, {"limit": None})
    quick_a = chosen_entry(tmp_path, ATT, [0.5] * 3, {"limit": 3})
    full_g = chosen_entry(tmp_path, GRAD, [0.25] * 4, {"limit": None})
    entries = read_entries(tmp_path)
    pair = find_pair(entries, "attention", "gradient", "sentiment")
    assert (pair[0].entry_id, pair[1].entry_id) == (full_a.entry_id, full_g.entry_id)
    quick_g = chosen_entry(tmp_path, GRAD, [0.25] * 3, {"limit": 3})
    entries = read_entries(tmp_path)
    with pytest.raises(InputError, match="name 2 comparable pairs") as err:
        find_pair(entries, "attention", "gradient")
    for e in (full_a, quick_a, full_g, quick_g):
        assert e.entry_id[:8] in str(err.value)
    assert "first 3 examples" in str(err.value) and "all examples" in str(err.value)
    pair = find_pair(entries, quick_a.entry_id[:8], "gradient")  # an id settles it
    assert pair[1].entry_id == quick_g.entry_id
    with pytest.raises(InputError, match="not scored on the same suite"):
        compare(*find_pair(entries, quick_a.entry_id, full_g.entry_id))
    with pytest.raises(InputError, match="no entry named 'attention'.*same suite as one"):
        find_pair([full_a, quick_a, quick_g], "attention", "gradient", "nli")


def test_latex_sets_the_best_and_its_ties_in_bold_and_names_the_suite(board):
    """comprehensiveness: attention and gradient share rank 1 (equal means), both bold;
    sufficiency (lower is better): occlusion alone; token_f1's underscore escaped."""
    tex = render_matrix(read_entries(board), TASK, "latex")
    lines = tex.splitlines()
    assert lines[:2] == [r"\begin{table}", r"\centering"] and r"\toprule" in lines
    assert r"(validation split, model seeds 0)" in lines[2]
    assert lines[2].startswith(r"\caption{sentiment@1")
    body = {line.split(" & ")[0]: line.split(" & ") for line in lines
            if line.endswith(r"\\") and "@" in line.split(" & ")[0]}
    comp, suff = 2, 3  # explainer, n, comprehensiveness, sufficiency, token_f1
    assert [name for name, cells in body.items() if cells[comp].startswith(r"\textbf")] == \
        [ATT, GRAD]
    assert [name for name, cells in body.items() if cells[suff].startswith(r"\textbf")] == [OCC]
    assert r"token\_f1 $\uparrow$" in tex and "entry" not in lines[5]
    long = render_leaderboard(rank(read_entries(board)), "latex")
    assert long.count(r"\textbf") == sum(r.rank == 1 for r in rank(read_entries(board)))


def test_json_is_one_document_with_every_field_at_full_precision(board, capsys):
    rows = rank(read_entries(board))
    got = json.loads(render_leaderboard(rows, "json"))
    assert [g["entry_id"] for g in got] == [r.entry_id for r in rows]
    assert [g["mean"] for g in got] == [r.mean for r in rows]  # no rounding
    assert {g["suite"] for g in got} == {"validation split, model seeds 0"}
    assert json.loads(render_leaderboard([hand_row(ci_low=float("nan"))], "json"))[0][
        "ci_low"] is None
    from faithbench.benchmark.cli import main
    assert main(["leaderboard", "--entries", str(board), "--wide", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(rows)  # one document


def test_metrics_of_other_n_in_one_suite_make_one_table(tmp_path):
    """Hansards: AER counts sentences (447), erasure counts target words (7,020). An
    entry with both and one with AER alone are one suite; the label once carried the
    entry's largest n, split the suite into two tables, and the AER column vanished
    from one of them."""
    from faithbench.leaderboard.rank import matrices
    both = make_entry(tmp_path, ATT, {COMP: [0.5] * 4, SUFF: [0.25] * 2})
    one = make_entry(tmp_path, GRAD, {SUFF: [0.75] * 2})
    for order in ([both, one], [one, both]):
        [table] = matrices(order, TASK)
        assert table.metrics == [COMP, SUFF] and set(table.explainers.values()) == {ATT, GRAD}


def test_wide_metric_sorts_by_the_named_metrics_default_parameters(tmp_path, capsys,
                                                                   monkeypatch):
    """`--wide --metric aer` beside an `aer[links=threshold;...]` column failed ("matches
    2"); a registered name means its default parameters."""
    from faithbench.benchmark.cli import main
    masked = COMP.replace("eraser=delete", "eraser=mask")
    monkeypatch.setitem(DIRECTION, masked, "higher")
    make_entry(tmp_path, ATT, {COMP: [0.5] * 3, masked: [0.9] * 3})
    make_entry(tmp_path, GRAD, {COMP: [0.7] * 3, masked: [0.1] * 3})
    assert main(["leaderboard", "--entries", str(tmp_path), "--wide", "--format", "markdown",
                 "--metric", "comprehensiveness", "--full-ids"]) == 0
    body = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [md_cells(line)[0] for line in body[1:]] == [GRAD, ATT]  # by the delete eraser
    # only the mask column shown: --metric comprehensiveness sorts by it, as it did
    assert main(["leaderboard", "--entries", str(tmp_path), "--wide", "--format", "markdown",
                 "--metrics", "comprehensiveness[eraser=mask]", "--metric",
                 "comprehensiveness", "--full-ids"]) == 0
    body = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [md_cells(line)[0] for line in body[1:]] == [ATT, GRAD]


def test_short_names_by_default_with_the_parameters_that_tell_settings_apart(tmp_path,
                                                                             capsys):
    """Tables name explainers by name (``--short-names`` is the default): ``random``
    reads as its name; two settings of integrated gradients in one suite read with the
    parameter they differ in, so the rows stay apart; ``--full-ids`` and CSV keep ids."""
    from faithbench.benchmark.cli import main

    out = tmp_path / "r"
    assert main(["run", "--out", str(out), "--explainers", "random", "integrated_gradients",
                 "integrated_gradients[n_steps=4]", "--metrics", "comprehensiveness",
                 "--limit", "12", "--no-progress"]) == 0
    capsys.readouterr()
    board = str(out / "leaderboard")
    for extra in ([], ["--wide"]):
        assert main(["leaderboard", "--entries", board, "--format", "markdown",
                     "--short-names", *extra]) == 0
        text = capsys.readouterr().out
        assert "| random " in text and "random[distribution=uniform]@1" not in text
        assert "| integrated_gradients[n_steps=4] " in text
        assert "| integrated_gradients[n_steps=50] " in text and "method=" not in text
    assert main(["leaderboard", "--entries", board, "--format", "markdown", "--full-ids"]) == 0
    assert "integrated_gradients[baseline=baseline_id;method=gausslegendre;n_steps=4]@1" \
        in capsys.readouterr().out
    assert main(["leaderboard", "--entries", board, "--format", "csv", "--short-names"]) == 0
    assert "random[distribution=uniform]@1" in capsys.readouterr().out
