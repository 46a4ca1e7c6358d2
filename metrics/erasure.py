"""Erasure AOPC: the area over the perturbation curve, MoRF and LeRF.

Metric card
-----------
Formula. For an example x with n real tokens, predicted class ŷ, and x₍ₖ₎ = x with
its k most important tokens (MoRF, most relevant first) or its k least important
tokens (LeRF, least relevant first) removed::

    aopc(x) = 1/K' · Σ_{k=1..K'} ( p_ŷ(x) − p_ŷ(x₍ₖ₎) ),    K' = min(k_max, n)

The k = 0 term is *not* included. Samek et al. write AOPC = 1/(L+1) · Σ_{k=0..L},
whose k = 0 term is always zero; our value is theirs times (L+1)/L with L = K', so
numbers differ from papers that keep the zero term. Tokens are taken in the order of
``faithbench.benchmark.core.ranking`` (equal scores in a random order seeded by the
example's id, so an explainer that ties everything scores as random); k counts tokens
of the whole input (premise and hypothesis together for NLI). An example shorter than
``k_max`` is averaged over its own n steps (the curve ends when every token is gone).

Direction. ``aopc_morf``: higher is more faithful (removing what the explainer calls
important hurts the prediction early). ``aopc_lerf``: lower is more faithful
(removing what it calls unimportant should hardly matter); report it as a contrast.

Range. [−1, 1]. Extremes: aopc_morf ≈ 1 means p_ŷ collapses to 0 as soon as the top
token goes; ≈ 0 means the ranking is no better than irrelevant tokens; negative
means removing the "important" tokens *raises* p_ŷ (they were evidence against ŷ).

Parameters. ``k_max`` (default 10), ``eraser`` ("delete" closes the gap and keeps
the order of the remaining tokens; "mask" substitutes the unknown-word id; "pad"
the padding id).

Subword models. On a Transformer k counts whole words (pieces' scores summed, all
pieces of a word erased together; ``granularity="subword"`` for pieces): see
``faithbench.metrics.variants``.

OOD caveat. Erased inputs may lie off the training distribution (shorter, ungrammatical,
full of unknown words), so a probability drop can come from that shift rather than
from missing evidence. Compare MoRF against LeRF and against a random explainer
before reading a MoRF value as faithfulness; ROAR retrains to control for this.

Citation. Samek, Binder, Montavon, Lapuschkin & Müller (2017), "Evaluating the
visualization of what a deep neural network has learned", IEEE TNNLS 28(11);
Nguyen (2018), "Comparing automatic and human evaluation of local explanations for
text classification", NAACL-HLT.

Hand-worked case. A voting model: p(c) ∝ 1 + (votes for c), token 2 votes class 0,
token 3 votes class 1. x = [2, 2, 3]: p₀(x) = 3/5. MoRF removes position 0, then 1,
then 2: p₀ = 2/4, 1/3, 1/2, so aopc_morf = ((.6−.5) + (.6−1/3) + (.6−.5)) / 3 = 0.1556.
LeRF removes position 2 first: p₀ = 3/4, 2/3, 1/2, so aopc_lerf = (−.15 − .0667 + .1)/3.

>>> import torch
>>> from faithbench.benchmark.core.api import Batch, MetricInput
>>> from faithbench.benchmark.core.perturb import Perturber
>>> from faithbench.testing import Votes  # p(c) ∝ 1 + real tokens voting for c
>>> batch = Batch(torch.tensor([[2, 2, 3]]), torch.ones(1, 3, dtype=torch.bool), ("a",))
>>> perturber = Perturber(Votes())
>>> inp = MetricInput(batch, torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([0]),
...                   perturber.probs(batch), perturber)
>>> round(AOPC_MORF.compute(inp).values.item(), 4)
0.1556
>>> [round(d, 4) for d in AOPC_MORF.compute(inp).curve[0].tolist()]  # k = 1, 2, 3
[0.1, 0.2667, 0.1]
>>> round(AOPC_LERF.compute(inp).values.item(), 4)
-0.0389
"""

from __future__ import annotations

import torch

from faithbench.benchmark.core.api import (
    MetricInput,
    MetricOutput,
    MetricSpec,
    SimpleMetric,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.metrics.variants import (
    candidates,
    check_eraser,
    faithfulness_spec,
    masked_mean,
    target_drops,
    variant_probs,
)

CITATION = (
    "Samek, Binder, Montavon, Lapuschkin & Müller (2017). Evaluating the visualization of "
    "what a deep neural network has learned. IEEE TNNLS 28(11):2660-2673; Nguyen (2018). "
    "Comparing automatic and human evaluation of local explanations for text classification. "
    "NAACL-HLT 2018."
)


def aopc_morf(inp: MetricInput, *, k_max: int, eraser: str, segment: int | None,
              granularity: str | None) -> MetricOutput:
    """(B,) mean drop of p_ŷ over k = 1..min(k_max, n) most important tokens removed
    (and the drop at each k: the curve)."""
    return _aopc(inp, k_max, eraser, segment, granularity, least=False, name="aopc_morf")


def aopc_lerf(inp: MetricInput, *, k_max: int, eraser: str, segment: int | None,
              granularity: str | None) -> MetricOutput:
    """(B,) mean drop of p_ŷ over k = 1..min(k_max, n) least important tokens removed
    (and the drop at each k: the curve)."""
    return _aopc(inp, k_max, eraser, segment, granularity, least=True, name="aopc_lerf")


def _aopc(inp: MetricInput, k_max: int, eraser: str, segment, granularity, *, least: bool,
          name: str):
    if isinstance(k_max, bool) or not isinstance(k_max, int) or k_max < 1:
        raise InputError(f"metric {name}: k_max must be an integer >= 1, got {k_max!r}")
    check_eraser(name, eraser)
    batch = inp.batch
    cand = candidates(name, inp, segment, granularity)
    n = cand.n  # (B,) units
    steps = min(k_max, int(n.max())) if len(batch) else 0
    k = torch.arange(1, steps + 1, device=n.device).expand(len(batch), steps)  # (B, V)
    valid = k <= n.unsqueeze(1)  # step k exists only while k <= n
    keeps = batch.mask.unsqueeze(1) & ~cand.ranked(inp.scores, k, least=least)
    drops = target_drops(inp, variant_probs(inp, keeps, valid, eraser))  # (B, V)
    return MetricOutput(masked_mean(drops, valid).double(),
                        curve=drops.double().masked_fill(~valid, float("nan")))


def _spec(name: str, direction: str) -> MetricSpec:
    # version 2: equal scores in a seeded random order (version 1: by position)
    return faithfulness_spec(name, direction, (("k_max", 10),), CITATION, version="2")


AOPC_MORF = SimpleMetric(spec=_spec("aopc_morf", "higher"), fn=aopc_morf)
AOPC_LERF = SimpleMetric(spec=_spec("aopc_lerf", "lower"), fn=aopc_lerf)
