"""Rank agreement of an explanation with leave-one-out erasure (ferret's ``taucorr_loo``).

Metric card
-----------
Formula. For an example x with n units (tokens, or whole words on a subword model) and
predicted class ŷ, the leave-one-out importance of unit u is the drop it causes::

    loo_u = p_ŷ(x) − p_ŷ(x ∖ u)
    taucorr_loo(x) = Kendall τ-b( (loo_1 … loo_n), (s_1 … s_n) )

where s_u is the explainer's score of u (on words, the sum of its pieces' scores).
τ-b (scipy's ``kendalltau``) corrects for ties on either side.

Direction. Higher is more faithful: the explanation orders units as deleting each one
alone does. Occlusion under the same eraser is LOO itself and scores 1.

Range. [−1, 1]. Undefined (NaN, left out of the mean and counted) when n < 2 or either
vector is constant.

Parameters. ``eraser`` ("delete" default; ferret's preset "retokenize"), ``segment``,
``granularity`` (word by default on subword models; ferret's preset "subword").

OOD caveat. Each x ∖ u is one token short of x, the mildest erasure there is, but a
drop can still come from an ungrammatical input rather than lost evidence.

Citation. Attanasio, Pastor, Di Bonaventura & Nozza (2023), "ferret: a Framework for
Benchmarking Explainers on Transformers", EACL demos; leave-one-out as in Li, Monroe &
Jurafsky (2016), "Understanding neural networks through representation erasure".

Hand-worked case. Voting model p(c) ∝ 1 + (votes for c); token 2 votes class 0, token 3
class 1. x = [2, 3, 2], p₀(x) = 3/5. Deleting position 0 or 2 gives p₀ = 2/4 (drop 0.1);
deleting position 1 gives 3/4 (drop −0.15). Scores (0.9, 0.1, 0.5) order the units as
the drops do except for the tie, so τ-b = 2/√6 ≈ 0.8165.

>>> import torch
>>> from faithbench.benchmark.core.api import Batch, MetricInput
>>> from faithbench.benchmark.core.perturb import Perturber
>>> from faithbench.testing import Votes
>>> batch = Batch(torch.tensor([[2, 3, 2]]), torch.ones(1, 3, dtype=torch.bool), ("a",))
>>> perturber = Perturber(Votes())
>>> inp = MetricInput(batch, torch.tensor([[0.9, 0.1, 0.5]]), torch.tensor([0]),
...                   perturber.probs(batch), perturber)
>>> round(taucorr_loo(inp, eraser="delete", segment=None, granularity=None).item(), 4)
0.8165
"""

from __future__ import annotations

import numpy as np
import torch

from faithbench.benchmark.core.api import (
    CLASSIFICATION,
    PAIR_CLASSIFICATION,
    MetricInput,
    SimpleMetric,
)
from faithbench.metrics.variants import (
    candidates,
    check_eraser,
    faithfulness_spec,
    target_drops,
    variant_probs,
)

CITATION = ("Attanasio, Pastor, Di Bonaventura & Nozza (2023). ferret: a Framework for "
            "Benchmarking Explainers on Transformers. EACL 2023 (System Demonstrations).")


def taucorr_loo(inp: MetricInput, *, eraser: str, segment: int | None,
                granularity: str | None) -> torch.Tensor:
    """(B,) Kendall τ-b between the units' scores and their leave-one-out drops."""
    from scipy.stats import kendalltau  # imported here: 0.7 s a command without it skips

    check_eraser("taucorr_loo", eraser)
    cand = candidates("taucorr_loo", inp, segment, granularity)
    masks, exists = cand.units()  # (B, W, T), (B, W)
    keeps = inp.batch.mask.unsqueeze(1) & ~masks
    drops = target_drops(inp, variant_probs(inp, keeps, exists, eraser)).numpy()  # (B, W)
    scores = cand.unit_scores(inp.scores).detach().double().cpu().numpy()
    out = []
    for row, have in enumerate(exists.cpu().numpy()):
        a, b = drops[row, have], scores[row, have]
        defined = len(a) >= 2 and np.ptp(a) > 0 and np.ptp(b) > 0
        out.append(kendalltau(a, b)[0] if defined else float("nan"))
    return torch.tensor(out, dtype=torch.float64)


TAUCORR_LOO = SimpleMetric(
    spec=faithfulness_spec("taucorr_loo", "higher", (), CITATION,
                           kinds=frozenset({CLASSIFICATION, PAIR_CLASSIFICATION})),
    fn=taucorr_loo,
)
