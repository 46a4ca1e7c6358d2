"""Shared machinery of the faithfulness metrics: keep-masks built from the one
ordering in ``benchmark.core.ranking``, and one trip through the perturbation
engine per metric call.

A metric describes its variants as a (B, V, T) keep tensor (True = keep) plus a
(B, V) ``valid`` mask for examples that need fewer than V variants; only valid
variants are forwarded, all of them in a single ``probs_of_variants`` call, and
the answer comes back as (B, V, C) float64 probabilities, NaN where not valid.
Probabilities are turned to float64 before any difference is taken.
"""

from __future__ import annotations

import torch

from benchmark.core import erasers
from benchmark.core.api import (
    ALIGNMENT,
    CLASSIFICATION,
    PAIR_CLASSIFICATION,
    Batch,
    MetricInput,
    MetricSpec,
)
from benchmark.core.errors import InputError
from benchmark.core.ranking import least_k_mask, top_k_mask


def faithfulness_spec(name: str, direction: str, params: tuple, citation: str,
                      version: str = "1") -> MetricSpec:
    """The spec every erasure-based metric shares: every task kind (on an alignment row
    the source words are erased and the target is the reference next word), and the
    ``eraser`` and ``segment`` options after its own ``params``."""
    return MetricSpec(
        name=name,
        version=version,
        direction=direction,
        kinds=frozenset({CLASSIFICATION, PAIR_CLASSIFICATION, ALIGNMENT}),
        params=(*params, ("eraser", "delete"), ("segment", None)),
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


def candidates(metric: str, inp: MetricInput, segment: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) bool tokens a metric may rank and erase, and (B,) their number n.

    ``segment=None``: every real token (both sentences of a pair). ``segment=s``:
    only tokens with segment id s (0 = premise, 1 = hypothesis for NLI); the other
    sentence is always kept whole.
    """
    batch = inp.batch
    eligible = batch.mask
    if segment is not None:
        if batch.segments is None:
            raise InputError(f"metric {metric}: segment={segment!r} needs a batch with segments")
        eligible = batch.mask & (batch.segments == segment)
    return eligible, real_lengths(metric, batch.replace(mask=eligible))


def ranked_mask(scores: torch.Tensor, mask: torch.Tensor, k: torch.Tensor, *, least: bool = False):
    """(B, V, T) bool: for each (b, v), the k[b, v] most (or least) important real tokens.

    scores, mask: (B, T); k: (B, V) long. Every variant uses ``benchmark.core.ranking``
    on its row, so ties are broken by position exactly as everywhere else.
    """
    b, v = k.shape
    t = scores.shape[1]
    flat_scores = scores.unsqueeze(1).expand(b, v, t).reshape(b * v, t)
    flat_mask = mask.unsqueeze(1).expand(b, v, t).reshape(b * v, t)
    pick = least_k_mask if least else top_k_mask
    return pick(flat_scores, flat_mask, k.reshape(-1)).reshape(b, v, t)


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


def masked_mean(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(B,) mean of values (B, V) over the valid entries of each row (NaNs elsewhere ignored)."""
    valid = valid.cpu()
    total = torch.where(valid, values, torch.zeros_like(values)).sum(dim=1)
    return total / valid.sum(dim=1).to(values.dtype)


class Votes:
    """The hand-worked model of the metric cards: token 2 votes for class 0, token 3
    for class 1, and p(c) ∝ 1 + (votes for c), so every probability is a small fraction.

    >>> batch = Batch(torch.tensor([[2, 2, 3]]), torch.ones(1, 3, dtype=torch.bool), ("a",))
    >>> torch.softmax(Votes().logits(batch), -1).tolist()  # 3/5, 2/5
    [[0.6000000238418579, 0.4000000059604645]]
    """

    pad_id, mask_id, baseline_id = 0, 1, 0

    def logits(self, batch: Batch) -> torch.Tensor:
        votes = [((batch.ids == 2 + c) & batch.mask).sum(1) for c in (0, 1)]
        return torch.log1p(torch.stack(votes, 1).float())
