"""Where an explainer's top-k tokens sit in a sentence pair.

Metric card
-----------
Formula. For a pair x = premise ⊕ hypothesis with n real tokens, and each bin b,
the top-k_b tokens of the explanation (k_b = ceil(b · n), as in
comprehensiveness) are split by segment::

    segment_share(x) = 1/|bins| · Σ_b |top-k_b ∩ segment s| / k_b

with s = 0 (the premise) by default; the hypothesis share is one minus it. On a
subword model n, k_b and the shares count words (a word's score is the sum of its
pieces', as in ``faithbench.metrics.variants``); ``granularity="subword"`` counts pieces, as
version 1 did there.

Direction. None: descriptive, not a faithfulness score (family "descriptive").
It tells how an explainer divides importance between the sentences — e.g.
whether attention, which weights each sentence separately, puts its mass on the
hypothesis, as hypothesis-only baselines (Gururangan et al. 2018) suggest the
model may. Range [0, 1]; 1 = the top tokens are all in segment s. No forward
passes, so no out-of-distribution caveat.

Hand-worked case. Premise [a, b], hypothesis [c, d], scores ranking c, a, d, b;
bins (0.25, 0.5): k = 1 picks c (premise share 0), k = 2 picks c, a (share 1/2),
so segment_share = 0.25.

>>> import torch
>>> from faithbench.benchmark.core.api import Batch, MetricInput
>>> batch = Batch(torch.tensor([[2, 3, 4, 5]]), torch.ones(1, 4, dtype=torch.bool), ("x",),
...               segments=torch.tensor([[0, 0, 1, 1]]))
>>> inp = MetricInput(batch, torch.tensor([[0.4, 0.1, 0.9, 0.2]]), torch.tensor([1]),
...                   torch.tensor([[0.5, 0.5]]), None)
>>> segment_share(inp, bins=(0.25, 0.5), rounding="ceil", segment=0,
...               granularity=None).item()
0.25
"""

from __future__ import annotations

import torch

from faithbench.benchmark.core.api import PAIR_CLASSIFICATION, MetricInput, MetricSpec, SimpleMetric
from faithbench.benchmark.core.errors import InputError
from faithbench.metrics.rationale import bin_sizes
from faithbench.metrics.variants import candidates, ranked_mask


def segment_share(inp: MetricInput, *, bins, rounding: str, segment: int,
                  granularity: str | None) -> torch.Tensor:
    """(B,) mean over bins of the share of the top-k_b units (words on a subword model,
    else tokens) that lie in ``segment``."""
    batch = inp.batch
    if batch.segments is None:
        raise InputError("metric segment_share needs a batch with segments")
    units = candidates("segment_share", inp, None, granularity)
    k = bin_sizes(units.n, bins, rounding)  # (B, V)
    scores, exists = units.pool(inp.scores) if units.words is not None else (
        inp.scores, batch.mask)  # (B, W)
    inside = (batch.segments == segment) & batch.mask
    if units.words is not None:  # a word lies in the segment of its pieces
        inside = units.pool(inside.to(scores.dtype))[0] > 0
    top = ranked_mask(scores, exists, k, units.unit_ties(scores))  # (B, V, W)
    count = (top & inside.unsqueeze(1)).sum(dim=2)  # (B, V)
    return (count.double() / k.double()).mean(dim=1)


SEGMENT_SHARE = SimpleMetric(
    spec=MetricSpec(
        name="segment_share",
        version="3",  # 3: ties in a seeded random order; 2: words on a subword model
        direction="none",
        kinds=frozenset({PAIR_CLASSIFICATION}),
        params=(("bins", (0.01, 0.05, 0.1, 0.2, 0.5)), ("rounding", "ceil"), ("segment", 0),
                ("granularity", None)),
        family="descriptive",
        citation="faithbench; bins as in DeYoung et al. (2020), ERASER",
    ),
    fn=segment_share,
)
