"""Comprehensiveness and sufficiency of the top-k rationale (ERASER).

Metric card
-----------
Formula. For an example x with n real tokens and predicted class ŷ, and a bin b
(a fraction of the input), the rationale r_b is the k_b most important tokens,
k_b = ceil(b · n) clamped to [1, n]. Then::

    comprehensiveness(x) = 1/|bins| · Σ_b ( p_ŷ(x) − p_ŷ(x ∖ r_b) )
    sufficiency(x)       = 1/|bins| · Σ_b ( p_ŷ(x) − p_ŷ(r_b) )

i.e. the AOPC of DeYoung et al. over bins {1, 5, 10, 20, 50}% by default. x ∖ r_b
erases the rationale; r_b keeps only the rationale (with "delete", the remaining
tokens keep their order). k_b is computed in exact rational arithmetic from the
decimal the bin is written as, so ceil(0.1 · 30) = 3 and ceil(0.07 · 100) = 7 (in
floating point 0.07 * 100 = 7.000000000000001, whose ceil is 8). ``rounding="round"``
rounds half up (2.5 → 3); ``rounding="floor"`` rounds down, then clamps to at least 1.
Ties in the scores are broken by position (earlier first) through
``faithbench.benchmark.core.ranking``; n counts the tokens of the whole input (premise and
hypothesis together for NLI).

Direction. comprehensiveness: higher is more faithful (erasing the rationale hurts
the prediction). sufficiency: lower is more faithful (the rationale alone keeps it).

Range. [−1, 1] each. Extremes: comprehensiveness ≈ 1 means ŷ is lost whenever its
rationale is erased; negative means the rationale held evidence *against* ŷ.
Sufficiency ≈ 0 means the rationale alone gives the full-input confidence; negative
means the rationale alone is *more* confident than x; ≈ 1 means it carries nothing.

Parameters. ``bins`` (default (0.01, 0.05, 0.1, 0.2, 0.5)), ``rounding`` ("ceil",
"round", "floor", or "trunc": floor without the clamp, a k = 0 bin is skipped),
``eraser`` ("delete", "mask", "pad", "retokenize"), and three switches that are off by
default: ``positive_only`` (the rationale is the top-k units scored above 0, so it may
hold fewer than k; a bin whose rationale is empty is skipped), ``distinct`` (a bin
whose rationale equals the last kept bin's is skipped) and ``if_empty`` (the value
when every bin is skipped; default NaN, the example has none). The ``ferret`` preset
(``comprehensiveness[preset=ferret]``) sets them as ferret-xai 0.4.2 computes its
AOPC: bins 0.1, …, 1.0, ``trunc``, positive only, distinct, 0 (comprehensiveness) or
1 (sufficiency) when empty, pieces not words, the ``retokenize`` eraser (each
perturbation decoded to text and tokenized again), and ``ties="introsort"``: equal
scores in the order of numpy's own default ``argsort``, reversed, as ferret ranks (by
default ties go by position, earlier first). ferret's order is that of its numpy on its
CPU; ``faithbench.metrics.variants.TIES`` says which option reproduces it where.

Subword models. On a Transformer n and k_b count whole words (a rationale holds all
pieces of its words; ``granularity="subword"`` for pieces); see ``faithbench.metrics.variants``.

OOD caveat. x ∖ r_b and r_b alone may lie off the training distribution, so a
probability drop (a high comprehensiveness, a high sufficiency) can come from that
shift rather than from missing evidence; compare against a random explainer.

Citation. DeYoung, Jain, Rajani, Lehman, Xiong, Socher & Wallace (2020), "ERASER: A
benchmark to evaluate rationalized NLP models", ACL.

Hand-worked case. Voting model p(c) ∝ 1 + (votes for c); token 2 votes class 0,
token 3 class 1. x = [2, 2, 3], p₀(x) = 3/5, bins (0.3, 0.5): k = ceil(0.9) = 1 and
ceil(1.5) = 2. Erasing position 0 gives p₀ = 2/4, erasing 0 and 1 gives 1/3, so
comprehensiveness = ((.6 − .5) + (.6 − 1/3)) / 2 = 0.1833. Keeping only position 0
gives 2/3, keeping 0 and 1 gives 3/4, so sufficiency = (−.0667 − .15) / 2 = −0.1083.

>>> import torch
>>> from faithbench.benchmark.core.api import Batch, MetricInput
>>> from faithbench.benchmark.core.perturb import Perturber
>>> from faithbench.testing import Votes  # p(c) ∝ 1 + real tokens voting for c
>>> batch = Batch(torch.tensor([[2, 2, 3]]), torch.ones(1, 3, dtype=torch.bool), ("a",))
>>> perturber = Perturber(Votes())
>>> inp = MetricInput(batch, torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([0]),
...                   perturber.probs(batch), perturber)
>>> plain = dict(positive_only=None, distinct=None, if_empty=None, ties=None,
...              eraser="delete", segment=None, granularity=None)
>>> comp = comprehensiveness(inp, bins=(0.3, 0.5), rounding="ceil", **plain)
>>> round(comp.values.item(), 4)
0.1833
>>> [round(d, 4) for d in comp.curve[0].tolist()]  # the two bins' drops
[0.1, 0.2667]
>>> suff = sufficiency(inp, bins=(0.3, 0.5), rounding="ceil", **plain)
>>> round(suff.values.item(), 4)
-0.1083
>>> bin_sizes(torch.tensor([30, 100, 5]), (0.1, 0.07, 0.5), "ceil").tolist()
[[3, 3, 15], [10, 7, 50], [1, 1, 3]]
"""

from __future__ import annotations

from fractions import Fraction

import torch

from faithbench.benchmark.core.api import (
    MetricInput,
    MetricOutput,
    MetricSpec,
    SimpleMetric,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.metrics.variants import (
    TIES,
    candidates,
    check_eraser,
    faithfulness_spec,
    masked_mean,
    target_drops,
    variant_probs,
)

ROUNDINGS = ("ceil", "round", "floor", "trunc")
CITATION = (
    "DeYoung, Jain, Rajani, Lehman, Xiong, Socher & Wallace (2020). ERASER: A benchmark to "
    "evaluate rationalized NLP models. ACL 2020."
)


def bin_sizes(lengths: torch.Tensor, bins, rounding: str) -> torch.Tensor:
    """(B, len(bins)) long rationale sizes k = rounding(b · n) clamped to [1, n]
    (``trunc``: floor(b · n) in [0, n], ferret's int(p · n); a k = 0 bin is skipped).

    Exact: each bin is read as the fraction its decimal spells (0.1 -> 1/10), and
    k is computed with integer arithmetic, so no float error moves a k across an integer.
    """
    n = lengths.to(torch.long).unsqueeze(1)  # (B, 1)
    sizes = []
    for b in bins:
        frac = Fraction(str(b))
        p, q = frac.numerator, frac.denominator
        if rounding == "ceil":
            k = -((-p * n) // q)
        elif rounding == "round":  # half up: floor(x + 1/2)
            k = (2 * p * n + q) // (2 * q)
        else:  # floor
            k = (p * n) // q
        sizes.append(k)
    k = torch.cat(sizes, dim=1) if sizes else n[:, :0]
    return torch.minimum(k.clamp(min=0 if rounding == "trunc" else 1), n)


def comprehensiveness(inp: MetricInput, *, bins, rounding: str, positive_only: bool | None,
                      distinct: bool | None, if_empty: float | None, ties: str | None,
                      eraser: str, segment: int | None, granularity: str | None
                      ) -> MetricOutput:
    """(B,) mean over bins of p_ŷ(x) − p_ŷ(x without its top-k_b tokens) (and each
    bin's drop: the curve)."""
    return _drops(inp, bins, rounding, eraser, segment, keep_rationale=False,
                  name="comprehensiveness", granularity=granularity,
                  positive_only=positive_only, distinct=distinct, if_empty=if_empty, ties=ties)


def sufficiency(inp: MetricInput, *, bins, rounding: str, positive_only: bool | None,
                distinct: bool | None, if_empty: float | None, ties: str | None, eraser: str,
                segment: int | None, granularity: str | None) -> MetricOutput:
    """(B,) mean over bins of p_ŷ(x) − p_ŷ(only the top-k_b tokens of x) (and each
    bin's drop: the curve)."""
    return _drops(inp, bins, rounding, eraser, segment, keep_rationale=True, name="sufficiency",
                  granularity=granularity, positive_only=positive_only, distinct=distinct,
                  if_empty=if_empty, ties=ties)


def _drops(inp, bins, rounding, eraser, segment, *, keep_rationale: bool, name: str,
           granularity: str | None, positive_only: bool | None, distinct: bool | None,
           if_empty: float | None, ties: str | None):
    _check(name, bins, rounding)
    check_eraser(name, eraser)
    batch = inp.batch
    cand = candidates(name, inp, segment, granularity)  # with a segment, the other sentence stays
    k = bin_sizes(cand.n, bins, rounding).to(batch.mask.device)  # (B, V)
    if ties not in TIES:
        raise InputError(f"metric {name}: unknown ties {ties!r}; leave it out (by position, "
                         f"earlier first) or choose one of {', '.join(TIES[1:])} (ferret's "
                         "argsort order, faithbench.metrics.variants.TIES)")
    rationale = cand.ranked(inp.scores, k, positive_only=bool(positive_only), ties=ties)
    valid = rationale.any(dim=2)  # a bin with an empty rationale is skipped
    if distinct:
        valid = valid & ~repeats(rationale, valid)
    if keep_rationale:
        keeps = rationale | (batch.mask & ~cand.eligible).unsqueeze(1)
    else:
        keeps = batch.mask.unsqueeze(1) & ~rationale
    drops = target_drops(inp, variant_probs(inp, keeps, valid, eraser))  # (B, V)
    values = masked_mean(drops, valid)
    none = ~valid.cpu().any(dim=1)
    values = torch.where(none, float("nan") if if_empty is None else float(if_empty), values)
    return MetricOutput(values.double(), curve=drops.double().masked_fill(~valid, float("nan")))


def repeats(rationale: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(B, V) True where bin v's rationale equals that of the last earlier bin kept
    (ferret drops such a bin from the average: the same omission counted once)."""
    out = torch.zeros_like(valid)
    last = torch.full((valid.shape[0],), -1, dtype=torch.long, device=valid.device)
    rows = torch.arange(valid.shape[0], device=valid.device)
    for v in range(valid.shape[1]):
        seen = last >= 0
        same = seen & (rationale[rows, last.clamp(min=0)] == rationale[:, v]).all(dim=1)
        out[:, v] = valid[:, v] & same
        last = torch.where(valid[:, v] & ~same, v, last)
    return out


def _check(name: str, bins, rounding: str) -> None:
    if rounding not in ROUNDINGS:
        raise InputError(
            f"metric {name}: unknown rounding {rounding!r}; choose one of {', '.join(ROUNDINGS)}"
        )
    if not isinstance(bins, (tuple, list)) or not bins:
        raise InputError(
            f"metric {name}: bins must be a non-empty tuple of fractions, got {bins!r}"
        )
    for b in bins:
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b <= 1:
            raise InputError(f"metric {name}: every bin must be a number in (0, 1], got {b!r}")


def _spec(name: str, direction: str) -> MetricSpec:
    # positive_only, distinct, if_empty: off (None) by default, set by the ferret preset
    return faithfulness_spec(name, direction, (("bins", (0.01, 0.05, 0.1, 0.2, 0.5)),
                                               ("rounding", "ceil"), ("positive_only", None),
                                               ("distinct", None), ("if_empty", None),
                                               ("ties", None)), CITATION,
                             version="2")  # 2: equal scores in a seeded random order


COMPREHENSIVENESS = SimpleMetric(spec=_spec("comprehensiveness", "higher"), fn=comprehensiveness)
SUFFICIENCY = SimpleMetric(spec=_spec("sufficiency", "lower"), fn=sufficiency)
