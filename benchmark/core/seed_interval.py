"""The confidence interval of a mean over model seeds and examples (S >= 2 seeds).

Why not a bootstrap. A percentile bootstrap that resamples 3 seed rows can never reach
past the most extreme seed, so when retraining moves the score more than the test
sample does its "95 %" interval covers the true mean in about 75 % of datasets
(``tests/test_coverage.py`` measures it). The seed means must be read with a t
quantile on S - 1 degrees of freedom.

Why not a t on the seed means alone. Every seed scores the *same* examples, so the
example effect is common to all seed means and their spread does not show it: with
little seed variance that interval covers far less than 95 %. Seeds and examples are
crossed (Searle, Casella & McCulloch 1992, ch. 4)::

    x[s, i] = mu + a_s + b_i + e_si,  Var(grand mean) = s_a²/S + s_b²/N + s_e²/(SN)

and the variance of the grand mean is estimated in two parts:

- seed part ``v_seed = var(seed means) / S``: it estimates s_a²/S + s_e²/(SN), on
  S - 1 degrees of freedom;
- example part ``v_example = max(0, var(example means) - ms_inter / S) / N``: the
  spread of the per-example means (averaged over seeds), less the seed x example
  interaction the seed part already holds (``ms_inter``, the residual mean square of
  the two-way table); it estimates s_b²/N, on N - 1 degrees of freedom.

The half-width is ``sqrt(t²(S-1) · v_seed + t²(N-1) · v_example)``: each part at its
own quantile, added in quadrature (Howe 1974; the MOVER rule of Zou & Donner 2008).
It is exact when either part is zero and conservative in between (coverage up to
about 0.98 where the two parts are comparable); never a Satterthwaite pooled t, which
fell to 0.92 with three seeds when the seed part dominates.

A corpus-level metric (a ratio of sums, e.g. AER) is linearized first: each example
gets the pseudo-value ``R_s + (num_si - R_s · den_si) / mean_i(den_si)`` (Woodruff
1971), whose mean over examples is seed s's corpus ratio R_s exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

METHOD = "t over seed means (S-1 df) + example variance"


@dataclass(frozen=True)
class SeedParts:
    """The grand mean of an (S, N) table and the two parts of its variance."""

    mean: float
    v_seed: float
    v_example: float
    n_seeds: int
    n: int

    def half_width(self, alpha: float) -> float:
        """Half the width of the (1 - alpha) interval.

        Seed means 1 and 3 on one example: v_seed = var(1, 3) / 2 = 1, and
        t(0.975, 1 df) = 12.706.

        >>> round(seed_parts([[1.0], [3.0]]).half_width(0.05), 3)
        12.706
        """
        from scipy import stats as st  # here, not at import: a plugin worker never needs it

        t_seed = st.t.isf(alpha / 2, self.n_seeds - 1)
        t_example = st.t.isf(alpha / 2, self.n - 1) if self.n > 1 else 0.0
        # a part that is 0 adds 0, even where its quantile is infinite (alpha -> 0)
        return math.hypot(t_seed * math.sqrt(self.v_seed) if self.v_seed else 0.0,
                          t_example * math.sqrt(self.v_example) if self.v_example else 0.0)

    def p_value(self) -> float:
        """Two-sided p of mean = 0: the alpha at which the interval's edge reaches 0, so
        p < alpha exactly when the (1 - alpha) interval excludes 0."""
        if self.mean == 0:
            return 1.0
        if self.v_seed == 0 and self.v_example == 0:
            return 0.0
        gap, low, high = abs(self.mean), math.log(1e-300), math.log1p(-1e-15)
        if self.half_width(1e-300) < gap:
            return 0.0
        if self.half_width(1.0 - 1e-15) >= gap:
            return 1.0
        # half_width falls as alpha grows: solve on log(alpha), p spans many decades
        from scipy import optimize

        log_p = optimize.brentq(lambda u: self.half_width(math.exp(u)) - gap, low, high,
                                xtol=1e-12)
        return float(math.exp(log_p))


def seed_parts(matrix) -> SeedParts:
    """The parts of an (S seeds, N examples) table, S >= 2, every seed on the same examples.

    Rows (1, 2, 3) and (3, 4, 5): seed means 2 and 4, v_seed = var(2, 4) / 2 = 1; the
    example means 2, 3, 4 have variance 1, the interaction is 0, v_example = 1 / 3.

    >>> p = seed_parts([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])
    >>> (p.mean, p.v_seed, round(p.v_example, 12), p.n_seeds, p.n)
    (3.0, 1.0, 0.333333333333, 2, 3)
    """
    x = np.asarray(matrix, dtype=float)
    s, n = x.shape
    if s < 2:
        raise ValueError("seed_parts needs at least two seeds")
    rows, cols = x.mean(axis=1), x.mean(axis=0)
    grand = float(rows.mean())
    v_seed = float(rows.var(ddof=1)) / s
    v_example = 0.0
    if n > 1:
        inter = x - rows[:, None] - cols[None, :] + grand
        ms_inter = float((inter**2).sum()) / ((s - 1) * (n - 1))
        v_example = max(0.0, float(cols.var(ddof=1)) - ms_inter / s) / n
    return SeedParts(grand, v_seed, v_example, s, n)


def linearized(stats, numerator, denominator, offset: float = 0.0, scale: float = 1.0):
    """(S, N) pseudo-values of a ratio of sums from (S, N, K) per-example statistics;
    row s averages to ``offset + scale · R_s``, R_s = Σ num / Σ den of seed s.

    Hits over trials, one seed: (1 hit, 2 trials) and (3, 2) give R = 4/4 = 1, and the
    pseudo-values 1 + (1 - 2)/2 and 1 + (3 - 2)/2.

    >>> linearized([[[1, 2], [3, 2]]], (1, 0), (0, 1)).tolist()
    [[0.5, 1.5]]
    """
    v = np.asarray(stats, dtype=float)
    num = v @ np.asarray(numerator, dtype=float)  # (S, N)
    den = v @ np.asarray(denominator, dtype=float)
    ratio = num.sum(axis=1) / den.sum(axis=1)  # (S,)
    pseudo = ratio[:, None] + (num - ratio[:, None] * den) / den.mean(axis=1)[:, None]
    return offset + scale * pseudo
