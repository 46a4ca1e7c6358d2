"""Erasure curves: each example's per-step drops are stored beside its value (whose
mean they are), a curve's point is the mean over the examples that reach the step
under every seed with the leaderboard's interval, and curves travel through a release
to the site. The per-step values themselves are hand-worked in the metrics' doctests
(``faithbench.metrics.erasure``: [0.1, 0.2667, 0.1] on the voting model)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from faithbench.benchmark.cli import main
from faithbench.benchmark.core.errors import DataFileError
from faithbench.benchmark.core.stats import bootstrap, seed_estimate
from faithbench.leaderboard.curves import FRACTION_AXIS, K_AXIS, curve_of, curves
from faithbench.leaderboard.entry import read_entries
from faithbench.leaderboard.release import read_release, write_release
from faithbench.leaderboard.suite import check_rows

METRICS = ["aopc_morf", "comprehensiveness", "sufficiency", "flip_rate"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, isolated_cache):
    """Entries of two explainers: one with two model seeds, one with one."""
    root = tmp_path_factory.mktemp("curves")
    for seeds, out in ((["0", "1"], "two"), (["0"], "one")):
        assert main(["run", "--out", str(root / out), "--explainers", "attention", "random",
                     "--metrics", *METRICS, "--limit", "40", "--seeds", *seeds,
                     "--no-progress"]) == 0
    return root


def rows_of(entry, metric_name: str) -> list[dict]:
    return [r for r in entry.per_example if r["metric"].startswith(metric_name + "[")]


def test_each_value_is_the_mean_of_its_curve(runs):
    for entry in read_entries(runs / "two" / "leaderboard"):
        for name in ("aopc_morf", "comprehensiveness", "sufficiency"):
            rows = rows_of(entry, name)
            assert len(rows) == 80  # 40 examples x 2 seeds
            for row in rows:
                points = [x for x in row["curve"] if x is not None]
                assert row["value"] == pytest.approx(sum(points) / len(points), abs=1e-12)
        assert all("curve" not in r for r in rows_of(entry, "flip_rate"))


def test_a_point_is_the_mean_over_seeds_and_examples_with_the_boards_interval(runs):
    entry = next(e for e in read_entries(runs / "two" / "leaderboard") if e.name == "attention")
    metric = rows_of(entry, "aopc_morf")[0]["metric"]
    task = rows_of(entry, "aopc_morf")[0]["task"]
    got = curve_of(entry, task, metric)
    assert got.axis == K_AXIS and got.x == [float(k) for k in range(1, len(got.x) + 1)]
    for j in range(len(got.x)):
        by_seed: dict[int, dict[str, float]] = {0: {}, 1: {}}
        for r in rows_of(entry, "aopc_morf"):
            if j < len(r["curve"]) and r["curve"][j] is not None:
                by_seed[r["model_seed"]][r["id"]] = r["curve"][j]
        ids = sorted(set(by_seed[0]) & set(by_seed[1]))
        matrix = np.array([[by_seed[s][i] for i in ids] for s in (0, 1)])
        assert got.n[j] == len(ids)
        assert got.mean[j] == pytest.approx(matrix.mean(), abs=1e-12)
        want = seed_estimate(matrix)
        assert (got.ci_low[j], got.ci_high[j]) == pytest.approx((want.ci_low, want.ci_high))
        assert got.ci_low[j] <= got.mean[j] <= got.ci_high[j]


def test_one_seed_curves_use_the_bootstrap_over_examples(runs):
    entry = next(e for e in read_entries(runs / "one" / "leaderboard") if e.name == "random")
    row = rows_of(entry, "comprehensiveness")[0]
    got = curve_of(entry, row["task"], row["metric"])
    assert got.axis == FRACTION_AXIS and got.x == [0.01, 0.05, 0.1, 0.2, 0.5]
    first = sorted((r["id"], r["curve"][0]) for r in rows_of(entry, "comprehensiveness")
                   if r["curve"][0] is not None)  # by example id, as the seed matrix has them
    settings = next(r for r in entry.results if r.metric == row["metric"]).estimate.settings()
    want = bootstrap(np.array([v for _, v in first]), **settings)
    assert (got.mean[0], got.ci_low[0], got.ci_high[0]) == pytest.approx(
        (want.mean, want.ci_low, want.ci_high))


def test_curves_travel_through_a_release_to_the_site(runs, tmp_path):
    entries = read_entries(runs / "two" / "leaderboard")
    write_release(entries, tmp_path / "v9", "9")
    release = read_release(tmp_path / "v9")
    assert release.curves == curves(entries)
    assert {c.metric.split("[")[0] for c in release.curves} == {
        "aopc_morf", "comprehensiveness", "sufficiency"}
    assert main(["site", "--published", str(tmp_path / "v9"), "--out",
                 str(tmp_path / "site")]) == 0
    page = next(p for p in (tmp_path / "site").glob("suite-*.html"))
    text = page.read_text()
    assert text.count("the drop at each step it averages") == 3  # one per erasure metric


def test_a_malformed_curve_names_its_line_and_field(runs):
    entry = read_entries(runs / "one" / "leaderboard")[0]
    rows = [dict(r) for r in entry.per_example]
    bad = next(i for i, r in enumerate(rows) if "curve" in r)
    rows[bad]["curve"] = [0.1, "x"]
    with pytest.raises(DataFileError) as err:
        check_rows(rows, entry.results)
    assert f"line {bad + 1}" in str(err.value) and "curve" in str(err.value)
    assert json.dumps(rows[bad]["curve"]) in str(err.value).replace("'", '"')
