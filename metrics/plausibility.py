"""Plausibility: agreement of the explainer's scores with a reference rationale.

Six metrics, all against the same binary reference R (the real tokens a human, or
the generator of a synthetic or shortcut task, marked); five per example, one
(``token_f1_micro``) at corpus level. None makes a forward pass: these are *not* faithfulness metrics, and
they are ranked in their own family, never mixed with faithfulness. Three of them are
ERASER's definitions, under ERASER's names (``token_f1``, ``auprc``, version 2; and
the pooled ``token_f1_micro``); two are the rank-based variants that
version 1 of those names computed, now under their textbook names (``r_precision``,
``average_precision``, version 1). They differ in two choices:

================== ================================= ===================================
metric             cut / curve                       tied scores
================== ================================= ===================================
r_precision        top k, k = |R| of *this* example  a random order seeded by the example
token_f1           top k, k = ceil(rate · n), one    a random order seeded by the example
                   dataset-level rate (ERASER)
average_precision  step-wise PR area (AP)            a random order seeded by the example
auprc              trapezoidal PR area (ERASER)      pooled: one threshold per value
================== ================================= ===================================

Contract shared by all four. The runner hands a plausibility metric only examples
whose reference marks at least one real token (tasks keep unannotated or
empty-rationale examples, and the runner skips them for this family). A row that
still arrives with no reference, or with a reference that marks no real token, has no
defined value: it raises ``EmptyReferenceError`` (a ``ValueError``) naming the example
ids, never a silent zero. Reference bits on padded positions are ignored. Only the
order of the scores matters (and, for ``auprc``, which of them are equal), not their
scale.

Metric card: ``r_precision``
----------------------------
Formula. With k = |R|, let S be the k most important tokens by the explainer's
scores (``faithbench.benchmark.core.ranking``; equal scores in a random order seeded by
the example's id, ``tie_keys``). With
|S| = |R| = k, precision, recall and F1 coincide::

    r_precision(x) = |S ∩ R| / |R|

R-precision. Unlike ``token_f1`` the cut adapts to each example's own |R|, which
the explainer is told for free.

Direction. Higher is more plausible (more like the reference).

Range. [0, 1]. 1 means the explainer's top |R| tokens are exactly the reference;
0 means none of them is.

Metric card: ``token_f1``
-------------------------
Formula. ERASER's token-level hard-rationale F1 (``score_hard_rationale_predictions``,
'instance_macro'), with the hard rationale cut from the soft scores at one
dataset-level k as ERASER does for soft-scoring models. With n real tokens and a
rate ρ, k = ceil(ρ · n) clamped to [1, n] (a product within 1e-9 of an integer
counts as that integer, so float noise in ρ never adds a token: 0.07 · 100 is
7.000000000000001 in floating point, and k is 7). S is the top k tokens (ties in
the seeded random order, as for ``r_precision``)::

    P = |S ∩ R| / |S|,  Rec = |S ∩ R| / |R|,
    token_f1(x) = 2 · P · Rec / (P + Rec) = 2 |S ∩ R| / (k + |R|),  0 when S ∩ R = ∅

The dataset mean of these per-example values is ERASER's instance-macro F1.

Parameter. ``k_frac`` (default None): ρ. None uses ``MetricInput.reference_rate``,
the engine's mean of |R| / n over all the examples being scored, so k is the same
fraction of every input (ERASER's "average rationale length"), not each example's
|R|. A value in (0, 1] fixes ρ, e.g. ``token_f1[k_frac=0.2]``. With neither, the
metric raises ``InputError``. Because of the dataset-level ρ, a row's value depends
on which other examples are scored; for a fixed ρ it does not.

Direction. Higher is more plausible.

Range. [0, 1]. 1 needs k = |R| and S = R exactly; on an example whose |R| differs
from ρ · n even a perfect ranking scores 2 min(k, |R|) / (k + |R|) < 1. 0 means none
of the top k is in R. ERASER treats premise and hypothesis of e-SNLI as two
instances; here an example (both segments together) is one.

Metric card: ``token_f1_micro`` (corpus level)
----------------------------------------------
Formula. The same cut S as ``token_f1``, pooled over the corpus instead of averaged
per example: ERASER's 'instance_micro' F1, with P = Σ|S ∩ R| / Σ|S| and
R = Σ|S ∩ R| / Σ|R| over all examples scored::

    token_f1_micro = 2 P R / (P + R) = 2 Σ|S ∩ R| / (Σ|S| + Σ|R|)

Each example contributes its sufficient statistics (|S ∩ R|, |S|, |R|); the record's
value is their aggregation, and its bootstrap CI resamples examples and re-aggregates
(``faithbench.benchmark.core.stats.corpus_bootstrap``). The per-example values written beside it
are each example's own F1, for inspection; they do not average to the corpus value.
Long examples weigh more than in ``token_f1``.

Parameter. ``k_frac``, as for ``token_f1``. Direction: higher. Range [0, 1].

Metric card: ``average_precision``
----------------------------------
Formula. Rank the n real tokens by score (``faithbench.benchmark.core.ranking.importance_order``:
equal scores in the example's seeded random order). With rel_i = 1 if the i-th ranked token is
in R, P_i = (rel_1 + ... + rel_i) / i the precision and R_i = (rel_1 + ... + rel_i) / |R|
the recall after i tokens::

    average_precision(x) = Σ_{i=1..n} (R_i − R_{i−1}) · P_i = (1 / |R|) · Σ_{i : rel_i = 1} P_i

the step-wise area under the precision–recall curve: scikit-learn's
``average_precision_score`` (ERASER's ``average_precision`` soft-score metric), up
to ties — scikit-learn puts all tokens with equal scores at one threshold; here a
tied block is taken in the example's seeded random order, like every other
rank-based metric of the benchmark (an order by position would reward a constant
explainer whenever the reference sits early).

Direction. Higher is more plausible: the reference tokens come first.

Range. (0, 1]. 1 means every reference token is ranked above every other token;
the minimum, reached when R's tokens come last, is
(1 / |R|) · Σ_{j=1..|R|} j / (n − |R| + j) > 0. A random order scores about |R| / n
in expectation (a little more on short inputs), so compare values only at similar
rationale densities. A reference covering every real token scores 1 for any
explainer (ERASER drops such rows from AP; here the task decides, see above).

Metric card: ``mean_rank``
--------------------------
Formula. Bastings et al.'s (2022) "mean rank", for ground truth planted in the data
(``shortcut_*`` tasks): how deep the ranking must be read to hold all of R. With
the tokens ranked as for ``average_precision``::

    mean_rank(x) = max { i : rel_i = 1 }

the 1-based place of R's last token; the summary is its mean over examples. Their
"precision@k", k = the size of the shortcut, is ``r_precision``.

Direction. Lower is better. Range [|R|, n]: |R| when R comes first, n when one of
its tokens comes last. A random order gives |R| (n + 1) / (|R| + 1) in expectation.

Metric card: ``auprc``
----------------------
Formula. ERASER's ``_auprc``: scikit-learn's ``precision_recall_curve(R, scores)``
then ``auc(recall, precision)``. The thresholds are the distinct score values, from
the highest down; at threshold θ, with S_θ = {tokens with score ≥ θ} (a tied block
enters at once), P_θ = |S_θ ∩ R| / |S_θ| and Rec_θ = |S_θ ∩ R| / |R|. With the
points sorted by recall and scikit-learn's final point (Rec, P) = (0, 1) added::

    auprc(x) = Σ_j (Rec_j − Rec_{j−1}) · (P_j + P_{j−1}) / 2

the trapezoidal area. Points at recall 1 after the first add no area, so versions of
scikit-learn that stop the curve at full recall give the same value.

Direction. Higher is more plausible.

Range. (0, 1]. 1 means every reference token scores strictly above every other.
Linear interpolation between PR points is optimistic (Davis & Goadrich 2006), and
pooling ties makes it more so: constant scores form one threshold and get
(1 + |R| / n) / 2 ≥ 1/2, while ``average_precision`` gives an order that puts the
reference last at most |R| / n. Compare it with ``average_precision`` for the same
explainer.

Common to all four
------------------
Subword models. On a Transformer every count is of *words*, as in the faithfulness
metrics (``faithbench.metrics.variants``): a word's score is the sum of its pieces' scores, a word
is in R when its pieces are (a word-level mark is copied to each piece), and n, k, |R|
and the ranks count words, so a rationale word of three pieces counts once, as in
ERASER's word tokens. The engine's ρ is a mean over words too. ``granularity=
"subword"`` ranks and counts the pieces instead (each piece its own unit; ``token_f1``
then needs ``k_frac``). Versions 2 (3 for ``token_f1``, ``auprc``) count words; the
versions before counted pieces on a Transformer (the same values on a BiLSTM).
Versions 3 (4 for ``token_f1``, 2 for ``mean_rank``) order equal scores at random, seeded
by the example; the versions before ordered them by position (``auprc`` pools ties, so
the order never mattered to it).

OOD caveat. None of their own (nothing is erased), but plausibility says nothing
about faithfulness: a model can be right for reasons the reference does not mark,
and then a faithful explainer scores low here.

Citation. DeYoung, Jain, Rajani, Lehman, Xiong, Socher & Wallace (2020), "ERASER: A
benchmark to evaluate rationalized NLP models", ACL (``rationale_benchmark/metrics.py``).

Hand-worked cases. Reference {0, 2} of n = 4; row a scores [0.9, 0.1, 0.5, 0.7]
(order 0, 3, 2, 1), row b ties everywhere (order 1, 2, 0, 3: the keys seeded by its id
"b", ``ranking.tie_keys``).

- r_precision (k = |R| = 2): a: top {0, 3} holds one hit, 1/2; b: {1, 2}, 1/2.
- token_f1 with ρ = 0.75 (k = ceil(3) = 3): a: {0, 3, 2} holds both hits,
  2 · 2 / (3 + 2) = 0.8; b: {1, 2, 0}, 0.8 too. With the engine's ρ = 2/4 it would
  equal r_precision here; with k_frac = 0.25 (k = 1), a: {0} gives 2 · 1 / 3 = 2/3,
  b: {1} no hit, 0.
- average_precision: a: hits at ranks 1 and 3, (1/1 + 2/3) / 2 = 5/6; b: at ranks 2
  and 3, (1/2 + 2/3) / 2 = 7/12 (scikit-learn's pooling would give 2/4 for b).
- auprc: a: thresholds 0.9, 0.7, 0.5, 0.1 give (Rec, P) = (1/2, 1), (1/2, 1/2),
  (1, 2/3), (1, 1/2); from (0, 1) the area is 1/2 · 1 + 0 + 1/2 · (1/2 + 2/3) / 2 + 0
  = 19/24 ≈ 0.7917. b: one threshold, (1, 2/4): (1 + 1/2) / 2 = 3/4.

>>> import torch
>>> from faithbench.benchmark.core.api import Batch, MetricInput
>>> ids = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 8]])
>>> batch = Batch(ids, torch.ones(2, 4, dtype=torch.bool), ("a", "b"))
>>> scores = torch.tensor([[0.9, 0.1, 0.5, 0.7], [1.0, 1.0, 1.0, 1.0]])
>>> reference = torch.tensor([[True, False, True, False]] * 2)
>>> inp = MetricInput(batch, scores, torch.tensor([0, 0]), torch.full((2, 2), 0.5), None,
...                   reference, reference_rate=0.75)
>>> r_precision(inp, granularity=None)
tensor([0.5000, 0.5000], dtype=torch.float64)
>>> token_f1(inp, k_frac=None, granularity=None)
tensor([0.8000, 0.8000], dtype=torch.float64)
>>> token_f1(inp, k_frac=0.25, granularity=None)
tensor([0.6667, 0.0000], dtype=torch.float64)
>>> average_precision(inp, granularity=None)
tensor([0.8333, 0.5833], dtype=torch.float64)
>>> mean_rank(inp, granularity=None)  # a: order 0, 3, 2, 1; b: all tied, order 1 2 0 3
tensor([3., 3.], dtype=torch.float64)
>>> auprc(inp, granularity=None)
tensor([0.7917, 0.7500], dtype=torch.float64)

token_f1 vs token_f1_micro. Row c: n = 2, R = {0}, ranked 0 first; row d: n = 8,
R = {0..3}, ranked 7, 6, 5, 4, ... first; ρ = 0.5. c: k = 1, one hit, F1 = 1; d: k = 4,
no hit, F1 = 0. Macro (mean) 0.5; micro 2 · 1 / ((1 + 4) + (1 + 4)) = 0.2.

>>> ids = torch.tensor([[5, 6, 0, 0, 0, 0, 0, 0], [5, 6, 7, 8, 9, 10, 11, 12]])
>>> batch = Batch(ids, ids > 0, ("c", "d"))
>>> scores = torch.tensor([[1.0, 0.0] + [0.0] * 6, [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]])
>>> reference = torch.tensor([[True] + [False] * 7, [True] * 4 + [False] * 4])
>>> inp = MetricInput(batch, scores, torch.tensor([0, 0]), torch.full((2, 2), 0.5), None,
...                   reference, reference_rate=0.5)
>>> out = token_f1_micro(inp, k_frac=None, granularity=None)
>>> out.values.tolist(), out.stats.tolist()
([1.0, 0.0], [[1.0, 1.0, 1.0], [0.0, 4.0, 4.0]])
>>> float(TOKEN_F1_MICRO.spec.aggregation(out.stats.sum(0).numpy()))
0.2
"""

from __future__ import annotations

from dataclasses import replace

import torch

from faithbench.benchmark.core.api import (
    CLASSIFICATION,
    PAIR_CLASSIFICATION,
    Aggregation,
    MetricInput,
    MetricOutput,
    MetricSpec,
    SimpleMetric,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.ranking import importance_order, tie_keys, top_k_mask
from faithbench.metrics.variants import GRANULARITIES, Candidates

CITATION = (
    "DeYoung, Jain, Rajani, Lehman, Xiong, Socher & Wallace (2020). ERASER: A benchmark to "
    "evaluate rationalized NLP models. ACL 2020."
)
SHORTCUTS_CITATION = (
    "Bastings, Ebert, Zablotskaia, Sandholm & Filippova (2022). \"Will You Find These "
    "Shortcuts?\" A Protocol for Evaluating the Faithfulness of Input Salience Methods for "
    "Text Classification. EMNLP 2022."
)
# rate · n within this of an integer counts as that integer (float noise in the rate)
K_TOLERANCE = 1e-9


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


def by_unit(metric: str, inp: MetricInput, granularity: str | None) -> MetricInput:
    """``inp`` with one position per word where the batch has ``words`` (scores (B, W)
    summed over a word's pieces, the word in R if any piece is), else as it is."""
    if granularity not in GRANULARITIES:
        raise InputError(f"metric {metric}: unknown granularity {granularity!r}; choose "
                         "word (default) or subword")
    batch = inp.batch
    if batch.words is None or granularity == "subword":
        return inp
    words = Candidates(batch.mask, batch.lengths, ties=None, words=batch.words)  # pooling only
    scores, exists = words.pool(inp.scores)  # (B, W)
    reference = None
    if inp.reference is not None:
        marked = (inp.reference.to(torch.bool) & batch.mask).to(scores.dtype)
        reference = words.pool(marked)[0] > 0  # (B, W)
    unit_batch = batch.replace(ids=torch.zeros_like(exists, dtype=torch.long), mask=exists,
                               segments=None, words=None)
    return replace(inp, batch=unit_batch, scores=scores, reference=reference)


def _ties(inp: MetricInput) -> torch.Tensor:
    """(B, T) the seeded keys that order equal scores (``ranking.tie_keys``)."""
    return tie_keys(inp.batch.example_ids, inp.scores.shape[1], inp.scores.device)


def r_precision(inp: MetricInput, *, granularity: str | None) -> torch.Tensor:
    """(B,) |top-k(scores) ∩ R| / k with k = |R|, R = reference & mask."""
    inp = by_unit("r_precision", inp, granularity)
    reference, k = checked_reference("r_precision", inp)
    top = top_k_mask(inp.scores, inp.batch.mask, k, _ties(inp))  # (B, T)
    hits = (top & reference).sum(dim=1)
    return (hits.double() / k.double()).cpu()


def mean_rank(inp: MetricInput, *, granularity: str | None) -> torch.Tensor:
    """(B,) how deep the score ranking must be read to hold every token of R: the
    1-based place of R's last token in the order (|R| at best, n at worst)."""
    inp = by_unit("mean_rank", inp, granularity)
    reference, _ = checked_reference("mean_rank", inp)
    order = importance_order(inp.scores, inp.batch.mask, _ties(inp))  # (B, T), padding last
    rel = reference.gather(1, order)  # (B, T): True where the i-th ranked token is in R
    place = torch.arange(1, rel.shape[1] + 1, device=rel.device).expand_as(rel)
    return place.masked_fill(~rel, 0).amax(dim=1).double().cpu()


def average_precision(inp: MetricInput, *, granularity: str | None) -> torch.Tensor:
    """(B,) average precision of the score ranking against R = reference & mask."""
    inp = by_unit("average_precision", inp, granularity)
    reference, k = checked_reference("average_precision", inp)
    order = importance_order(inp.scores, inp.batch.mask, _ties(inp))  # (B, T), padding last
    rel = reference.gather(1, order).double()  # (B, T): 1 where the i-th ranked token is in R
    rank = torch.arange(1, rel.shape[1] + 1, dtype=torch.float64, device=rel.device)
    precision = rel.cumsum(dim=1) / rank  # (B, T) P_i
    # padded positions rank last and are never in R, so they add nothing
    return ((precision * rel).sum(dim=1) / k.double()).cpu()


def _rate(inp: MetricInput, k_frac, name: str = "token_f1") -> float | None:
    """ρ for ``token_f1``: ``k_frac`` if set, else the engine's dataset-level rate."""
    if k_frac is not None:
        rate, source = k_frac, "parameter k_frac"
    else:
        rate, source = inp.reference_rate, "MetricInput.reference_rate"
    if rate is None:
        return None
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1:
        raise InputError(f"metric {name}: {source} must be a fraction in (0, 1], got {rate!r}")
    return float(rate)


def token_f1(inp: MetricInput, *, k_frac, granularity: str | None) -> torch.Tensor:
    """(B,) instance F1 of the top ceil(ρ · n) tokens against R; ρ = k_frac, or the
    dataset-level ``inp.reference_rate`` when k_frac is None."""
    hits, k, r = _hard_cut("token_f1", inp, k_frac, granularity)
    # 2PR / (P + R) with P = hits / k, R = hits / |R|; 0 when there is no hit
    return (2 * hits / (k + r)).cpu()


def token_f1_micro(inp: MetricInput, *, k_frac, granularity: str | None) -> MetricOutput:
    """Per-example (|S ∩ R|, |S|, |R|) of the same cut as ``token_f1``, pooled over the
    corpus (``TOKEN_F1_MICRO.spec.aggregation``); values: each example's own F1."""
    hits, k, r = _hard_cut("token_f1_micro", inp, k_frac, granularity)
    return MetricOutput((2 * hits / (k + r)).cpu(), stats=torch.stack([hits, k, r], 1).cpu())


def _hard_cut(name: str, inp: MetricInput, k_frac, granularity: str | None = None):
    """(|S ∩ R|, k, |R|) as (B,) float64, S the top k = ceil(ρ · n) tokens (ERASER's
    hard rationale cut from soft scores at one dataset-level rate)."""
    rate = _rate(inp, k_frac, name)  # checked before the rows, so a bad k_frac fails on any batch
    if granularity == "subword" and k_frac is None and inp.batch.words is not None:
        raise InputError(f"metric {name}[granularity=subword] needs k_frac: the engine's "
                         "rationale rate counts words")
    inp = by_unit(name, inp, granularity)
    reference, r = checked_reference(name, inp)
    mask = inp.batch.mask
    if rate is None:
        if not len(r):
            none = torch.zeros(0, dtype=torch.float64)
            return none, none, none
        raise InputError(
            f"metric {name} needs a rationale rate: set k_frac (e.g. {name}[k_frac=0.2]) or "
            f"give MetricInput.reference_rate; neither given for examples "
            f"{', '.join(inp.batch.example_ids)}"
        )
    n = mask.sum(dim=1)  # (B,)
    k = torch.ceil(n.double() * rate - K_TOLERANCE).long()
    k = torch.minimum(k.clamp(min=1), n)  # (B,) in [1, n]
    hits = (top_k_mask(inp.scores, mask, k, _ties(inp)) & reference).sum(dim=1).double()
    return hits, k.double(), r.double()


def auprc(inp: MetricInput, *, granularity: str | None) -> torch.Tensor:
    """(B,) trapezoidal area under the PR curve with one threshold per distinct score
    (scikit-learn's ``precision_recall_curve`` + ``auc``), R = reference & mask."""
    inp = by_unit("auprc", inp, granularity)
    reference, r = checked_reference("auprc", inp)
    mask = inp.batch.mask
    order = importance_order(inp.scores, mask, _ties(inp))  # (B, T), padding last
    real = mask.gather(1, order)  # (B, T)
    ranked = inp.scores.gather(1, order)  # (B, T) scores in rank order
    tp = reference.gather(1, order).double().cumsum(dim=1)  # (B, T) |S ∩ R| after i tokens
    seen = real.double().cumsum(dim=1)  # (B, T) |S| after i tokens
    # position i closes its tie block if the next ranked token is padding or scores differently
    closes = torch.ones_like(real)
    closes[:, :-1] = ~real[:, 1:] | (ranked[:, 1:] != ranked[:, :-1])
    closes &= real
    # every position takes the counts at the end of its block (ties pooled into one
    # threshold); padding takes the last real point. Repeated points add no area.
    width = order.shape[1]
    position = torch.arange(width, device=order.device).expand_as(order)
    marked = torch.where(closes, position, width).flip(1)
    block_end = marked.cummin(dim=1).values.flip(1)  # (B, T) first closing position ≥ i
    last = (mask.sum(dim=1, keepdim=True) - 1).clamp(min=0)  # (B, 1)
    block_end = torch.where(real, block_end, last)
    tp, seen = tp.gather(1, block_end), seen.gather(1, block_end)
    recall = tp / r.double().unsqueeze(1)  # (B, T)
    precision = tp / seen
    # scikit-learn's extra point (recall 0, precision 1) starts the curve
    recall_before = torch.cat([torch.zeros_like(recall[:, :1]), recall[:, :-1]], dim=1)
    precision_before = torch.cat([torch.ones_like(precision[:, :1]), precision[:, :-1]], dim=1)
    area = (recall - recall_before) * (precision + precision_before) / 2  # (B, T)
    if not width:
        return area.sum(dim=1).cpu()
    # a sequential running sum, read at the end: padding adds exact zeros, so a row gives
    # the same bits alone and in a batch (sum() reduces in a width-dependent order)
    return area.cumsum(dim=1)[:, -1].cpu()


def _spec(name: str, version: str, params: tuple = (), aggregation=None,
          direction: str = "higher", citation: str = CITATION) -> MetricSpec:
    return MetricSpec(
        name=name,
        version=version,
        direction=direction,
        kinds=frozenset({CLASSIFICATION, PAIR_CLASSIFICATION}),
        params=params,
        family="plausibility",
        needs_reference=True,
        citation=citation,
        aggregation=aggregation,
    )


# Each version counts words on a subword model (``by_unit``); the one before counted
# pieces there. token_f1 / auprc: version 1 of these names was the rank-based
# r_precision / average_precision, version 2 counted pieces.
UNIT = (("granularity", None),)
R_PRECISION = SimpleMetric(spec=_spec("r_precision", "3", UNIT), fn=r_precision)
AVERAGE_PRECISION = SimpleMetric(spec=_spec("average_precision", "3", UNIT),
                                 fn=average_precision)
TOKEN_F1 = SimpleMetric(spec=_spec("token_f1", "4", (("k_frac", None), *UNIT)), fn=token_f1)
AUPRC = SimpleMetric(spec=_spec("auprc", "3", UNIT), fn=auprc)
MEAN_RANK = SimpleMetric(spec=_spec("mean_rank", "2", UNIT, direction="lower",
                                    citation=SHORTCUTS_CITATION), fn=mean_rank)
# corpus level: 2 Σ|S ∩ R| / (Σ|S| + Σ|R|), ERASER's "instance_micro" F1
MICRO_F1 = Aggregation(stats=("hits", "selected", "reference"), numerator=(2.0, 0.0, 0.0),
                       denominator=(0.0, 1.0, 1.0))
TOKEN_F1_MICRO = SimpleMetric(
    spec=_spec("token_f1_micro", "3", (("k_frac", None), *UNIT), MICRO_F1), fn=token_f1_micro)
