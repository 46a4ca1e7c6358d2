"""Decision flips: does removing the top token flip the prediction, and how much of
the input must go, in importance order, before it does.

Metric card
-----------
Formula. For an example x with n real tokens, let x₍ₖ₎ be x with its k most
important tokens removed (order from ``faithbench.benchmark.core.ranking``; equal scores in a
random order seeded by the example's id) and pred(·) = argmax_c p_c(·) (ties in p go to the lower
class index, as ``torch.argmax``)::

    flip_rate(x)     = 1  if pred(x₍₁₎) ≠ pred(x)  else 0
    flip_fraction(x) = k* / n,  k* = min { k in 1..n : pred(x₍ₖ₎) ≠ pred(x) }

A flip is a change of the model's *decision*, so it is always measured against
pred(x), the argmax of the base probabilities — never against the explained
target. The two coincide in a run (the predicted class is explained); they differ
when ``faithbench score`` is given a ``target`` other than the prediction, and the
target then only decides the explanation's ranking, not what counts as a flip.

Never-flip counting. k runs up to n, i.e. up to the input with every token removed.
An example whose prediction never changes, not even then, gets flip_fraction = 1.0
*and* the flag ``never_flipped`` = True, so the record can count them: 1.0 is the
most an explainer can be charged (all of the input was removed), but it also means
the fraction is censored rather than measured. An example that flips exactly at
k = n also gets 1.0, with ``never_flipped`` = False. The mean of flip_rate over
examples is the share of decisions flipped by the single top token.

Direction. flip_rate: higher is more faithful. flip_fraction: lower is more faithful
(fewer tokens, in the explainer's order, carry the decision).

Range. flip_rate is 0 or 1 per example, its mean in [0, 1]; flip_fraction in (0, 1].
Extremes: flip_fraction = 1/n means the top token alone carried the decision; 1.0
means the decision survived until (nearly) everything was gone.

Parameters. ``eraser`` ("delete", "mask", "pad").

Subword models. k* and n count whole words on a Transformer (``granularity="subword"``
for pieces); see ``faithbench.metrics.variants``.

OOD caveat. Inputs with many tokens removed lie far off the training distribution,
so a flip can come from that shift rather than from the removed evidence; a model
that predicts a fixed class on an empty input never flips examples of that class,
whatever the explainer (hence the ``never_flipped`` count).

Citation. Serrano & Smith (2019), "Is attention interpretable?", ACL. They erase
*attention weights* inside the model (zeroing and renormalising them), not input
tokens, and they leave out examples whose decision never flips. Here tokens are
removed from the input, which applies to every explainer alike, and never-flipped
examples stay in the mean at 1.0 with their count recorded, so an explainer is not
rewarded for examples it cannot flip at all.

Hand-worked case. Voting model p(c) ∝ 1 + (votes for c); token 2 votes class 0,
token 3 class 1. Row a = [3, 2, 3] predicts class 1 (p₁ = 3/5). Scores put position
0 first: removing it leaves [2, 3], a 2/4 tie that argmax gives to class 0 — a flip at
k* = 1, so flip_rate = 1 and flip_fraction = 1/3. Row b = [2, 2, 2, 3] with position
3 first: [2, 2, 2] and [2, 2] stay class 0, [2] too; the empty input is a tie, class 0
again — never flipped, so flip_fraction = 1.0 with the flag set.

>>> import torch
>>> from faithbench.benchmark.core.api import Batch, MetricInput
>>> from faithbench.benchmark.core.perturb import Perturber
>>> from faithbench.testing import Votes  # p(c) ∝ 1 + real tokens voting for c
>>> ids = torch.tensor([[3, 2, 3, 0], [2, 2, 2, 3]])
>>> batch = Batch(ids, ids > 0, ("a", "b"))
>>> perturber = Perturber(Votes())
>>> inp = MetricInput(batch, torch.tensor([[0.9, 0.5, 0.1, 0.0], [0.1, 0.2, 0.3, 0.9]]),
...                   torch.tensor([1, 0]), perturber.probs(batch), perturber)
>>> flip_rate(inp, eraser="delete", segment=None, granularity=None)
tensor([1., 0.], dtype=torch.float64)
>>> values, flags = flip_fraction(inp, eraser="delete", segment=None, granularity=None)
>>> values, flags["never_flipped"]
(tensor([0.3333, 1.0000], dtype=torch.float64), tensor([False,  True]))

The explained target does not move the reference point: explaining the other
class with the same scores gives the same flips.

>>> other = MetricInput(batch, inp.scores, torch.tensor([0, 1]), inp.base_probs, perturber)
>>> flip_rate(other, eraser="delete", segment=None, granularity=None)
tensor([1., 0.], dtype=torch.float64)
"""

from __future__ import annotations

import torch

from faithbench.benchmark.core.api import (
    MetricInput,
    MetricSpec,
    SimpleMetric,
)
from faithbench.metrics.variants import candidates, check_eraser, faithfulness_spec, variant_probs

CITATION = "Serrano & Smith (2019). Is attention interpretable? ACL 2019."


def flip_rate(inp: MetricInput, *, eraser: str, segment: int | None,
              granularity: str | None) -> torch.Tensor:
    """(B,) 1.0 where removing the single most important token changes the argmax."""
    check_eraser("flip_rate", eraser)
    batch = inp.batch
    cand = candidates("flip_rate", inp, segment, granularity)
    k = torch.ones(len(batch), 1, dtype=torch.long, device=batch.mask.device)  # (B, 1)
    keeps = batch.mask.unsqueeze(1) & ~cand.ranked(inp.scores, k)
    pred = variant_probs(inp, keeps, None, eraser).argmax(dim=2).squeeze(1)  # (B,)
    return (pred != base_decision(inp)).double()


def flip_fraction(inp: MetricInput, *, eraser: str, segment: int | None,
                  granularity: str | None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(B,) k*/n for the first k at which the argmax changes; 1.0 and
    ``never_flipped`` where it never does, even with all n tokens removed."""
    check_eraser("flip_fraction", eraser)
    batch = inp.batch
    cand = candidates("flip_fraction", inp, segment, granularity)
    n = cand.n  # (B,) units
    if len(batch) == 0:
        none = torch.zeros(0, dtype=torch.float64)
        return none, {"never_flipped": none.bool()}
    steps = int(n.max())
    k = torch.arange(1, steps + 1, device=n.device).expand(len(batch), steps)  # (B, V)
    valid = k <= n.unsqueeze(1)
    keeps = batch.mask.unsqueeze(1) & ~cand.ranked(inp.scores, k)
    pred = variant_probs(inp, keeps, valid, eraser).argmax(dim=2)  # (B, V)
    flipped = (pred != base_decision(inp).unsqueeze(1)) & valid.cpu()
    ever = flipped.any(dim=1)
    first = flipped.to(torch.int8).argmax(dim=1) + 1  # argmax returns the first True
    values = torch.where(
        ever, first.double() / n.cpu().double(), torch.ones(len(batch), dtype=torch.float64)
    )
    return values, {"never_flipped": ~ever}


def base_decision(inp: MetricInput) -> torch.Tensor:
    """(B,) the model's decision on the unperturbed input: argmax of the base probabilities."""
    return inp.base_probs.detach().cpu().argmax(dim=1)


def _spec(name: str, direction: str) -> MetricSpec:
    # version 2: flips are counted against the prediction, not the explained target;
    # version 3: equal scores in a seeded random order (before: by position)
    return faithfulness_spec(name, direction, (), CITATION, version="3")


FLIP_RATE = SimpleMetric(spec=_spec("flip_rate", "higher"), fn=flip_rate)
FLIP_FRACTION = SimpleMetric(spec=_spec("flip_fraction", "lower"), fn=flip_fraction)
