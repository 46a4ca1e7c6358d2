"""The only place confidence intervals and significance are computed.

Percentile bootstrap over examples (Efron & Tibshirani 1993), with a fixed seed so
the same values give the same interval; paired bootstrap for comparing two
explainers on the same examples (Koehn 2004 style, centred under the null).
"""

from dataclasses import asdict, dataclass

import numpy as np

N_RESAMPLES = 2000
ALPHA = 0.05
SEED = 0


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


def _resample_means(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = len(values)
    means = np.empty(n_resamples)
    step = max(1, 2_000_000 // max(n, 1))  # bound memory: chunks of resamples
    for s in range(0, n_resamples, step):
        m = min(step, n_resamples - s)
        means[s : s + m] = values[rng.integers(0, n, size=(m, n))].mean(axis=1)
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
    if not np.all(np.isfinite(v)):
        raise ValueError("bootstrap got non-finite values; refusing to report a mean")
    means = _resample_means(v, n_resamples, seed)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return Estimate(float(v.mean()), float(lo), float(hi), len(v), n_resamples, 1 - alpha, seed)


@dataclass(frozen=True)
class PairedDifference:
    """mean(a - b) over paired examples with CI and two-sided bootstrap p-value."""

    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int


def paired_bootstrap(a, b, *, n_resamples: int = N_RESAMPLES, alpha: float = ALPHA, seed: int = SEED):
    """Paired test of mean(a) == mean(b).

    The p-value is the share of resampled mean differences, centred on zero, at
    least as far from zero as the observed one (with +1 smoothing so p > 0).

    >>> r = paired_bootstrap([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0])
    >>> (r.diff, r.p_value)
    (0.0, 1.0)
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError("paired_bootstrap needs two 1-d arrays of the same non-zero length")
    d = a - b
    observed = float(d.mean())
    means = _resample_means(d, n_resamples, seed)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    centred = means - observed
    extreme = np.sum(np.abs(centred) >= abs(observed) - 1e-12)
    p = float((extreme + 1) / (n_resamples + 1))
    return PairedDifference(observed, float(lo), float(hi), min(p, 1.0), len(d))
