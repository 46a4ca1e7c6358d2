"""Agreement between two explainers on the same examples: rank correlation and top-k overlap.

Metric card
-----------
What. How alike two explainers rank the tokens of the same input. This is not a
faithfulness score: two explainers can agree and both be unfaithful, or disagree
and one of them be right. It is the measurement the attention debate started from
(Jain & Wallace 2019 asked whether attention ranks tokens the way gradients and
leave-one-out do) and a check on which explainers are redundant on a task.

Formula. For one example with n tokens and score vectors a, b (one float per
token), over the n₀ = n(n−1)/2 token pairs count C concordant and D discordant
pairs, n₁ pairs tied in a and n₂ pairs tied in b (a pair tied in both counts in
both)::

    τ_b = (C − D) / sqrt((n₀ − n₁) · (n₀ − n₂))

computed by ``scipy.stats.kendalltau(a, b, variant="b")``, with its p-value for
τ = 0. Top-k overlap is |top_k(a) ∩ top_k(b)| / k with k = ceil(k_frac · n), in exact
rational arithmetic (``faithbench.metrics.rationale.bin_sizes``: ceil(0.1 · 30) = 3, never 4),
clamped to [1, n]; the top-k order is ``faithbench.benchmark.core.ranking`` — equal scores in a
random order seeded per example, the same for both explainers — the order every metric
uses.

Undefined cases. τ_b is undefined for n < 2 or when either vector is constant (a
zero denominator). Those examples get τ = NaN, are left out of the τ summary and the
share of significant examples, and are counted (``n_undefined``) — never read as 0.
Top-k overlap is defined for every example with n ≥ 1 (ties go in the seeded random
order, as in the metrics), so it averages over all n examples.

Direction. None: agreement is descriptive, neither higher nor lower is "more
faithful". Range: τ_b in [−1, 1] (1 = same order, −1 = reversed, ≈ 0 unrelated);
overlap in [0, 1] (1 = the same top-k set). Summaries are means over examples with
a bootstrap CI from ``faithbench.benchmark.core.stats``; ``share_p_le_0_05`` is the share of
defined examples with p ≤ 0.05, Jain & Wallace's "Sig. Frac." column.

Citation. Jain & Wallace (2019), "Attention is not Explanation", NAACL: Kendall τ per
instance between attention and gradient / leave-one-out importance (Table 2, Fig. 2);
figures quoted for their BiLSTM models are about τ(attention, gradient) ≈ 0.35 on
SST and ≈ 0.31 on SNLI, and τ(gradient, leave-one-out) ≈ 0.66 on SST (check the
table before quoting them). Their leave-one-out is our ``occlusion``.

Hand-worked case. a = [3, 1, 2, 2], b = [3, 2, 1, 2]. Pairs (0,1), (0,2), (0,3) are
concordant, (1,2) discordant, (1,3) tied in b only, (2,3) tied in a only: C = 3,
D = 1, n₀ = 6, n₁ = n₂ = 1, so τ_b = 2 / sqrt(5 · 5) = 0.4. With k_frac = 0.5, k = 2:
top-2 of a is {0, 2} (2 goes before 3 in the row's seeded tie order), of b {0, 1}, overlap 1/2. A constant
vector has no τ_b.

>>> taus, pvalues = kendall_per_instance([[3, 1, 2, 2], [1, 1, 1]], [[3, 2, 1, 2], [0, 1, 2]])
>>> float(round(taus[0], 4)), bool(np.isnan(taus[1])), bool(np.isnan(pvalues[1]))
(0.4, True, True)
>>> top_k_overlap([[3, 1, 2, 2]], [[3, 2, 1, 2]], k_frac=0.5).tolist()
[0.5]
>>> [row] = agreement_matrix({"x": [[3, 1, 2, 2], [1, 1, 1]], "y": [[3, 2, 1, 2], [0, 1, 2]]},
...                          k_frac=0.5)
>>> row["a"], row["b"], row["n"], row["n_undefined"], round(row["tau_mean"], 4)
('x', 'y', 2, 1, 0.4)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import torch

from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.ranking import tie_keys, top_k_mask
from faithbench.benchmark.core.stats import bootstrap
from faithbench.metrics.rationale import bin_sizes

CITATION = (
    "Jain & Wallace (2019). Attention is not Explanation. NAACL-HLT 2019, pages 3543-3556."
)
SIGNIFICANCE = 0.05

Scores = Sequence[Sequence[float]]


def kendall_per_instance(a: Scores, b: Scores) -> tuple[np.ndarray, np.ndarray]:
    """(E,) Kendall τ-b and (E,) its p-value per example; NaN where τ-b is undefined
    (fewer than 2 tokens, or either vector constant)."""
    from scipy.stats import kendalltau

    rows = _pairs(a, b)
    taus, pvalues = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    for i, (x, y) in enumerate(rows):
        if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
            continue  # zero denominator: undefined, left NaN (scipy would warn and agree)
        result = kendalltau(x, y, variant="b")
        taus[i], pvalues[i] = float(result.statistic), float(result.pvalue)
    return taus, pvalues


def top_k_overlap(a: Scores, b: Scores, k_frac: float = 0.2) -> np.ndarray:
    """(E,) |top-k(a) ∩ top-k(b)| / k per example, k = ceil(k_frac · n) in [1, n]."""
    check_k_frac(k_frac)
    rows = _pairs(a, b)
    if not rows:
        return np.empty(0)
    lengths = torch.tensor([len(x) for x, _ in rows])
    width = int(lengths.max())
    mask = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)  # (E, T)
    sa, sb = torch.zeros(len(rows), width, dtype=torch.float64), torch.zeros(len(rows), width,
                                                                             dtype=torch.float64)
    for i, (x, y) in enumerate(rows):
        sa[i, : len(x)], sb[i, : len(y)] = torch.from_numpy(x), torch.from_numpy(y)
    k = bin_sizes(lengths, (k_frac,), "ceil")[:, 0]  # (E,)
    ties = tie_keys([str(i) for i in range(len(rows))], width)  # row i: one example
    both = top_k_mask(sa, mask, k, ties) & top_k_mask(sb, mask, k, ties)
    return (both.sum(dim=1).double() / k.double()).numpy()


def agreement_matrix(scores_by_explainer: dict[str, Scores], *, k_frac: float = 0.2
                     ) -> list[dict]:
    """One row per unordered pair of explainers (in the dict's order), summarised
    over the examples; every interval comes from ``faithbench.benchmark.core.stats.bootstrap``.

    Each explainer's list holds one score vector per example, in the same example order.
    """
    check_k_frac(k_frac)
    rows = []
    for name_a, name_b in itertools.combinations(scores_by_explainer, 2):
        a, b = scores_by_explainer[name_a], scores_by_explainer[name_b]
        try:
            taus, pvalues = kendall_per_instance(a, b)
            overlap = top_k_overlap(a, b, k_frac)
        except InputError as exc:
            raise InputError(f"explainers {name_a!r} and {name_b!r}: {exc}") from None
        if len(taus) == 0:
            raise InputError(f"explainers {name_a!r} and {name_b!r}: no examples to compare")
        defined = ~np.isnan(taus)
        tau = _summary(taus[defined])
        share = _summary((pvalues[defined] <= SIGNIFICANCE).astype(float))
        top = _summary(overlap)
        sd = float(np.std(taus[defined], ddof=1)) if defined.sum() >= 2 else None
        rows.append({
            "a": name_a, "b": name_b, "n": len(taus), "n_undefined": int((~defined).sum()),
            "tau_mean": tau["mean"], "tau_ci_low": tau["ci_low"], "tau_ci_high": tau["ci_high"],
            "tau_sd": sd,
            "share_p_le_0_05": share["mean"], "share_p_le_0_05_ci_low": share["ci_low"],
            "share_p_le_0_05_ci_high": share["ci_high"],
            "topk_overlap_mean": top["mean"], "topk_overlap_ci_low": top["ci_low"],
            "topk_overlap_ci_high": top["ci_high"],
            "k_frac": k_frac,
        })
    return rows


def _summary(values: np.ndarray) -> dict:
    """Mean and CI, or None for each when no example has a defined value (never 0)."""
    if len(values) == 0:
        return {"mean": None, "ci_low": None, "ci_high": None}
    est = bootstrap(values)
    return {"mean": est.mean, "ci_low": est.ci_low, "ci_high": est.ci_high}


def _pairs(a: Scores, b: Scores) -> list[tuple[np.ndarray, np.ndarray]]:
    if len(a) != len(b):
        raise InputError(f"score lists cover {len(a)} and {len(b)} examples; expected the same")
    rows = []
    for i, (x, y) in enumerate(zip(a, b)):
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        if x.ndim != 1 or y.ndim != 1 or len(x) != len(y):
            raise InputError(f"example {i}: score vectors of shapes {x.shape} and {y.shape}; "
                             "expected one score per token, same length")
        if len(x) == 0:
            raise InputError(f"example {i}: empty score vectors")
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
            raise InputError(f"example {i}: non-finite scores")
        rows.append((x, y))
    return rows


def check_k_frac(k_frac: float) -> None:
    """Refuse a top-k fraction outside (0, 1] before any work is done."""
    if isinstance(k_frac, bool) or not isinstance(k_frac, (int, float)) or not (
            math.isfinite(k_frac) and 0 < k_frac <= 1):
        raise InputError(f"k_frac must be a number in (0, 1], got {k_frac!r}")
