"""Plausibility: agreement of the explainer's scores with a reference rationale.

Two metrics, both per example, both against the same binary reference R (the real
tokens a human, or the generator of a synthetic task, marked). Neither makes a
forward pass: these are *not* faithfulness metrics, and they are ranked in their
own family, never mixed with faithfulness.

Contract shared by both. The runner hands a plausibility metric only examples whose
reference marks at least one real token (tasks keep unannotated or empty-rationale
examples, and the runner skips them for this family). A row that still arrives with
no reference, or with a reference that marks no real token, has no defined value:
it raises ``EmptyReferenceError`` (a ``ValueError``) naming the example ids, never
a silent zero. Reference bits on padded positions are ignored.

Metric card: ``r_precision``
----------------------------
Formula. With k = |R|, let S be the k most important tokens by the explainer's
scores (``benchmark.core.ranking``; ties broken by position, earlier first). With
|S| = |R| = k, precision, recall and F1 coincide::

    r_precision(x) = |S ∩ R| / k

R-precision: the precision at k = |R| (which is also the recall and F1 there). It
is *not* ERASER's token F1, which cuts every example at one dataset-level k.

Direction. Higher is more plausible (more like the reference).

Range. [0, 1]. 1 means the explainer's top |R| tokens are exactly the reference;
0 means none of them is.

Metric card: ``average_precision``
----------------------------------
Formula. Rank the n real tokens by score (``benchmark.core.ranking.importance_order``:
ties broken by position, earlier first). With rel_i = 1 if the i-th ranked token is
in R, P_i = (rel_1 + ... + rel_i) / i the precision and R_i = (rel_1 + ... + rel_i) / |R|
the recall after i tokens::

    average_precision(x) = Σ_{i=1..n} (R_i − R_{i−1}) · P_i = (1 / |R|) · Σ_{i : rel_i = 1} P_i

the step-wise area under the precision–recall curve, i.e. average precision: the
definition of scikit-learn's ``average_precision_score`` (and of ERASER's
``average_precision`` soft-score metric), up to tie handling — scikit-learn puts
all tokens with equal scores at one threshold, so a tied block counts with its
pooled precision; here the block is ordered by position, like every other metric
of the benchmark. It is *not* the trapezoidal ``auc(recall, precision)`` that
ERASER's script also reports under the name ``auprc``: linear interpolation between
points of a PR curve is optimistic (Davis & Goadrich 2006). Only the order of the
scores matters, not their scale.

Direction. Higher is more plausible: the reference tokens come first.

Range. (0, 1]. 1 means every reference token is ranked above every other token;
the minimum, reached when R's tokens come last, is
(1 / |R|) · Σ_{j=1..|R|} j / (n − |R| + j) > 0. A random order scores about |R| / n
in expectation (a little more on short inputs), so compare values only at similar
rationale densities. A reference covering every real token scores 1 for any
explainer (ERASER drops such rows; here the task decides, see the contract above).

Common to both
--------------
OOD caveat. None of its own (nothing is erased), but plausibility says nothing about
faithfulness: a model can be right for reasons the reference does not mark, and then
a faithful explainer scores low here.

Citation. DeYoung, Jain, Rajani, Lehman, Xiong, Socher & Wallace (2020), "ERASER: A
benchmark to evaluate rationalized NLP models", ACL.

Hand-worked cases. Reference {0, 2} (k = 2); scores [0.9, 0.1, 0.5, 0.7] rank
positions 0, 3, 2, 1. r_precision: the top two {0, 3} hold one hit of two, 0.5.
average_precision: hits at ranks 1 and 3, precisions 1/1 and 2/3, AP = (1 + 2/3) / 2 = 5/6.
With scores tied everywhere the order is 0, 1, 2, 3: r_precision = 0.5 again ({0, 1}),
average_precision = (1/1 + 2/3) / 2 = 5/6 (hits at ranks 1 and 3); scikit-learn's tie pooling
would give 2/4 = 0.5 instead.

>>> import torch
>>> from benchmark.core.api import Batch, MetricInput
>>> ids = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 8]])
>>> batch = Batch(ids, torch.ones(2, 4, dtype=torch.bool), ("a", "b"))
>>> scores = torch.tensor([[0.9, 0.1, 0.5, 0.7], [1.0, 1.0, 1.0, 1.0]])
>>> reference = torch.tensor([[True, False, True, False]] * 2)
>>> inp = MetricInput(batch, scores, torch.tensor([0, 0]), torch.full((2, 2), 0.5), None, reference)
>>> r_precision(inp)
tensor([0.5000, 0.5000], dtype=torch.float64)
>>> average_precision(inp)
tensor([0.8333, 0.8333], dtype=torch.float64)
"""

from __future__ import annotations

import torch

from benchmark.core.api import (
    CLASSIFICATION,
    PAIR_CLASSIFICATION,
    MetricInput,
    MetricSpec,
    SimpleMetric,
)
from benchmark.core.errors import InputError
from benchmark.core.ranking import importance_order, top_k_mask

CITATION = (
    "DeYoung, Jain, Rajani, Lehman, Xiong, Socher & Wallace (2020). ERASER: A benchmark to "
    "evaluate rationalized NLP models. ACL 2020."
)


class EmptyReferenceError(InputError, ValueError):
    """A row's reference rationale marks no real token, so a plausibility value is undefined."""


def checked_reference(metric: str, inp: MetricInput) -> tuple[torch.Tensor, torch.Tensor]:
    """(reference & mask (B, T) bool, |R| (B,) long); raises naming the examples whose
    reference is missing or marks no real token."""
    batch = inp.batch
    if inp.reference is None:
        raise EmptyReferenceError(
            f"metric {metric} needs a reference rationale; none given for examples "
            f"{', '.join(batch.example_ids)}"
        )
    reference = inp.reference.to(torch.bool) & batch.mask  # (B, T)
    k = reference.sum(dim=1)  # (B,)
    empty = (k == 0).nonzero().flatten().tolist()
    if empty:
        ids = ", ".join(batch.example_ids[i] for i in empty)
        raise EmptyReferenceError(f"metric {metric}: empty reference rationale for examples {ids}")
    return reference, k


def r_precision(inp: MetricInput) -> torch.Tensor:
    """(B,) |top-k(scores) ∩ R| / k with k = |R|, R = reference & mask."""
    reference, k = checked_reference("r_precision", inp)
    top = top_k_mask(inp.scores, inp.batch.mask, k)  # (B, T)
    hits = (top & reference).sum(dim=1)
    return (hits.double() / k.double()).cpu()


def average_precision(inp: MetricInput) -> torch.Tensor:
    """(B,) average precision of the score ranking against R = reference & mask."""
    reference, k = checked_reference("average_precision", inp)
    order = importance_order(inp.scores, inp.batch.mask)  # (B, T), padding last
    rel = reference.gather(1, order).double()  # (B, T): 1 where the i-th ranked token is in R
    rank = torch.arange(1, rel.shape[1] + 1, dtype=torch.float64, device=rel.device)
    precision = rel.cumsum(dim=1) / rank  # (B, T) P_i
    # padded positions rank last and are never in R, so they add nothing
    return ((precision * rel).sum(dim=1) / k.double()).cpu()


def _spec(name: str) -> MetricSpec:
    return MetricSpec(
        name=name,
        version="1",
        direction="higher",
        kinds=frozenset({CLASSIFICATION, PAIR_CLASSIFICATION}),
        family="plausibility",
        needs_reference=True,
        citation=CITATION,
    )


R_PRECISION = SimpleMetric(spec=_spec("r_precision"), fn=r_precision)
AVERAGE_PRECISION = SimpleMetric(spec=_spec("average_precision"), fn=average_precision)
