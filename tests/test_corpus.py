"""Corpus-level metrics: per-example sufficient statistics, an aggregation of their
sums, a bootstrap that re-aggregates resamples, and a paired randomization test —
checked against independent computations, and end to end through a run, the
leaderboard and compare."""

from __future__ import annotations

import math

import numpy as np
import pytest

from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.records import read_jsonl, read_results
from faithbench.benchmark.core.stats import (
    SEED_T,
    Aggregation,
    bootstrap,
    corpus_bootstrap,
    paired_corpus_test,
    sign_flip_test,
)
from faithbench.benchmark.plan import RunConfig, unit_key
from faithbench.benchmark.runner import run
from faithbench.leaderboard.compare import compare
from faithbench.leaderboard.entry import read_entries, write_entry
from faithbench.leaderboard.rank import rank

AER = Aggregation(("a_s", "a_p", "a", "s"), (1, 1, 0, 0), (0, 0, 1, 1), 1.0, -1.0)
MEAN = Aggregation(("value", "count"), (1, 0), (0, 1))


def _aer(stats) -> float:
    a_s, a_p, a, s = np.asarray(stats, dtype=float).sum(axis=0)
    return 1 - (a_s + a_p) / (a + s)


def test_corpus_bootstrap_resamples_sentences_and_re_aggregates():
    """Against the procedure written out: draw n sentences with replacement from
    numpy's generator seeded 0, sum their counts, take AER of the sums."""
    rng = np.random.default_rng(5)
    a = rng.integers(1, 6, size=40)
    s = rng.integers(0, 5, size=40)
    a_s = np.minimum(a, s) // 2
    stats = np.stack([a_s, a_s + 1, a, s], axis=1).astype(float)
    est = corpus_bootstrap(stats, AER, n_resamples=300)
    draws = np.random.default_rng(0).integers(0, 40, size=(300, 40))
    values = [_aer(stats[d]) for d in draws]
    assert est.mean == pytest.approx(_aer(stats), abs=1e-15)
    assert (est.ci_low, est.ci_high) == pytest.approx(
        tuple(np.quantile(values, [0.025, 0.975])), abs=1e-12)
    # the mean of per-sentence AERs is another number: the ratio is of sums
    per_sentence = np.mean([_aer(row[None]) for row in stats if row[2] + row[3]])
    assert abs(per_sentence - est.mean) > 1e-3


def test_two_seeds_average_the_per_seed_corpus_values():
    s0 = [[1, 2, 2, 1], [0, 1, 2, 2]]  # AER 3/7
    s1 = [[1, 1, 1, 1], [1, 1, 1, 1]]  # AER 0
    est = corpus_bootstrap([s0, s1], AER, n_resamples=200)
    assert est.seed_means == pytest.approx((3 / 7, 0.0)) and est.mean == pytest.approx(1.5 / 7)
    assert est.n == 2 and est.n_seeds == 2 and est.seed_sd == pytest.approx(
        np.std([3 / 7, 0.0], ddof=1))


def test_a_mean_is_the_ratio_of_a_value_sum_and_a_count():
    values = np.random.default_rng(1).normal(size=57)
    stats = np.stack([values, np.ones_like(values)], axis=1)
    a, b = corpus_bootstrap(stats, MEAN), bootstrap(values)
    assert a.mean == pytest.approx(b.mean, abs=1e-14)
    assert (a.ci_low, a.ci_high) == pytest.approx((b.ci_low, b.ci_high), abs=1e-12)


@pytest.mark.parametrize("n", [6, 40])  # exact enumeration, then Monte Carlo
def test_swapping_examples_is_the_sign_flip_test_for_a_mean(n):
    rng = np.random.default_rng(n)
    x, y = rng.normal(size=n), rng.normal(size=n) + 0.3
    ones = np.ones(n)
    swap = paired_corpus_test(np.stack([x, ones], 1), np.stack([y, ones], 1), MEAN)
    flip = sign_flip_test(x, y)
    assert swap.p_value == pytest.approx(flip.p_value, abs=1e-12)
    assert swap.diff == pytest.approx(flip.diff, abs=1e-12)
    assert swap.test.split()[-1] == flip.test.split()[-1]  # exact / carlo alike


def test_swap_test_by_hand():
    """a aligns both sentences perfectly (AER 0), b gets every link wrong (AER 1).
    Of the 4 swap patterns, none and both give |diff| = 1, one swap gives 0: p = 1/2."""
    a = [[1, 1, 1, 1], [1, 1, 1, 1]]
    b = [[0, 0, 1, 1], [0, 0, 1, 1]]
    r = paired_corpus_test(a, b, AER)
    assert (r.diff, r.p_value, r.n, r.test) == (-1.0, 0.5, 2, "swap exact")


def test_a_zero_corpus_denominator_is_refused():
    with pytest.raises(ValueError, match="zero denominator"):
        corpus_bootstrap([[0, 0, 0, 0]], AER)


@pytest.fixture(scope="module")
def micro_run(tmp_path_factory, synthetic_ready):
    out = tmp_path_factory.mktemp("micro")
    summary = run(RunConfig(out=str(out), explainers=("random", "occlusion"), seeds=(0, 1),
                            metrics=("token_f1_micro", "token_f1"), limit=24, batch_size=8,
                            progress=False))
    assert summary.exit_code == 0, summary.failures
    return out


def test_micro_f1_record_is_the_pooled_count(micro_run, synthetic_ready):
    """Recount from the explanation cache: top ceil(rate · n) tokens against the planted
    words, with rate the mean |R| / n of the 24 examples; 2 Σ hits / (Σ k + Σ |R|)."""
    records = [r for r in read_results(micro_run / "results.jsonl")
               if r.metric.startswith("token_f1_micro") and r.model_seed == 0]
    assert len(records) == 2
    examples = synthetic_ready.examples("test", 24)
    rate = sum(sum(e.reference) / len(e.reference) for e in examples) / 24
    for r in records:
        assert r.aggregation == {"stats": ["hits", "selected", "reference"],
                                 "numerator": [2.0, 0.0, 0.0], "denominator": [0.0, 1.0, 1.0],
                                 "offset": 0.0, "scale": 1.0}
        name = r.explainer.split("[")[0].split("@")[0]
        key = unit_key(r.provenance.checkpoint, r.explainer, "explanations", "test", 24,
                       seed=r.model_seed, data=r.provenance.data_fingerprint)
        path = micro_run / "explanations" / f"synthetic-{name}-{key}.jsonl"
        cached = {row["id"]: row["scores"] for row in read_jsonl(path)}
        hits = picked = marked = 0
        for e in examples:
            s = cached[e.id]
            k = min(max(math.ceil(rate * len(s) - 1e-9), 1), len(s))
            top = sorted(range(len(s)), key=lambda i: (-s[i], i))[:k]
            hits += sum(e.reference[i] for i in top)
            picked += k
            marked += sum(e.reference)
        assert r.estimate.mean == pytest.approx(2 * hits / (picked + marked), abs=1e-12)
        rows = read_jsonl(micro_run / r.per_example_file)
        assert sum(row["stats"][0] for row in rows) == hits
        assert r.estimate.ci_low < r.estimate.mean < r.estimate.ci_high


def test_leaderboard_ranks_and_compares_a_corpus_metric(micro_run):
    entries = read_entries(micro_run / "leaderboard")
    rows = [r for r in rank(entries, metric="token_f1_micro")]
    assert [r.explainer_name for r in rows] == ["occlusion", "random"]
    records = {(r.explainer, r.model_seed): r.estimate.mean
               for r in read_results(micro_run / "results.jsonl")
               if r.metric.startswith("token_f1_micro")}
    for row in rows:  # two seeds: the mean of the two per-seed corpus values
        per_seed = [records[(row.explainer, s)] for s in (0, 1)]
        assert row.mean == pytest.approx(sum(per_seed) / 2, abs=1e-12)
        assert (row.seed_min, row.seed_max) == pytest.approx(
            (min(per_seed), max(per_seed)), abs=1e-12)
    occlusion, random = (next(e for e in entries if e.name == n) for n in ("occlusion", "random"))
    [row] = compare(occlusion, random, metric="token_f1_micro")
    # two seeds: the seed-aware t over the linearized statistics, not the swap test
    assert (row.test, row.n, row.n_seeds) == (SEED_T, 24, 2)
    assert row.mean_a == pytest.approx(rows[0].mean, abs=1e-12)
    assert row.better == occlusion.explainer  # planted words vs a random order


def test_an_entry_whose_stats_do_not_give_its_value_is_refused(micro_run, tmp_path):
    [entry] = [e for e in read_entries(micro_run / "leaderboard") if e.name == "random"]
    rows = [dict(r) for r in entry.per_example]
    for r in rows:
        if r["metric"].startswith("token_f1_micro"):
            r["stats"] = [r["stats"][0] + 1, r["stats"][1], r["stats"][2]]
            break
    with pytest.raises(InputError, match="stats aggregate to"):
        write_entry(tmp_path, explainer_spec=entry.header["explainer_spec"],
                    results=entry.results, per_example=rows)
    for r in rows:
        r.pop("stats", None)
    with pytest.raises(InputError, match="is corpus-level: expected 3 finite numbers"):
        write_entry(tmp_path, explainer_spec=entry.header["explainer_spec"],
                    results=entry.results, per_example=rows)
