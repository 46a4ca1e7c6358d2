"""faithbench.benchmark.core.stats: the bootstraps, the sign-flip test and Holm's correction.

Expected values are worked out by hand in the comments; the one exception is the
two-level bootstrap with one seed, whose whole point is to equal ``bootstrap``.
"""

import math

import numpy as np
import pytest

from faithbench.benchmark.core.stats import (
    BOOTSTRAP,
    SEED_T,
    Aggregation,
    SeedEstimate,
    bootstrap,
    corpus_bootstrap,
    corpus_estimate,
    holm,
    paired_seed_test,
    seed_estimate,
    sign_flip_test,
    two_level_bootstrap,
)

# --- sign-flip test -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("d", "p"),
    [
        # n = 1: +d and -d both reach |d|
        ([0.5], 1.0),
        # 1+2+3 = 6; of the 8 sums +-1+-2+-3 only +6 and -6 reach |6|
        ([1.0, 2.0, 3.0], 2 / 8),
        # sums +-2+-1: 3, 1, -1, -3; |3| twice
        ([2.0, 1.0], 2 / 4),
        # observed 0: every pattern is at least as extreme
        ([1.0, -1.0], 1.0),
        # four equal: only all-plus and all-minus reach |4|
        ([1.0, 1.0, 1.0, 1.0], 2 / 16),
        # 0 has no sign: 2 * 2 of the 8 patterns of +-1+-1+-0 reach |2|
        ([1.0, 1.0, 0.0], 4 / 8),
    ],
)
def test_sign_flip_exact_p_by_hand(d, p):
    r = sign_flip_test(d, [0.0] * len(d))
    assert (r.p_value, r.test, r.n) == (p, "sign-flip exact", len(d))
    assert r.diff == sum(d) / len(d)


def test_sign_flip_is_symmetric_and_paired():
    # a - b is what counts, not a and b apart: same d, same p; swapping flips the sign
    r = sign_flip_test([10.0, 20.0, 30.0], [9.0, 18.0, 27.0])
    swapped = sign_flip_test([9.0, 18.0, 27.0], [10.0, 20.0, 30.0])
    assert (r.diff, r.p_value) == (2.0, 0.25)
    assert (swapped.diff, swapped.p_value) == (-2.0, 0.25)


def test_sign_flip_switches_to_monte_carlo_past_the_budget():
    # 2^10 = 1024 <= 2000: exact; 2^11 = 2048 > 2000: 2000 random patterns
    assert sign_flip_test([1.0] * 10, [0.0] * 10).test == "sign-flip exact"
    assert sign_flip_test([1.0] * 10, [0.0] * 10).p_value == 2 / 1024
    assert sign_flip_test([1.0] * 3, [0.0] * 3, n_resamples=7).test == "sign-flip monte carlo"
    # d = 0: every drawn pattern counts, (2000 + 1) / (2000 + 1)
    zero = sign_flip_test([0.25] * 11, [0.25] * 11)
    assert (zero.p_value, zero.test) == (1.0, "sign-flip monte carlo")
    # 40 equal d: a pattern reaches |d| only if all 40 signs agree (2^-39 per draw),
    # so none of 2000 does and p is the smallest it can be, 1 / 2001
    shift = sign_flip_test([1.0] * 40, [0.0] * 40)
    assert (shift.p_value, shift.diff, shift.ci_low, shift.ci_high) == (1 / 2001, 1.0, 1.0, 1.0)


def test_sign_flip_ci_is_the_bootstrap_of_the_differences():
    a, b = [0.5, 0.25, 1.0, 0.75, 0.0], [0.25, 0.25, 0.5, 0.0, 0.25]
    r = sign_flip_test(a, b, n_resamples=500, alpha=0.1, seed=3)
    e = bootstrap([0.25, 0.0, 0.5, 0.75, -0.25], n_resamples=500, alpha=0.1, seed=3)
    assert (r.diff, r.ci_low, r.ci_high) == (e.mean, e.ci_low, e.ci_high)
    assert r.as_dict()["test"] == "sign-flip exact"  # 2^5 = 32 <= 500


def test_sign_flip_refuses_bad_input():
    with pytest.raises(ValueError, match="same non-zero length"):
        sign_flip_test([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="same non-zero length"):
        sign_flip_test([], [])
    with pytest.raises(ValueError, match="non-finite"):
        sign_flip_test([1.0, math.nan], [0.0, 0.0])


# --- Holm ---------------------------------------------------------------------------------


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 times 3, 2, 1: 0.03, 0.06, 0.04 -> running max 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06], rel=1e-12, abs=0)
    # 0.01 * 2 = 0.02; 0.04 * 1 = 0.04; input order kept
    assert holm([0.04, 0.01]) == pytest.approx([0.04, 0.02], rel=1e-12, abs=0)
    # capped at 1
    assert holm([0.6, 0.2, 0.9]) == pytest.approx([1.0, 0.6, 1.0], rel=1e-12, abs=0)
    assert holm([0.03125]) == [0.03125] and holm([]) == []


def test_holm_refuses_non_p_values():
    with pytest.raises(ValueError, match="outside"):
        holm([0.5, 1.5])
    with pytest.raises(ValueError, match="outside"):
        holm([math.nan])


# --- two-level bootstrap ------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 100, 3001])
@pytest.mark.parametrize("settings", [{}, {"n_resamples": 333, "alpha": 0.1, "seed": 7}])
def test_two_level_with_one_seed_is_bootstrap_exactly(n, settings):
    values = np.random.default_rng(n).normal(size=n)
    one = bootstrap(values, **settings)
    two = two_level_bootstrap([values], **settings)
    assert isinstance(two, SeedEstimate)
    fields = ("mean", "ci_low", "ci_high", "n", "n_resamples", "confidence", "bootstrap_seed",
              "method", "undefined")
    assert {f: getattr(two, f) for f in fields} == one.as_dict()
    assert seed_estimate([values], **settings) == two
    assert (two.n_seeds, two.seed_means, two.seed_sd) == (1, (one.mean,), 0.0)
    assert two.seed_min == two.seed_max == one.mean


def test_two_level_by_hand():
    # rows constant: a resample's mean is the mean of the 2 seed rows drawn, which is
    # 1, 2 or 3 with chance 1/4, 1/2, 1/4; the 2.5% and 97.5% quantiles are 1 and 3
    e = two_level_bootstrap([[1.0, 1.0, 1.0], [3.0, 3.0, 3.0]])
    assert (e.mean, e.ci_low, e.ci_high, e.n, e.n_seeds) == (2.0, 1.0, 3.0, 3, 2)
    assert (e.seed_means, e.seed_sd, e.seed_min, e.seed_max) == ((1.0, 3.0), math.sqrt(2), 1.0, 3.0)
    assert e.as_dict()["seed_means"] == [1.0, 3.0]


def test_two_level_ci_is_wider_when_seeds_disagree():
    # seed 1 is seed 0 plus 1 on every example: the seed-averaged values base + 0.5 lie
    # in [0.625, 1.0], and so does their one-level CI. In the two-level bootstrap a
    # quarter of the resamples draw seed 0 twice (mean <= max(base) = 0.5) and a
    # quarter seed 1 twice (mean >= min(base) + 1 = 1.125): the 2.5% and 97.5%
    # quantiles fall outside [0.625, 1.0] on both sides.
    base = [0.25, 0.5, 0.375, 0.125, 0.25, 0.5, 0.375, 0.125]
    one = bootstrap([v + 0.5 for v in base])
    two = two_level_bootstrap([base, [v + 1 for v in base]])
    assert two.mean == one.mean == 0.8125
    assert 0.625 <= one.ci_low and one.ci_high <= 1.0
    assert two.ci_low <= 0.5 and two.ci_high >= 1.125
    assert two.ci_high - two.ci_low > one.ci_high - one.ci_low
    assert (two.seed_means, two.seed_sd) == ((0.3125, 1.3125), math.sqrt(0.5))


def test_two_level_refuses_bad_input():
    with pytest.raises(ValueError, match="non-empty"):
        two_level_bootstrap([[]])
    with pytest.raises(ValueError, match="non-empty"):
        two_level_bootstrap([1.0, 2.0])  # 1-d: say which seed each value came from
    with pytest.raises(ValueError, match="non-finite"):
        two_level_bootstrap([[1.0, math.inf], [1.0, 2.0]])


# --- the seed-level interval: t over seed means plus the example variance --------------------

T975 = {1: 12.706204736174698, 2: 4.302652729749464, 3: 3.182446305284263}  # t tables


def test_seed_estimate_by_hand():
    # rows (1, 3, 2, 4) and (3, 3, 6, 4): seed means 2.5 and 4, v_seed = var(2.5, 4)/2 =
    # 1.125/2 = 0.5625. Example means 2, 3, 4, 4 (variance 11/12); interaction
    # x - row - col + grand: row 0 (-0.25, 0.75, -1.25, 0.75), row 1 the negatives,
    # sum of squares 2 * 2.75 = 5.5 over (1 * 3) df: 11/6; v_example = (11/12 - 11/12)/4 = 0
    e = seed_estimate([[1.0, 3.0, 2.0, 4.0], [3.0, 3.0, 6.0, 4.0]])
    half = T975[1] * math.sqrt(0.5625)
    assert (e.mean, e.n, e.n_seeds, e.method) == (3.25, 4, 2, SEED_T)
    assert (e.ci_low, e.ci_high) == pytest.approx((3.25 - half, 3.25 + half), abs=1e-12)
    assert (e.seed_means, e.seed_sd) == ((2.5, 4.0), pytest.approx(math.sqrt(1.125)))
    # seeds identical: only the example part, on N - 1 = 3 df: var(1, 2, 3, 6) = 14/3
    same = seed_estimate([[1.0, 2.0, 3.0, 6.0]] * 3)
    half = T975[3] * math.sqrt(14 / 3 / 4)
    assert (same.ci_low, same.ci_high) == pytest.approx((3 - half, 3 + half), abs=1e-12)


def test_seed_estimate_reaches_past_the_extreme_seeds():
    # the old two-level bootstrap never leaves [min seed mean, max seed mean] when the
    # examples agree within a seed; the t interval does (seed means 1, 2, 3:
    # sd 1, half-width t(2 df) / sqrt(3) = 2.484)
    rows = [[1.0] * 5, [2.0] * 5, [3.0] * 5]
    old, new = two_level_bootstrap(rows), seed_estimate(rows)
    assert (old.ci_low, old.ci_high) == (1.0, 3.0)
    assert (new.ci_low, new.ci_high) == pytest.approx((2 - T975[2] / math.sqrt(3),
                                                       2 + T975[2] / math.sqrt(3)))


def test_corpus_estimate_by_hand():
    # hits over trials per example; seed 0: (0, 2), (2, 2) -> R = 1/2; seed 1: (1, 1),
    # (3, 3) -> R = 1. Pseudo-values R + (hit - R n) / mean(n): seed 0 (0, 1), seed 1
    # (1, 1): v_seed = var(0.5, 1)/2 = 1/16; example means (0.5, 1), var 1/8; the
    # interaction (-0.25, 0.25 / 0.25, -0.25) has mean square 0.25; v_example =
    # max(0, 1/8 - 0.25/2) / 2 = 0
    ratio = Aggregation(("hit", "n"), (1, 0), (0, 1))
    e = corpus_estimate([[[0, 2], [2, 2]], [[1, 1], [3, 3]]], ratio)
    assert (e.mean, e.seed_means, e.method, e.n) == (0.75, (0.5, 1.0), SEED_T, 2)
    assert e.ci_high - e.mean == pytest.approx(T975[1] / 4, abs=1e-12)
    one = corpus_estimate([[[0, 2], [2, 2]]], ratio)
    assert one == corpus_bootstrap([[0, 2], [2, 2]], ratio)
    assert one.method == BOOTSTRAP


def test_paired_seed_test_p_matches_its_interval():
    # p < alpha exactly when the (1 - alpha) CI of the difference excludes 0: at
    # alpha = p the interval's edge sits on 0
    rng = np.random.default_rng(3)
    a = rng.normal(0.3, 1.0, (3, 40)) + rng.normal(0, 0.2, (3, 1))
    b = np.zeros((3, 40))
    r = paired_seed_test(a, b)
    assert (r.diff, r.n, r.test) == (pytest.approx(a.mean()), 40, SEED_T)
    at_p = seed_estimate(a - b, alpha=r.p_value)
    assert at_p.ci_low == pytest.approx(0.0, abs=1e-9)
    assert (r.ci_low, r.ci_high) == pytest.approx((seed_estimate(a).ci_low,
                                                   seed_estimate(a).ci_high))
    # no difference at all: p = 1; a constant non-zero difference: p = 0
    assert paired_seed_test(b + 1, b + 1).p_value == 1.0
    assert paired_seed_test(b + 1, b).p_value == 0.0
