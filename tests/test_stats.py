"""benchmark.core.stats: the bootstraps, the sign-flip test and Holm's correction.

Expected values are worked out by hand in the comments; the one exception is the
two-level bootstrap with one seed, whose whole point is to equal ``bootstrap``.
"""

import math

import numpy as np
import pytest

from benchmark.core.stats import (
    SeedEstimate,
    bootstrap,
    holm,
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
    fields = ("mean", "ci_low", "ci_high", "n", "n_resamples", "confidence", "bootstrap_seed")
    assert {f: getattr(two, f) for f in fields} == one.as_dict()
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
