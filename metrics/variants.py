"""Shared machinery of the faithfulness metrics: keep-masks built from the one
ordering in ``faithbench.benchmark.core.ranking`` (equal scores in a random order
seeded by the example's id), and one trip through the perturbation
engine per metric call.

A metric describes its variants as a (B, V, T) keep tensor (True = keep) plus a
(B, V) ``valid`` mask for examples that need fewer than V variants; only valid
variants are forwarded, all of them in a single ``probs_of_variants`` call, and
the answer comes back as (B, V, C) float64 probabilities, NaN where not valid.
Probabilities are turned to float64 before any difference is taken.

Units on subword models (``Candidates``). On a Transformer the tokens are the model's
subword pieces, and every metric here counts, ranks and erases *words* by default: a
word's score is the sum of its pieces' scores, words are ranked, and all pieces of a
word go together (special tokens are never part of the input a metric sees). Half a
word left behind is a fragment the model never saw in training, and its remaining
pieces still name the word. ``granularity="subword"`` ranks and erases pieces
instead (ferret's convention).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from faithbench.benchmark.core import erasers
from faithbench.benchmark.core.api import (
    ALIGNMENT,
    CLASSIFICATION,
    GENERATION,
    PAIR_CLASSIFICATION,
    Batch,
    MetricInput,
    MetricSpec,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.ranking import least_k_mask, tie_keys, top_k_mask

GRANULARITIES = (None, "word", "subword")


def faithfulness_spec(name: str, direction: str, params: tuple, citation: str,
                      version: str = "1", kinds: frozenset | None = None) -> MetricSpec:
    """The spec every erasure-based metric shares: every task kind (on an alignment row
    the source words are erased and the target is the reference next word; on a
    generation row the prompt and earlier tokens, the target being the next token, in
    log-probability), and the ``eraser``, ``segment`` and ``granularity`` options after
    its own ``params``."""
    return MetricSpec(
        name=name,
        version=version,
        direction=direction,
        kinds=kinds or frozenset({CLASSIFICATION, PAIR_CLASSIFICATION, ALIGNMENT, GENERATION}),
        params=(*params, ("eraser", "delete"), ("segment", None), ("granularity", None)),
        citation=citation,
    )


class EmptyExampleError(InputError, ValueError):
    """An example has no real token, so no erasure curve is defined for it."""


def check_eraser(metric: str, eraser: str) -> None:
    erasers.check_eraser(eraser, f"metric {metric}: ")


def real_lengths(metric: str, batch: Batch) -> torch.Tensor:
    """(B,) long number of real tokens; an empty row is an error naming its example id."""
    n = batch.mask.sum(dim=1)
    empty = (n == 0).nonzero().flatten().tolist()
    if empty:
        ids = ", ".join(batch.example_ids[i] for i in empty)
        raise EmptyExampleError(f"metric {metric}: examples with no real token: {ids}")
    return n


@dataclass(frozen=True)
class Candidates:
    """What a metric may rank and erase in each row: ``eligible`` (B, T) positions, and
    the units they form. A unit is a token, or on a subword model (``batch.words``) a
    whole word: its pieces are ranked by the sum of their scores and erased together
    (``granularity="subword"`` ranks pieces). ``n`` (B,) counts units; ``ties`` (B, T)
    orders equal scores (``ranking.tie_keys``, unit w takes key w)."""

    eligible: torch.Tensor
    n: torch.Tensor
    ties: torch.Tensor | None  # None: only for pooling (``pool``), never for ranking
    words: torch.Tensor | None = None  # (B, T) unit of each position; None: the position

    def ranked(self, scores: torch.Tensor, k: torch.Tensor, *, least: bool = False,
               positive_only: bool = False, ties: str | None = None) -> torch.Tensor:
        """(B, V, T) positions of the k[b, v] most (or least) important units;
        ``positive_only``: of those, only units scored above 0 (ferret's rationale);
        ``ties``: None orders equal scores by the example's seeded keys; "stable",
        "introsort" or "numpy" take ferret's ``argsort()[-k:][::-1]`` with that sort
        (``argsort_top_k``; most important only)."""
        if ties not in TIES:
            raise InputError(f"unknown ties {ties!r}; leave it out (a random order seeded "
                             f"by the example) or choose one of {', '.join(TIES[1:])}")
        if self.words is None:
            unit_scores, unit_mask = scores, self.eligible
        else:
            unit_scores, unit_mask = self.pool(scores)
        if ties is not None:
            chosen = argsort_top_k(unit_scores, unit_mask, k, ties)
        else:
            chosen = ranked_mask(unit_scores, unit_mask, k, self.unit_ties(unit_scores),
                                 least=least)
        if positive_only:
            chosen = chosen & (unit_scores > 0).unsqueeze(1)
        return chosen if self.words is None else self.expand(chosen)

    def unit_ties(self, unit_scores: torch.Tensor) -> torch.Tensor:
        """(B, W) the tie keys of the units of ``unit_scores`` (B, W)."""
        assert self.ties is not None, "Candidates built for pooling cannot rank"
        return self.ties[:, : unit_scores.shape[1]].to(unit_scores.device)

    def unit_scores(self, scores: torch.Tensor) -> torch.Tensor:
        """(B, W) the score of each unit, in the order of ``units()``."""
        return scores if self.words is None else self.pool(scores)[0]

    def pool(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, W) unit scores (sums over their eligible pieces) and (B, W) which exist."""
        width = int(self.words.max()) + 1 if self.words.numel() else 1
        index = torch.where(self.eligible, self.words, 0)
        pooled = torch.zeros(scores.shape[0], width, dtype=scores.dtype, device=scores.device)
        pooled.scatter_add_(1, index, torch.where(self.eligible, scores, 0))
        exists = torch.zeros(pooled.shape, dtype=torch.long, device=scores.device)
        exists = exists.scatter_add_(1, index, self.eligible.long()) > 0
        return pooled, exists

    def expand(self, chosen: torch.Tensor) -> torch.Tensor:
        """(B, V, W) chosen units -> (B, V, T) their eligible positions."""
        index = torch.where(self.eligible, self.words, 0).unsqueeze(1).expand(
            -1, chosen.shape[1], -1)
        return chosen.gather(2, index) & self.eligible.unsqueeze(1)

    def units(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, W, T) one mask per unit (in unit order) and (B, W) which units exist."""
        if self.words is None:
            b, t = self.eligible.shape
            eye = torch.eye(t, dtype=torch.bool, device=self.eligible.device)
            return eye.unsqueeze(0).expand(b, t, t) & self.eligible.unsqueeze(1), self.eligible
        width = int(self.words.max()) + 1 if self.words.numel() else 1
        ids = torch.arange(width, device=self.words.device).view(1, -1, 1)
        masks = (self.words.unsqueeze(1) == ids) & self.eligible.unsqueeze(1)
        return masks, masks.any(dim=2)


# How equal scores are ordered: None by keys seeded with the example's id (a random order,
# as everywhere else: ``faithbench.benchmark.core.ranking``);
# the others are ferret's ``np.array(scores).argsort()[-k:][::-1]`` (ferret-xai 0.4.2,
# ``_get_id_tokens_top_k``), whose order among equal scores is the sort's:
#   stable     a stable argsort: equal scores end up later position first. Machine-free.
#   introsort  numpy's own default argsort (``aquicksort``, npysort/quicksort.cpp),
#              re-implemented below: stable up to 16 units, median-of-3 partitions above.
#              Machine-free; it is what numpy runs where it has no SIMD argsort.
#   numpy      this process's ``np.argsort``: depends on numpy's version and the CPU
#              (x86-simd-sort on AVX-512, and on AVX2 from numpy 2), so use it only to
#              match a ferret run on the same machine (docs/results/ferret.md).
TIES = (None, "stable", "introsort", "numpy")
SMALL_QUICKSORT = 15  # numpy: partitions of at most 16 elements go to insertion sort


def argsort_top_k(scores: torch.Tensor, mask: torch.Tensor, k: torch.Tensor,
                  ties: str) -> torch.Tensor:
    """(B, V, T) the k[b, v] first units of each row in the ascending argsort of its
    real units' scores (float64), reversed, sorted as ``ties`` says (see ``TIES``).

    Ties at 2.0 and at 1.0: stable puts the later of two equal scores first.

    >>> s, m = torch.tensor([[2.0, 1.0, 2.0, 1.0]]), torch.ones(1, 4, dtype=torch.bool)
    >>> argsort_top_k(s, m, torch.tensor([[1, 3]]), "stable").int().tolist()
    [[[0, 0, 1, 0], [1, 0, 1, 1]]]
    """
    rank = torch.full(mask.shape, mask.shape[1], dtype=torch.long)
    for row in range(mask.shape[0]):
        where = mask[row].nonzero().flatten()
        values = scores[row, where].detach().double().cpu().numpy()
        if ties == "introsort":
            order = introsort_argsort(values.tolist())
        else:
            order = np.argsort(values, kind="stable" if ties == "stable" else None)
        order = torch.as_tensor(np.asarray(order, dtype=np.int64)[::-1].copy())
        rank[row, where[order]] = torch.arange(len(where))
    return (rank.unsqueeze(1) < k.cpu().unsqueeze(2)) & mask.cpu().unsqueeze(1)


def _less(a: float, b: float) -> bool:
    return a < b or (math.isnan(b) and not math.isnan(a))  # numpy: NaN after every number


def introsort_argsort(v: list[float]) -> list[int]:
    """numpy's ascending ``argsort(kind="quicksort")`` in its portable C version
    (``aquicksort_``): median-of-3 quicksort on partitions of more than 16 elements,
    the larger side deferred, insertion sort below, heapsort past depth 2·floor(log2 n).
    Equal to numpy 1.26.4's and 2.4.6's argsort run without SIMD on 4,518 arrays with
    ties of 2 to 4,096 elements (heapsort reached in 77 partitions).

    >>> introsort_argsort([1.0, 0.0, 1.0, 0.0])  # up to 16 elements: stable
    [1, 3, 0, 2]
    """
    a = list(range(len(v)))
    stack: list[tuple[int, int, int]] = []
    pl, pr, depth = 0, len(v) - 1, 2 * max(len(v).bit_length() - 1, 0)
    while True:
        if depth < 0:
            _heapsort(v, a, pl, pr - pl + 1)
        else:
            while pr - pl > SMALL_QUICKSORT:
                pm = pl + ((pr - pl) >> 1)
                for x, y in ((pm, pl), (pr, pm), (pm, pl)):  # median of three
                    if _less(v[a[x]], v[a[y]]):
                        a[x], a[y] = a[y], a[x]
                pivot, pi, pj = v[a[pm]], pl, pr - 1
                a[pm], a[pj] = a[pj], a[pm]
                while True:
                    pi += 1
                    while _less(v[a[pi]], pivot):
                        pi += 1
                    pj -= 1
                    while _less(pivot, v[a[pj]]):
                        pj -= 1
                    if pi >= pj:
                        break
                    a[pi], a[pj] = a[pj], a[pi]
                a[pi], a[pr - 1] = a[pr - 1], a[pi]
                depth -= 1
                if pi - pl < pr - pi:
                    stack.append((pi + 1, pr, depth))
                    pr = pi - 1
                else:
                    stack.append((pl, pi - 1, depth))
                    pl = pi + 1
            for pi in range(pl + 1, pr + 1):  # insertion sort
                vi, pj = a[pi], pi
                while pj > pl and _less(v[vi], v[a[pj - 1]]):
                    a[pj] = a[pj - 1]
                    pj -= 1
                a[pj] = vi
        if not stack:
            return a
        pl, pr, depth = stack.pop()


def _heapsort(v: list[float], a: list[int], start: int, n: int) -> None:
    """numpy's ``aheapsort_`` on a[start:start + n], in place (heap indices from 1)."""
    h = a[start:start + n]

    def sift(tmp: int, i: int, size: int) -> None:
        j = 2 * i
        while j <= size:
            if j < size and _less(v[h[j - 1]], v[h[j]]):
                j += 1
            if not _less(v[tmp], v[h[j - 1]]):
                break
            h[i - 1] = h[j - 1]
            i, j = j, 2 * j
        h[i - 1] = tmp

    for top in range(n >> 1, 0, -1):
        sift(h[top - 1], top, n)
    for size in range(n - 1, 0, -1):
        tmp = h[size]
        h[size] = h[0]
        sift(tmp, 1, size)
    a[start:start + n] = h


def candidates(metric: str, inp: MetricInput, segment: int | None,
               granularity: str | None = None) -> Candidates:
    """The positions and units a metric may rank and erase (``Candidates``).

    ``segment=None``: every real token (both sentences of a pair). ``segment=s``:
    only tokens with segment id s (0 = premise, 1 = hypothesis for NLI); the other
    sentence is always kept whole. ``granularity``: None or "word" = whole words
    where the batch has ``words``; "subword" = each piece on its own.
    """
    if granularity not in GRANULARITIES:
        raise InputError(f"metric {metric}: unknown granularity {granularity!r}; choose "
                         "word (default) or subword")
    batch = inp.batch
    eligible = batch.mask
    if segment is not None:
        if batch.segments is None:
            raise InputError(f"metric {metric}: segment={segment!r} needs a batch with segments")
        eligible = batch.mask & (batch.segments == segment)
    real_lengths(metric, batch.replace(mask=eligible))  # an empty row is an error
    ties = tie_keys(batch.example_ids, eligible.shape[1], eligible.device)
    if batch.words is None or granularity == "subword":
        return Candidates(eligible, eligible.sum(dim=1), ties)
    words = torch.where(eligible, batch.words, -1)  # distinct eligible words per row
    n = torch.tensor([len(set(row.tolist()) - {-1}) for row in words], dtype=torch.long)
    return Candidates(eligible, n.to(eligible.device), ties, batch.words)


def ranked_mask(scores: torch.Tensor, mask: torch.Tensor, k: torch.Tensor, ties: torch.Tensor,
                *, least: bool = False):
    """(B, V, T) bool: for each (b, v), the k[b, v] most (or least) important real tokens.

    scores, mask, ties: (B, T); k: (B, V) long. Every variant uses
    ``faithbench.benchmark.core.ranking`` on its row, so equal scores are ordered by the
    same seeded keys as everywhere else.
    """
    b, v = k.shape
    t = scores.shape[1]

    def flat(x):
        return x.unsqueeze(1).expand(b, v, t).reshape(b * v, t)

    pick = least_k_mask if least else top_k_mask
    return pick(flat(scores), flat(mask), k.reshape(-1), flat(ties[:, :t])).reshape(b, v, t)


def variant_probs(
    inp: MetricInput, keeps: torch.Tensor, valid: torch.Tensor | None, eraser: str
) -> torch.Tensor:
    """(B, V, C) float64 p(·|variant) for keeps (B, V, T); NaN where ``valid`` (B, V) is False.

    The only forward pass a metric makes: one ``probs_of_variants`` call over every
    valid variant of every example (the engine chunks the rows itself).
    """
    b, v, _ = keeps.shape
    c = inp.base_probs.shape[1]
    if valid is None:
        valid = torch.ones(b, v, dtype=torch.bool, device=keeps.device)
    out = torch.full((b, v, c), float("nan"), dtype=torch.float64)
    rows, cols = valid.nonzero(as_tuple=True)
    if rows.numel():
        probs = inp.perturber.probs_of_variants(inp.batch, rows, keeps[rows, cols], eraser)
        out[rows.cpu(), cols.cpu()] = probs.detach().to("cpu", torch.float64)
    return out


def of_target(probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(B, V) probability of class target[b] from probs (B, V, C)."""
    b, v, _ = probs.shape
    idx = target.to(torch.long).cpu().view(b, 1, 1).expand(b, v, 1)
    return probs.gather(2, idx).squeeze(2)


def base_target_prob(inp: MetricInput) -> torch.Tensor:
    """(B,) float64 p_ŷ(x) from the engine's base probabilities."""
    base = inp.base_probs.detach().to("cpu", torch.float64)
    return of_target(base.unsqueeze(1), inp.target).squeeze(1)


def target_drops(inp: MetricInput, probs: torch.Tensor) -> torch.Tensor:
    """(B, V) float64 how much each variant lowers the target's score: p(x) − p(variant),
    or on a generation row (``inp.log_target``) log p(x) − log p(variant), each
    probability held at least ``TINY`` (a variant the model gives probability 0 in
    float32 counts as log ``TINY`` ≈ −87.3, not −∞).

    >>> from dataclasses import replace
    >>> from faithbench.testing import Votes
    >>> from faithbench.benchmark.core.perturb import Perturber
    >>> b = Batch(torch.tensor([[2, 3]]), torch.ones(1, 2, dtype=torch.bool), ("a",))
    >>> inp = MetricInput(b, torch.zeros(1, 2), torch.tensor([0]),
    ...                   torch.tensor([[0.5, 0.5]]), Perturber(Votes()))
    >>> p = torch.tensor([[[0.25, 0.75]]])
    >>> target_drops(inp, p).tolist(), round(target_drops(replace(inp, log_target=True), p).item(), 4)
    ([[0.25]], 0.6931)
    """
    p = of_target(probs, inp.target).to(torch.float64)
    base = base_target_prob(inp).unsqueeze(1)
    if not inp.log_target:
        return base - p
    return torch.log(base.clamp(min=TINY)) - torch.log(p.clamp(min=TINY))


TINY = float(torch.finfo(torch.float32).tiny)


def masked_mean(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(B,) mean of values (B, V) over the valid entries of each row (NaNs elsewhere ignored)."""
    valid = valid.cpu()
    total = torch.where(valid, values, torch.zeros_like(values)).sum(dim=1)
    return total / valid.sum(dim=1).to(values.dtype)
