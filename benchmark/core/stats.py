"""The only place confidence intervals and significance are computed.

- ``bootstrap``: mean and percentile CI over examples (Efron & Tibshirani 1993).
- ``seed_estimate``: the mean of a (model seeds x examples) matrix with a CI that also
  covers retraining: with S >= 2 seeds a t over the seed means (S - 1 df) plus the
  example variance (``faithbench.benchmark.core.seed_interval``), with one seed ``bootstrap``.
  ``corpus_estimate`` is the same for corpus-level metrics, ``paired_seed_test`` the
  paired test of two entries' difference with several seeds. Every estimate names its
  ``method``.
- ``two_level_bootstrap``: resample seeds, then examples. With 3 seeds its "95 %" CI
  covers the mean in about 75 % of datasets when seeds dominate (it cannot reach past
  the extreme seeds; ``tests/test_coverage.py``); kept for one seed, where it is
  ``bootstrap`` exactly, and as the reference that test shows failing.
- ``sign_flip_test``: paired two-sided permutation test of mean(a - b) = 0, exact
  when all 2^n sign patterns fit in the resample budget (Fisher 1935; Good 2005).
- ``corpus_bootstrap`` and ``paired_corpus_test``: ``bootstrap`` and ``sign_flip_test``
  for corpus-level metrics (a ratio of sums over examples, e.g. AER), resampling
  examples and re-aggregating (with several seeds use ``corpus_estimate``).
- ``racu`` and ``racu_estimate``: ROAR's relative area between curves (Madsen et al.
  2022), per seed, averaged over seeds, with ``corpus_estimate``'s CI.
- ``holm``: Holm-Bonferroni step-down adjustment for a family of p-values (Holm 1979).
- ``wilson``: the score interval of a proportion (Wilson 1927), for a model's accuracy
  (the model gate, ``faithbench.benchmark.core.gate``).

Every resample is drawn from a generator with a fixed seed, so the same values give
the same interval and p-value. Streams: examples ``default_rng(seed)``, seed rows
``default_rng([seed, 1])``, sign patterns ``default_rng([seed, 2])``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from faithbench.benchmark.core import seed_interval
from faithbench.benchmark.core.errors import InputError

N_RESAMPLES = 2000
ALPHA = 0.05
SEED = 0
# resampled values held at once, per chunk (8 bytes each: ~16 MB)
_CHUNK = 2_000_000
# |statistic| >= |observed| - _TOL counts as "at least as extreme": float noise in the
# sum of +-d must not turn a tie into a miss
_TOL = 1e-12
# how an interval was computed: stored in every estimate (old records: BOOTSTRAP)
BOOTSTRAP = "percentile bootstrap over examples"
TWO_LEVEL = "two-level percentile bootstrap (seeds, then examples)"
SEED_T = seed_interval.METHOD


@dataclass(frozen=True)
class Estimate:
    """Mean with a (1 - alpha) CI over the n examples that define the metric;
    ``undefined`` counts those left out (NaN: e.g. a constant score vector)."""

    mean: float
    ci_low: float
    ci_high: float
    n: int
    n_resamples: int = N_RESAMPLES
    confidence: float = 1 - ALPHA
    bootstrap_seed: int = SEED
    method: str = BOOTSTRAP
    undefined: int = 0

    def as_dict(self) -> dict:
        return asdict(self)

    def settings(self) -> dict:
        """The bootstrap settings this estimate was computed with (``n_resamples``,
        ``alpha``, ``seed``), so a re-analysis of its values uses the same ones.

        >>> Estimate(0.5, 0.4, 0.6, 10, n_resamples=500, confidence=0.9, bootstrap_seed=3
        ...          ).settings()
        {'n_resamples': 500, 'alpha': 0.1, 'seed': 3}
        """
        return {"n_resamples": self.n_resamples, "alpha": round(1 - self.confidence, 12),
                "seed": self.bootstrap_seed}


@dataclass(frozen=True)
class SeedEstimate:
    """Mean with a CI over seeds and examples (computed as ``method`` says), and the
    spread over seeds.

    ``n`` is the number of examples (shared by every seed); ``seed_means`` the mean of
    each seed's row, in row order; ``seed_sd`` their sample sd (ddof=1; 0.0 for one seed).
    """

    mean: float
    ci_low: float
    ci_high: float
    n: int
    n_resamples: int
    confidence: float
    bootstrap_seed: int
    n_seeds: int
    seed_means: tuple[float, ...]
    seed_sd: float
    seed_min: float
    seed_max: float
    method: str = TWO_LEVEL
    undefined: int = 0

    def as_dict(self) -> dict:
        d = asdict(self)
        d["seed_means"] = list(self.seed_means)
        return d


@dataclass(frozen=True)
class Aggregation:
    """How a corpus-level metric turns per-example sufficient statistics into one value:
    ``offset + scale * (numerator · Σ stats) / (denominator · Σ stats)``, sums over
    examples. Data, not code, so a record carries it and the leaderboard re-aggregates
    bootstrap resamples without the metric's module.

    AER (Och & Ney 2003) from per-sentence counts (|A∩S|, |A∩P|, |A|, |S|) is
    1 − (Σ|A∩S| + Σ|A∩P|) / (Σ|A| + Σ|S|):

    >>> import numpy as np
    >>> aer = Aggregation(("a_s", "a_p", "a", "s"), (1, 1, 0, 0), (0, 0, 1, 1), 1.0, -1.0)
    >>> float(aer(np.array([[1, 2, 2, 1], [0, 1, 2, 2]]).sum(axis=0)))  # 1 - 4/7
    0.4285714285714286
    """

    stats: tuple[str, ...]
    numerator: tuple[float, ...]
    denominator: tuple[float, ...]
    offset: float = 0.0
    scale: float = 1.0

    def __post_init__(self):
        if not (len(self.stats) == len(self.numerator) == len(self.denominator) > 0):
            raise ValueError("Aggregation: stats, numerator and denominator need one entry "
                             "per statistic")

    def __call__(self, sums):
        """Value(s) from (..., K) summed statistics; NaN where the denominator is 0."""
        sums = np.asarray(sums, dtype=float)
        num = sums @ np.asarray(self.numerator, dtype=float)
        den = sums @ np.asarray(self.denominator, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(den != 0, num / np.where(den != 0, den, 1.0), np.nan)
        return self.offset + self.scale * ratio

    def as_dict(self) -> dict:
        return {"stats": list(self.stats), "numerator": list(self.numerator),
                "denominator": list(self.denominator), "offset": self.offset,
                "scale": self.scale}

    @classmethod
    def from_dict(cls, d: dict) -> Aggregation:
        return cls(tuple(d["stats"]), tuple(d["numerator"]), tuple(d["denominator"]),
                   float(d.get("offset", 0.0)), float(d.get("scale", 1.0)))


def _finite(v: np.ndarray, what: str) -> None:
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{what} got non-finite values; refusing to report a mean")


def _resample_means(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = len(values)
    means = np.empty(n_resamples)
    step = max(1, _CHUNK // max(n, 1))  # bound memory: chunks of resamples
    for s in range(0, n_resamples, step):
        m = min(step, n_resamples - s)
        means[s : s + m] = values[rng.integers(0, n, size=(m, n))].mean(axis=1)
    return means


def _resample_matrix_means(matrix: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Means of resampled sub-matrices: S rows with replacement, then N columns.

    Columns come from the same stream, in the same chunks, as ``_resample_means``, and
    the mean is taken as (column means over the drawn rows)[drawn columns].mean(), so
    for S == 1 every number is the one ``_resample_means(matrix[0])`` gives.
    """
    rng = np.random.default_rng(seed)
    seed_rng = np.random.default_rng([seed, 1])
    s_count, n = matrix.shape
    means = np.empty(n_resamples)
    step = max(1, _CHUNK // max(s_count * n, 1))  # (m, S, N) per chunk
    for s in range(0, n_resamples, step):
        m = min(step, n_resamples - s)
        cols = rng.integers(0, n, size=(m, n))  # (m, N)
        rows = seed_rng.integers(0, s_count, size=(m, s_count))  # (m, S)
        col_means = matrix[rows].mean(axis=1)  # (m, S, N) -> (m, N)
        means[s : s + m] = np.take_along_axis(col_means, cols, axis=1).mean(axis=1)
    return means


def bootstrap(values, *, n_resamples: int = N_RESAMPLES, alpha: float = ALPHA, seed: int = SEED):
    """Mean and percentile CI of per-example ``values``.

    >>> e = bootstrap([1.0, 1.0, 1.0])
    >>> (e.mean, e.ci_low, e.ci_high, e.n)
    (1.0, 1.0, 1.0, 3)
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or len(v) == 0:
        raise ValueError("bootstrap needs a non-empty 1-d array of values")
    _finite(v, "bootstrap")
    means = _resample_means(v, n_resamples, seed)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return Estimate(float(v.mean()), float(lo), float(hi), len(v), n_resamples, 1 - alpha, seed)


def wilson(successes: int, n: int, *, alpha: float = ALPHA) -> tuple[float, float]:
    """The (1 - alpha) Wilson score interval of a proportion ``successes / n``: unlike
    the normal approximation it stays in [0, 1] and keeps its coverage near 0 and 1
    (Brown, Cai & DasGupta 2001; coverage checked in ``tests/test_gate.py``).

    >>> [round(x, 4) for x in wilson(8, 10)]
    [0.4902, 0.9433]
    >>> wilson(0, 5)[0], wilson(5, 5)[1]
    (0.0, 1.0)
    """
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"wilson needs 0 <= successes <= n and n >= 1; got {successes}/{n}")
    from scipy.stats import norm

    z = float(norm.ppf(1 - alpha / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * float(np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)))
    return max(0.0, centre - half), min(1.0, centre + half)


def two_level_bootstrap(
    matrix, *, n_resamples: int = N_RESAMPLES, alpha: float = ALPHA, seed: int = SEED
) -> SeedEstimate:
    """Grand mean and percentile CI of a (S seeds, N examples) matrix of values.

    Each resample draws S seed rows with replacement, then N example columns with
    replacement, and takes the mean of that sub-matrix: the model seed and the example
    are both random draws, so the CI covers retraining as well as the test sample.
    Every row must hold the same N examples in the same column order.

    >>> e = two_level_bootstrap([[1.0, 1.0], [3.0, 3.0]])
    >>> (e.mean, e.n, e.n_seeds, e.seed_means, e.seed_sd, e.seed_min, e.seed_max)
    (2.0, 2, 2, (1.0, 3.0), 1.4142135623730951, 1.0, 3.0)
    >>> (e.ci_low, e.ci_high)  # both rows drawn from one seed in some resamples
    (1.0, 3.0)
    >>> two_level_bootstrap([[0.5, 1.5]]) == two_level_bootstrap([[0.5, 1.5]])
    True
    """
    v = np.asarray(matrix, dtype=float)
    if v.ndim != 2 or v.size == 0:
        raise ValueError("two_level_bootstrap needs a non-empty (seeds, examples) matrix")
    _finite(v, "two_level_bootstrap")
    # row by row, as ``bootstrap`` takes the mean of a 1-d array: S == 1 matches it exactly
    row_means = tuple(float(row.mean()) for row in v)
    # one seed: the same numbers by the 1-d path, in half the time (rankings recompute
    # every one-seed interval from the rows)
    means = (_resample_means(v[0], n_resamples, seed) if len(v) == 1
             else _resample_matrix_means(v, n_resamples, seed))
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    sd = float(np.std(row_means, ddof=1)) if len(row_means) > 1 else 0.0
    return SeedEstimate(
        mean=float(np.mean(row_means)),
        ci_low=float(lo),
        ci_high=float(hi),
        n=v.shape[1],
        n_resamples=n_resamples,
        confidence=1 - alpha,
        bootstrap_seed=seed,
        n_seeds=v.shape[0],
        seed_means=row_means,
        seed_sd=sd,
        seed_min=min(row_means),
        seed_max=max(row_means),
        method=BOOTSTRAP if v.shape[0] == 1 else TWO_LEVEL,
    )


@dataclass(frozen=True)
class PairedDifference:
    """mean(a - b) over paired examples: bootstrap CI, and the p-value of ``test``."""

    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int
    test: str

    def as_dict(self) -> dict:
        return asdict(self)


EXACT, MONTE_CARLO = "sign-flip exact", "sign-flip monte carlo"


def _flip_extremes(d: np.ndarray, observed: float, n_resamples: int, seed: int):
    """(count of patterns with |mean(+-d)| >= |observed|, patterns drawn, test name)."""
    n = len(d)
    step = max(1, _CHUNK // n)
    count = 0
    if 2**n <= n_resamples:  # all 2^n patterns; bit j of k says whether d_j flips
        bits = np.arange(n)
        for s in range(0, 2**n, step):
            k = np.arange(s, min(s + step, 2**n))
            signs = 1.0 - 2.0 * ((k[:, None] >> bits) & 1)  # (m, n)
            count += int(np.sum(np.abs(signs @ d / n) >= abs(observed) - _TOL))
        return count, 2**n, EXACT
    rng = np.random.default_rng([seed, 2])
    for s in range(0, n_resamples, step):
        m = min(step, n_resamples - s)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(m, n))  # (m, n)
        count += int(np.sum(np.abs(signs @ d / n) >= abs(observed) - _TOL))
    return count, n_resamples, MONTE_CARLO


def sign_flip_test(
    a, b, *, n_resamples: int = N_RESAMPLES, alpha: float = ALPHA, seed: int = SEED
) -> PairedDifference:
    """Paired two-sided sign-flip test of mean(a - b) = 0, with a bootstrap CI of it.

    Under the null each difference d_i is as likely to be +d_i as -d_i, so p is the
    share of sign patterns whose |mean(+-d)| is at least |mean(d)|. With 2^n <=
    ``n_resamples`` every pattern is enumerated (exact p; n = 1 gives p = 1, so one
    example never names a winner); otherwise ``n_resamples`` random patterns, with
    (count + 1) / (n_resamples + 1) so p > 0. The CI is ``bootstrap`` of d.

    d = [1, 2, 3]: of the 8 patterns only +(1+2+3) and -(1+2+3) reach |6|, p = 2/8.

    >>> sign_flip_test([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]).p_value
    0.25
    >>> r = sign_flip_test([0.75], [0.25])
    >>> (r.diff, r.p_value, r.test)
    (0.5, 1.0, 'sign-flip exact')
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError("sign_flip_test needs two 1-d arrays of the same non-zero length")
    d = a - b
    _finite(d, "sign_flip_test")
    ci = bootstrap(d, n_resamples=n_resamples, alpha=alpha, seed=seed)
    count, drawn, test = _flip_extremes(d, ci.mean, n_resamples, seed)
    p = count / drawn if test == EXACT else (count + 1) / (drawn + 1)
    return PairedDifference(ci.mean, ci.ci_low, ci.ci_high, min(float(p), 1.0), len(d), test)


def holm(p_values) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in input order.

    Sorted ascending, the i-th (0-based) of m is multiplied by m - i; a running maximum
    keeps the adjusted values monotone, and they are capped at 1. Rejecting where the
    adjusted p < alpha controls the family-wise error rate at alpha.

    [0.01, 0.04, 0.03]: 0.01 * 3 = 0.03; 0.03 * 2 = 0.06; 0.04 * 1 = 0.04 -> max 0.06.

    >>> [round(p, 12) for p in holm([0.01, 0.04, 0.03])]
    [0.03, 0.06, 0.06]
    >>> holm([0.5, 0.9]), holm([])
    ([1.0, 1.0], [])
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError("holm needs a 1-d list of p-values")
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"holm got p-values outside [0, 1]: {p.tolist()}")
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adjusted
    return [float(x) for x in out]


def _column_counts(rng, n: int, m: int) -> np.ndarray:
    """(m, n) how often each of n examples is drawn in m resamples of size n (the same
    stream of draws ``_resample_means`` uses)."""
    cols = rng.integers(0, n, size=(m, n))
    counts = np.zeros((m, n))
    np.add.at(counts, (np.arange(m)[:, None], cols), 1.0)
    return counts


class ZeroDenominator(InputError, ValueError):
    """A corpus-level metric with nothing to divide by: bad input for it, as the
    ``ValueError`` of an undefined value."""


def corpus_values(v: np.ndarray, aggregation: Aggregation) -> np.ndarray:
    """(S,) each seed's corpus value of (S, N, K) statistics: the aggregation of its
    sums. Where a denominator sums to 0 over the whole corpus (recall of sure links when
    the reference marks none) there is no value: ``ZeroDenominator``, naming the
    statistics.

    >>> recall = Aggregation(("hit", "sure"), (1, 0), (0, 1))
    >>> corpus_values(np.array([[[1, 2], [0, 1]]]), recall).tolist()
    [0.3333333333333333]
    >>> try:
    ...     corpus_values(np.array([[[0, 0], [0, 0]]]), recall)
    ... except ZeroDenominator as exc:
    ...     print(exc)
    the denominator (sure) is 0 over all 2 examples: a zero denominator over the whole corpus
    """
    per_seed = np.asarray(aggregation(v.sum(axis=1)), dtype=float)
    if not np.all(np.isfinite(per_seed)):
        sums = v.sum(axis=(0, 1))
        zero = [name for name, d, total in zip(aggregation.stats, aggregation.denominator, sums)
                if d and total == 0]
        raise ZeroDenominator(f"the denominator ({' + '.join(zero) or 'of the aggregation'}) "
                              f"is 0 over all {v.shape[1]} examples: a zero denominator over "
                              "the whole corpus")
    return per_seed


def corpus_bootstrap(
    stats, aggregation, *, n_resamples: int = N_RESAMPLES, alpha: float = ALPHA, seed: int = SEED
) -> SeedEstimate:
    """Value and percentile CI of a corpus-level metric from per-example statistics.

    ``stats`` is (N, K) for one model seed or (S, N, K) for S seeds over the same N
    examples; ``aggregation`` maps summed (..., K) statistics to a value (see
    ``faithbench.api.Aggregation``, e.g. AER from per-sentence link counts). A
    seed's value is the aggregation of its column sums; the point estimate is the mean
    over seeds. Each resample draws S seeds, then N examples, with replacement, sums the
    drawn examples' statistics per drawn seed and re-aggregates — the ratio is taken of
    resampled sums, never averaged over examples.

    Two sentences with counts (|A∩S|, |A∩P|, |A|, |S|) = (1, 2, 2, 1) and (0, 1, 2, 2):
    AER = 1 - (1 + 0 + 2 + 1) / (2 + 2 + 1 + 2) = 3/7.

    >>> aer = Aggregation(("a_s", "a_p", "a", "s"), (1, 1, 0, 0), (0, 0, 1, 1), 1.0, -1.0)
    >>> e = corpus_bootstrap([[1, 2, 2, 1], [0, 1, 2, 2]], aer)
    >>> round(e.mean, 6), e.n, e.n_seeds
    (0.428571, 2, 1)
    >>> e.ci_low <= e.mean <= e.ci_high
    True
    """
    v = np.asarray(stats, dtype=float)
    if v.ndim == 2:
        v = v[None]
    if v.ndim != 3 or v.shape[1] == 0 or v.shape[2] == 0:
        raise ValueError("corpus_bootstrap needs (examples, stats) or (seeds, examples, stats)")
    _finite(v, "corpus_bootstrap")
    s_count, n, _ = v.shape
    per_seed = corpus_values(v, aggregation)  # (S,)
    rng, seed_rng = np.random.default_rng(seed), np.random.default_rng([seed, 1])
    values = np.empty(n_resamples)
    step = max(1, _CHUNK // max(n, 1))
    for s in range(0, n_resamples, step):
        m = min(step, n_resamples - s)
        agg = _values(_column_counts(rng, n, m), v, aggregation)  # (m, S)
        if s_count > 1:
            rows = seed_rng.integers(0, s_count, size=(m, s_count))
            agg = np.take_along_axis(agg, rows, axis=1)
        values[s : s + m] = np.nanmean(agg, axis=1)
    lo, hi = np.nanquantile(values, [alpha / 2, 1 - alpha / 2])
    seed_values = tuple(float(x) for x in per_seed)
    return SeedEstimate(
        mean=float(np.mean(per_seed)), ci_low=float(lo), ci_high=float(hi), n=n,
        n_resamples=n_resamples, confidence=1 - alpha, bootstrap_seed=seed, n_seeds=s_count,
        seed_means=seed_values,
        seed_sd=float(np.std(per_seed, ddof=1)) if s_count > 1 else 0.0,
        seed_min=min(seed_values), seed_max=max(seed_values),
        method=BOOTSTRAP if s_count == 1 else TWO_LEVEL,
    )


def as_estimate(e: SeedEstimate) -> Estimate:
    """The one-seed ``Estimate`` fields of a ``SeedEstimate`` (what a record stores)."""
    return Estimate(e.mean, e.ci_low, e.ci_high, e.n, e.n_resamples, e.confidence,
                    e.bootstrap_seed, e.method, e.undefined)


def _spread(values) -> dict:
    """The SeedEstimate fields that describe per-seed values."""
    values = tuple(float(x) for x in values)
    return {"n_seeds": len(values), "seed_means": values, "seed_min": min(values),
            "seed_max": max(values),
            "seed_sd": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0}


def _seed_t(parts, seed_values, *, n_resamples: int, alpha: float, seed: int) -> SeedEstimate:
    half = parts.half_width(alpha)
    return SeedEstimate(mean=parts.mean, ci_low=parts.mean - half, ci_high=parts.mean + half,
                        n=parts.n, n_resamples=n_resamples, confidence=1 - alpha,
                        bootstrap_seed=seed, method=SEED_T, **_spread(seed_values))


def seed_estimate(
    matrix, *, n_resamples: int = N_RESAMPLES, alpha: float = ALPHA, seed: int = SEED
) -> SeedEstimate:
    """Grand mean and (1 - alpha) CI of a (S seeds, N examples) matrix, every row on the
    same examples in the same column order: the seed and the example are both random
    draws, so the CI covers retraining as well as the test sample.

    S >= 2: t over the seed means plus the example variance
    (``faithbench.benchmark.core.seed_interval``); S = 1: ``bootstrap`` of the row, exactly.

    Seed means 2 and 4 of rows (1, 2, 3), (3, 4, 5): v_seed = 1, v_example = 1/3
    (see ``seed_parts``); half-width sqrt(12.706² · 1 + 4.303² / 3) = 12.95.

    >>> e = seed_estimate([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])
    >>> (e.mean, round(e.ci_low, 2), round(e.ci_high, 2), e.n, e.n_seeds, e.method)
    (3.0, -9.95, 15.95, 3, 2, 't over seed means (S-1 df) + example variance')
    >>> seed_estimate([[0.5, 1.5]]).method
    'percentile bootstrap over examples'
    """
    v = np.asarray(matrix, dtype=float)
    if v.ndim != 2 or v.size == 0:
        raise ValueError("seed_estimate needs a non-empty (seeds, examples) matrix")
    _finite(v, "seed_estimate")
    if v.shape[0] == 1:  # two_level_bootstrap takes the 1-d bootstrap's path for one row
        return two_level_bootstrap(v, n_resamples=n_resamples, alpha=alpha, seed=seed)
    return _seed_t(seed_interval.seed_parts(v), (float(row.mean()) for row in v),
                   n_resamples=n_resamples, alpha=alpha, seed=seed)


def _pseudo(stats: np.ndarray, aggregation) -> np.ndarray:
    return seed_interval.linearized(stats, aggregation.numerator, aggregation.denominator,
                                    aggregation.offset, aggregation.scale)


def corpus_estimate(
    stats, aggregation, *, n_resamples: int = N_RESAMPLES, alpha: float = ALPHA, seed: int = SEED
) -> SeedEstimate:
    """``seed_estimate`` for a corpus-level metric: (S, N, K) per-example statistics and
    their ``Aggregation``. S = 1: ``corpus_bootstrap``; S >= 2: the t interval of the
    linearized pseudo-values (``seed_interval.linearized``), centred on the mean of the
    per-seed corpus values.

    Hit rates 2/4 and 4/4 under two seeds: mean 0.75; the pseudo-values are (0, 1) and
    (1, 1), v_seed = var(0.5, 1) / 2 = 1/16, v_example = (1/16 - 1/8 / 2) / 2 = 0,
    half-width 12.706 / 4.

    >>> ratio = Aggregation(("hit", "n"), (1, 0), (0, 1))
    >>> e = corpus_estimate([[[0, 2], [2, 2]], [[2, 2], [2, 2]]], ratio)
    >>> (e.mean, round(e.ci_high - e.mean, 4), e.seed_means)
    (0.75, 3.1766, (0.5, 1.0))
    """
    v = np.asarray(stats, dtype=float)
    if v.ndim != 3 or v.shape[0] < 2:
        return corpus_bootstrap(v, aggregation, n_resamples=n_resamples, alpha=alpha,
                                seed=seed)
    _finite(v, "corpus_estimate")
    per_seed = corpus_values(v, aggregation)  # (S,)
    parts = seed_interval.seed_parts(_pseudo(v, aggregation))
    parts = replace(parts, mean=float(np.mean(per_seed)))  # = the pseudo-values' mean
    return _seed_t(parts, per_seed, n_resamples=n_resamples, alpha=alpha, seed=seed)


def paired_seed_test(
    a, b, aggregation=None, *, alpha: float = ALPHA
) -> PairedDifference:
    """Paired test of mean(a - b) = 0 with S >= 2 model seeds, seed-aware: the
    ``seed_estimate`` interval of the (S, N) matrix a - b (both entries explain the same
    checkpoints and examples), and the p at which that interval's edge reaches 0, so
    p < alpha exactly when the (1 - alpha) CI excludes 0. With an ``aggregation``, a and
    b are (S, N, K) statistics of a corpus-level metric, compared on their linearized
    pseudo-values.

    d = rows (1, 2, 3), (3, 4, 5) (``seed_estimate``'s example): p is the alpha where
    sqrt(t(1 - alpha/2; 1 df)² · 1 + t(1 - alpha/2; 2 df)² / 3) = 3, i.e. 0.217
    (2.819² + 1.780² / 3 = 3.0²).

    >>> r = paired_seed_test([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]], [[0.0] * 3] * 2)
    >>> (r.diff, r.n, r.test, round(r.p_value, 3))
    (3.0, 3, 't over seed means (S-1 df) + example variance', 0.217)
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim not in (2, 3) or a.shape[0] < 2 or a.shape[1] == 0:
        raise ValueError("paired_seed_test needs two (seeds >= 2, examples[, stats]) arrays "
                         "of the same shape")
    _finite(a - b, "paired_seed_test")
    if aggregation is not None:
        a, b = _pseudo(a, aggregation), _pseudo(b, aggregation)
    parts = seed_interval.seed_parts(a - b)
    half = parts.half_width(alpha)
    return PairedDifference(parts.mean, parts.mean - half, parts.mean + half,
                            parts.p_value(), parts.n, SEED_T)


SWAP_EXACT, SWAP_MONTE_CARLO = "swap exact", "swap monte carlo"


def paired_corpus_test(
    a, b, aggregation, *, n_resamples: int = N_RESAMPLES, alpha: float = ALPHA,
    seed: int = SEED,
) -> PairedDifference:
    """Paired test of value(a) = value(b) for a corpus-level metric: approximate
    randomization (Noreen 1989; Riezler & Maxwell 2005), the corpus analogue of the
    sign-flip test.

    ``a``, ``b``: (S, N, K) statistics of two systems on the same examples and seeds.
    Under the null each example's statistics are as likely to belong to a as to b, so p
    is the share of swap patterns (one coin per example, all seeds together) whose
    |value(a') − value(b')| is at least the observed one; exact when 2^N fits the
    budget. The CI of the difference is a two-level bootstrap (seeds, then examples,
    the same draws for a and b).

    >>> ratio = Aggregation(("hit", "n"), (1, 0), (0, 1))
    >>> r = paired_corpus_test([[[1, 1]]], [[[0, 1]]], ratio)  # one example: p = 1
    >>> r.diff, r.p_value, r.test
    (1.0, 1.0, 'swap exact')
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim == 2:
        a, b = a[None], b[None]
    if a.shape != b.shape or a.ndim != 3 or a.shape[1] == 0:
        raise ValueError("paired_corpus_test needs two (seeds, examples, stats) arrays of "
                         "the same shape")
    _finite(a - b, "paired_corpus_test")
    s_count, n, _ = a.shape
    observed = float(_swapped_diff(a, b, np.zeros((1, n)), aggregation)[0])
    count, drawn = 0, 0
    step = max(1, _CHUNK // max(n, 1))
    if 2**n <= n_resamples:
        bits, test = np.arange(n), SWAP_EXACT
        for s in range(0, 2**n, step):
            k = np.arange(s, min(s + step, 2**n))
            swap = ((k[:, None] >> bits) & 1).astype(float)  # 1 = swap example j
            d = _swapped_diff(a, b, swap, aggregation)
            count += int(np.sum(np.abs(d) >= abs(observed) - _TOL))
            drawn += len(k)
        p = count / drawn
    else:
        rng, test = np.random.default_rng([seed, 2]), SWAP_MONTE_CARLO
        for s in range(0, n_resamples, step):
            m = min(step, n_resamples - s)
            swap = rng.integers(0, 2, size=(m, n)).astype(float)
            d = _swapped_diff(a, b, swap, aggregation)
            count += int(np.sum(np.abs(d) >= abs(observed) - _TOL))
            drawn += m
        p = (count + 1) / (drawn + 1)
    rng, seed_rng = np.random.default_rng(seed), np.random.default_rng([seed, 1])
    diffs = np.empty(n_resamples)
    for s in range(0, n_resamples, step):
        m = min(step, n_resamples - s)
        counts = _column_counts(rng, n, m)
        d = _values(counts, a, aggregation) - _values(counts, b, aggregation)  # (m, S)
        if s_count > 1:
            d = np.take_along_axis(d, seed_rng.integers(0, s_count, size=(m, s_count)), axis=1)
        diffs[s : s + m] = np.nanmean(d, axis=1)
    lo, hi = np.nanquantile(diffs, [alpha / 2, 1 - alpha / 2])
    return PairedDifference(observed, float(lo), float(hi), min(float(p), 1.0), n, test)


def _sums(weights, stats) -> np.ndarray:
    """(m, S, K) sums of (S, N, K) ``stats`` over examples weighted by (m, N) ``weights``."""
    return np.einsum("mn,snk->msk", weights, stats)


def _values(weights, stats, aggregation) -> np.ndarray:
    """(m, S) the aggregation of the weighted sums, per resample and seed."""
    return np.asarray(aggregation(_sums(weights, stats)), dtype=float)


def _swapped_diff(a, b, swap, aggregation) -> np.ndarray:
    """(m,) value(a') - value(b') averaged over seeds, where a' takes b's statistics on
    the examples ``swap`` (m, N) marks, and b' takes a's."""
    keep = 1.0 - swap
    va = np.asarray(aggregation(_sums(keep, a) + _sums(swap, b)))
    vb = np.asarray(aggregation(_sums(keep, b) + _sums(swap, a)))
    return (va - vb).mean(axis=1)


def racu(ratios, random_curve, curve) -> float:
    """Relative area between curves of one seed (Madsen et al. 2022; their
    ``area_between`` in ``export/roar_plot.py``): the area between the random masking
    curve and the explainer's over the area between the random curve and its own value
    at the last ratio (all masked), trapezoids over ``ratios``. 1: the explainer's
    masking drops the retrained model to the all-masked score at once; 0: no better
    than random; above 1: below the all-masked score. Not clipped (their public release
    of Nov 2021 does not clip; the May 2022 one clips each seed to [-1, 1]). NaN when
    random masking never drops below its end point.

    >>> round(racu([0, 0.5, 1], [0.9, 0.7, 0.5], [0.9, 0.6, 0.5]), 12)  # 0.05 / 0.2
    0.25
    """
    x, r, e = (np.asarray(v, dtype=float) for v in (ratios, random_curve, curve))
    between = np.trapezoid(r - e, x)
    below = np.trapezoid(r - r[-1], x)
    if not below > 0:
        return float("nan")
    return float(between / below)


def _racu_aggregation(ratios) -> Aggregation:
    """RACU as a ratio of sums over examples of 2P statistics per example (correct at
    each point of the random curve, then of the explainer's): trapezoid weights w give
    numerator w·(r - e) and denominator w·r - (Σw)·r_last."""
    x = np.asarray(ratios, dtype=float)
    w = np.zeros(len(x))
    w[:-1] += np.diff(x) / 2
    w[1:] += np.diff(x) / 2
    below = w.copy()
    below[-1] -= w.sum()
    names = tuple(f"{c}@{k:g}" for c in ("random", "explainer") for k in x)
    return Aggregation(names, (*w, *-w), (*below, *np.zeros(len(x))))


def racu_estimate(ratios, random_rows, rows, *, n_resamples: int = N_RESAMPLES,
                  alpha: float = ALPHA, seed: int = SEED) -> SeedEstimate:
    """Madsen et al.'s RACU estimate: ``racu`` of each seed's curves (the explainer's
    against the random curve of the same seed), averaged over seeds. ``random_rows``
    and ``rows``: (P ratios, S seeds, N examples) per-example values (e.g. correctness).
    Each seed's RACU is a ratio of sums over its examples (``_racu_aggregation``), so
    the CI is ``corpus_estimate``'s: S >= 2, a t over the seed values plus the example
    variance of the linearized values; S = 1, a percentile bootstrap of examples.
    (Madsen et al. give a bootstrap or logit-t interval over seed values alone.)

    Seed 0: 0.05 / 0.2 (``racu``'s example); seed 1: random (0.9, 0.8, 0.5), explainer
    (0.9, 0.6, 0.5): 0.1 / 0.25 = 0.4.

    >>> e = racu_estimate([0, 0.5, 1], [[[0.9], [0.9]], [[0.7], [0.8]], [[0.5], [0.5]]],
    ...                   [[[0.9], [0.9]], [[0.6], [0.6]], [[0.5], [0.5]]])
    >>> round(e.mean, 12), [round(v, 12) for v in e.seed_means], e.n_seeds
    (0.325, [0.25, 0.4], 2)
    """
    r, e = np.asarray(random_rows, dtype=float), np.asarray(rows, dtype=float)
    if r.shape != e.shape or r.ndim != 3 or len(ratios) != r.shape[0] or r.shape[0] < 2:
        raise ValueError("racu_estimate needs two (ratios, seeds, examples) arrays of one "
                         "shape, one curve point per ratio")
    _finite(r, "racu_estimate")
    _finite(e, "racu_estimate")
    per_seed = [racu(ratios, r[:, s].mean(axis=1), e[:, s].mean(axis=1))
                for s in range(r.shape[1])]
    if not np.all(np.isfinite(per_seed)):
        raise ValueError("racu_estimate: the random curve of some seed never drops below "
                         "its end point; RACU is undefined")
    stats = np.concatenate([r, e]).transpose(1, 2, 0)  # (S, N, 2P)
    return corpus_estimate(stats, _racu_aggregation(ratios), n_resamples=n_resamples,
                           alpha=alpha, seed=seed)
