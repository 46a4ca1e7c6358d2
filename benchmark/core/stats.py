"""The only place confidence intervals and significance are computed.

- ``bootstrap``: mean and percentile CI over examples (Efron & Tibshirani 1993).
- ``two_level_bootstrap``: the same over a (model seeds x examples) matrix, resampling
  seeds, then examples (a hierarchical bootstrap), so the CI also carries the spread
  between retrained models; with one seed it is ``bootstrap`` exactly.
- ``sign_flip_test``: paired two-sided permutation test of mean(a - b) = 0, exact
  when all 2^n sign patterns fit in the resample budget (Fisher 1935; Good 2005).
- ``corpus_bootstrap`` and ``paired_corpus_test``: the same for corpus-level metrics
  (a ratio of sums over examples, e.g. AER), resampling examples and re-aggregating.
- ``racu`` and ``racu_bootstrap``: ROAR's relative area between curves (Madsen et al.
  2022), with the two-level CI, both curves resampled with the same draw.
- ``holm``: Holm-Bonferroni step-down adjustment for a family of p-values (Holm 1979).

Every resample is drawn from a generator with a fixed seed, so the same values give
the same interval and p-value. Streams: examples ``default_rng(seed)``, seed rows
``default_rng([seed, 1])``, sign patterns ``default_rng([seed, 2])``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

N_RESAMPLES = 2000
ALPHA = 0.05
SEED = 0
# resampled values held at once, per chunk (8 bytes each: ~16 MB)
_CHUNK = 2_000_000
# |statistic| >= |observed| - _TOL counts as "at least as extreme": float noise in the
# sum of +-d must not turn a tie into a miss
_TOL = 1e-12


@dataclass(frozen=True)
class Estimate:
    """Mean with a (1 - alpha) bootstrap CI over n examples."""

    mean: float
    ci_low: float
    ci_high: float
    n: int
    n_resamples: int = N_RESAMPLES
    confidence: float = 1 - ALPHA
    bootstrap_seed: int = SEED

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SeedEstimate:
    """Mean with a two-level (seeds, then examples) CI, and the spread over seeds.

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


def settings_of(estimate: dict) -> dict:
    """The bootstrap settings a stored estimate was computed with (``n_resamples``,
    ``alpha``, ``seed``), so a re-analysis of its values uses the same ones.

    >>> settings_of({"n_resamples": 500, "confidence": 0.9, "bootstrap_seed": 3})
    {'n_resamples': 500, 'alpha': 0.1, 'seed': 3}
    >>> settings_of({})
    {'n_resamples': 2000, 'alpha': 0.05, 'seed': 0}
    """
    return {"n_resamples": estimate.get("n_resamples", N_RESAMPLES),
            "alpha": round(1 - estimate.get("confidence", 1 - ALPHA), 12),
            "seed": estimate.get("bootstrap_seed", SEED)}


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
    means = _resample_matrix_means(v, n_resamples, seed)
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


def corpus_bootstrap(
    stats, aggregation, *, n_resamples: int = N_RESAMPLES, alpha: float = ALPHA, seed: int = SEED
) -> SeedEstimate:
    """Value and percentile CI of a corpus-level metric from per-example statistics.

    ``stats`` is (N, K) for one model seed or (S, N, K) for S seeds over the same N
    examples; ``aggregation`` maps summed (..., K) statistics to a value (see
    ``benchmark.core.api.Aggregation``, e.g. AER from per-sentence link counts). A
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
    per_seed = np.asarray(aggregation(v.sum(axis=1)), dtype=float)  # (S,)
    if not np.all(np.isfinite(per_seed)):
        raise ValueError("corpus_bootstrap: the aggregation of the summed statistics is not "
                         "finite (a zero denominator over the whole corpus)")
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
    )


def as_estimate(e: SeedEstimate) -> Estimate:
    """The one-seed ``Estimate`` fields of a ``SeedEstimate`` (what a record stores)."""
    return Estimate(e.mean, e.ci_low, e.ci_high, e.n, e.n_resamples, e.confidence,
                    e.bootstrap_seed)


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
    """Relative area between curves (Madsen et al. 2022): the area between the random
    masking curve and the explainer's, over the area between the random curve and the
    random curve's value at the last ratio (all masked), trapezoids over ``ratios``,
    clipped to [-1, 1]. 1: the explainer's masking drops the retrained model to the
    all-masked accuracy at once; 0: no better than random; NaN when random masking
    never drops below its end point.

    >>> round(racu([0, 0.5, 1], [0.9, 0.7, 0.5], [0.9, 0.6, 0.5]), 12)  # 0.05 / 0.2
    0.25
    """
    x, r, e = (np.asarray(v, dtype=float) for v in (ratios, random_curve, curve))
    between = np.trapezoid(r - e, x)
    below = np.trapezoid(r - r[-1], x)
    if not below > 0:
        return float("nan")
    return float(np.clip(between / below, -1.0, 1.0))


def racu_bootstrap(ratios, random_rows, rows, *, n_resamples: int = N_RESAMPLES,
                   alpha: float = ALPHA, seed: int = SEED) -> Estimate:
    """RACU of mean curves and its two-level percentile CI. ``random_rows`` and
    ``rows`` are (P ratios, S seeds, N examples) per-example values (e.g. correctness);
    a resample draws S seeds and N examples with replacement once and applies the same
    draw to every point of both curves, so the curves stay paired."""
    r, e = np.asarray(random_rows, dtype=float), np.asarray(rows, dtype=float)
    if r.shape != e.shape or r.ndim != 3:
        raise ValueError("racu_bootstrap needs two (ratios, seeds, examples) arrays of one shape")
    _finite(r, "racu_bootstrap")
    _finite(e, "racu_bootstrap")
    observed = racu(ratios, r.mean(axis=(1, 2)), e.mean(axis=(1, 2)))
    rng, seed_rng = np.random.default_rng(seed), np.random.default_rng([seed, 1])
    _, s_count, n = r.shape
    values = np.empty(n_resamples)
    for i in range(n_resamples):
        cols = rng.integers(0, n, size=n)
        rows_ = seed_rng.integers(0, s_count, size=s_count)
        values[i] = racu(ratios, r[:, rows_][:, :, cols].mean(axis=(1, 2)),
                         e[:, rows_][:, :, cols].mean(axis=(1, 2)))
    values = values[np.isfinite(values)]
    lo, hi = np.quantile(values, [alpha / 2, 1 - alpha / 2]) if len(values) else (np.nan,) * 2
    return Estimate(observed, float(lo), float(hi), n, n_resamples, 1 - alpha, seed)
