"""RACU as Madsen et al. (2022) compute it (``area_between`` in their
export/roar_plot.py): the relative area of each seed's curves against the random curve
of the same seed, then the mean over seeds; checked by hand, against a transcription of
their per-seed formula, and its interval against the linearized values written out."""

import numpy as np
import pytest

from faithbench.benchmark.core.stats import racu, racu_estimate, seed_estimate

X = [0.0, 0.1, 0.5, 1.0]


def test_racu_is_the_area_ratio_of_madsen_et_al_by_hand():
    rand = [0.9, 0.85, 0.7, 0.5]
    # random minus explainer: 0, 0.05, 0.1, 0 -> 0.1*0.025 + 0.4*0.075 + 0.5*0.05 = 0.0575
    # random minus its end:   0.4, 0.35, 0.2, 0 -> 0.1*0.375 + 0.4*0.275 + 0.5*0.1 = 0.1975
    assert racu(X, rand, [0.9, 0.8, 0.6, 0.5]) == pytest.approx(0.0575 / 0.1975, abs=1e-12)
    assert racu(X, rand, rand) == 0.0
    # at the all-masked floor from the first ratio on: 0.1*0.175 + 0.4*0.275 + 0.5*0.1 = 0.1775
    assert racu(X, rand, [0.9, 0.5, 0.5, 0.5]) == pytest.approx(0.1775 / 0.1975, abs=1e-12)
    # below the floor: 0, 0.55, 0.4, 0 -> 0.1*0.275 + 0.4*0.475 + 0.5*0.2 = 0.3175, not
    # clipped to 1 (a clip would pile bootstrap values at the end of the range)
    assert racu(X, rand, [0.9, 0.3, 0.3, 0.5]) == pytest.approx(0.3175 / 0.1975, abs=1e-12)
    # worse than random: 0, -0.1, -0.25, 0 -> -(0.1*0.05 + 0.4*0.175 + 0.5*0.125) = -0.1375
    assert racu(X, rand, [0.9, 0.95, 0.95, 0.5]) == pytest.approx(-0.1375 / 0.1975, abs=1e-12)
    assert np.isnan(racu(X, [0.5, 0.5, 0.5, 0.5], [0.5, 0.4, 0.4, 0.5]))  # random never drops


def _rows(curves_by_seed, n=20):
    """(P, S, n) correctness whose row means are exactly the given curves (multiples of
    1/n), each point's correct examples first."""
    out = np.zeros((len(curves_by_seed[0]), len(curves_by_seed), n))
    for s, curve in enumerate(curves_by_seed):
        for p, value in enumerate(curve):
            out[p, s, : round(value * n)] = 1.0
    return out


def test_racu_estimate_is_the_mean_of_per_seed_ratios_not_the_ratio_of_mean_curves():
    rand = _rows([[0.9, 0.85, 0.7, 0.5], [0.8, 0.8, 0.6, 0.5]])
    mine = _rows([[0.9, 0.8, 0.6, 0.5], [0.8, 0.5, 0.5, 0.5]])
    # seed 0: 0.0575 / 0.1975 (above). Seed 1: random minus explainer 0, 0.3, 0.1, 0 ->
    # 0.1*0.15 + 0.4*0.2 + 0.5*0.05 = 0.12; random minus its end 0.3, 0.3, 0.1, 0 ->
    # 0.1*0.3 + 0.4*0.2 + 0.5*0.05 = 0.135
    seeds = (0.0575 / 0.1975, 0.12 / 0.135)
    e = racu_estimate(X, rand, mine)
    assert e.seed_means == pytest.approx(seeds, abs=1e-12)
    assert e.mean == pytest.approx((seeds[0] + seeds[1]) / 2, abs=1e-12)  # 0.590
    # the ratio of the mean curves, which faithbench reported before, is another number:
    # 0, 0.175, 0.1, 0 -> 0.08875 over 0.35, 0.325, 0.15, 0 -> 0.16625, i.e. 0.534
    assert abs(e.mean - 0.08875 / 0.16625) > 0.05


def _their_area_between(k_percent, measure, baseline):
    """Madsen et al.'s per-seed ``relative_area`` (export/roar_plot.py, topk = 100),
    transcribed without pandas: trapezoids over k / 100, normalised by the random
    curve's area above its k = 100 value (their Nov 2021 release: no clip)."""
    k_ratio = np.asarray(k_percent) / 100
    y_diff = baseline - measure
    total = np.sum((y_diff[1:] + y_diff[:-1]) * 0.5 * np.diff(k_ratio))
    y_diff = baseline - baseline[-1]
    max_area = np.sum((y_diff[1:] + y_diff[:-1]) * 0.5 * np.diff(k_ratio))
    return total / max_area


def test_racu_estimate_matches_their_formula_seed_by_seed_on_random_curves():
    rng = np.random.default_rng(7)
    k = [0, 10, 30, 50, 70, 90, 100]
    shape = (7, 3, 200)
    rand = (rng.random(shape) < np.linspace(0.9, 0.5, 7)[:, None, None]).astype(float)
    mine = (rng.random(shape) < np.array([0.9, 0.7, 0.6, 0.6, 0.55, 0.5, 0.5])[:, None, None])
    mine = mine.astype(float)
    mine[0], mine[-1] = rand[0], rand[-1]  # the shared end points: original, all masked
    theirs = [_their_area_between(k, mine[:, s].mean(1), rand[:, s].mean(1)) for s in range(3)]
    e = racu_estimate([v / 100 for v in k], rand, mine)
    assert e.seed_means == pytest.approx(theirs, abs=1e-12)
    assert e.mean == pytest.approx(np.mean(theirs), abs=1e-12)


def test_racu_interval_is_the_seed_t_of_the_linearized_values():
    rng = np.random.default_rng(3)
    x = [0.0, 0.5, 1.0]
    shape = (3, 3, 40)  # points, seeds, examples
    rand = (rng.random(shape) < np.array([0.9, 0.7, 0.5])[:, None, None]).astype(float)
    mine = (rng.random(shape) < np.array([0.9, 0.55, 0.5])[:, None, None]).astype(float)
    # per seed s and example i, with trapezoid weights (0.25, 0.5, 0.25):
    # a = w·(r - e), b = w·r - 1·r_last, R_s = sum a / sum b, pseudo = R_s + (a - R_s b) / mean b
    w = np.array([0.25, 0.5, 0.25])
    a = np.einsum("p,psn->sn", w, rand - mine)
    b = np.einsum("p,psn->sn", w, rand) - rand[-1]
    ratio = a.sum(1) / b.sum(1)
    pseudo = ratio[:, None] + (a - ratio[:, None] * b) / b.mean(1)[:, None]
    expected = seed_estimate(pseudo)
    e = racu_estimate(x, rand, mine)
    assert e.mean == pytest.approx(ratio.mean(), abs=1e-12)
    assert (e.ci_low, e.ci_high) == pytest.approx((expected.ci_low, expected.ci_high), abs=1e-12)
    assert e.n == 40 and e.n_seeds == 3
    # one seed: a percentile bootstrap of examples around that seed's ratio
    one = racu_estimate(x, rand[:, :1], mine[:, :1])
    assert one.mean == pytest.approx(ratio[0], abs=1e-12) and one.n_seeds == 1
    assert one.ci_low < one.mean < one.ci_high


def test_racu_estimate_refuses_bad_shapes_and_an_undefined_ratio():
    rand = _rows([[0.9, 0.7, 0.5]])
    with pytest.raises(ValueError, match="one shape"):
        racu_estimate([0, 0.5, 1], rand, rand[:, :, :10])
    with pytest.raises(ValueError, match="one curve point per ratio"):
        racu_estimate([0, 1], rand, rand)
    flat = _rows([[0.5, 0.5, 0.5]])
    with pytest.raises(ValueError, match="never drops"):
        racu_estimate([0, 0.5, 1], flat, flat)
