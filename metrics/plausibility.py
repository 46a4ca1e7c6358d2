"""Plausibility: agreement of the explainer's top tokens with a reference rationale.

Metric card
-----------
Formula. For an example with reference rationale R (the real tokens a human, or the
generator of a synthetic task, marked) and k = |R|, let S be the k most important
tokens by the explainer's scores (``benchmark.core.ranking``; ties broken by
position, earlier first). With |S| = |R| = k, precision, recall and F1 coincide::

    token_f1(x) = |S ∩ R| / k

(ERASER's token-level F1 with the predicted rationale cut to the reference's size,
also called R-precision.) No forward pass is made: this is *not* a faithfulness
metric, and it is ranked in its own family, never mixed with faithfulness.

Direction. Higher is more plausible (more like the reference).

Range. [0, 1]. 1 means the explainer's top |R| tokens are exactly the reference;
0 means none of them is. An example with an empty reference has no defined value
and raises ``EmptyReferenceError`` (a ``ValueError``) naming the example id.

OOD caveat. None of its own (nothing is erased), but plausibility says nothing about
faithfulness: a model can be right for reasons the reference does not mark, and then
a faithful explainer scores low here.

Citation. DeYoung, Jain, Rajani, Lehman, Xiong, Socher & Wallace (2020), "ERASER: A
benchmark to evaluate rationalized NLP models", ACL.

Hand-worked case. Reference {0, 2} (k = 2); scores [0.9, 0.1, 0.5, 0.7] rank
positions 0 and 3 on top: one hit of two, F1 = 0.5. With scores tied everywhere,
positions 0 and 1 come first by position: again 0.5.

>>> import torch
>>> from benchmark.core.api import Batch, MetricInput
>>> ids = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 8]])
>>> batch = Batch(ids, torch.ones(2, 4, dtype=torch.bool), ("a", "b"))
>>> scores = torch.tensor([[0.9, 0.1, 0.5, 0.7], [1.0, 1.0, 1.0, 1.0]])
>>> reference = torch.tensor([[True, False, True, False]] * 2)
>>> inp = MetricInput(batch, scores, torch.tensor([0, 0]), torch.full((2, 2), 0.5), None, reference)
>>> token_f1(inp)
tensor([0.5000, 0.5000], dtype=torch.float64)
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
from benchmark.core.ranking import top_k_mask

CITATION = (
    "DeYoung, Jain, Rajani, Lehman, Xiong, Socher & Wallace (2020). ERASER: A benchmark to "
    "evaluate rationalized NLP models. ACL 2020."
)


class EmptyReferenceError(InputError, ValueError):
    """A row's reference rationale marks no real token, so token F1 is undefined."""


def token_f1(inp: MetricInput) -> torch.Tensor:
    """(B,) |top-k(scores) ∩ R| / k with k = |R|, R = reference & mask."""
    batch = inp.batch
    if inp.reference is None:
        raise EmptyReferenceError(
            f"metric token_f1 needs a reference rationale; none given for examples "
            f"{', '.join(batch.example_ids)}"
        )
    reference = inp.reference.to(torch.bool) & batch.mask  # (B, T)
    k = reference.sum(dim=1)  # (B,)
    empty = (k == 0).nonzero().flatten().tolist()
    if empty:
        ids = ", ".join(batch.example_ids[i] for i in empty)
        raise EmptyReferenceError(f"metric token_f1: empty reference rationale for examples {ids}")
    top = top_k_mask(inp.scores, batch.mask, k)  # (B, T)
    hits = (top & reference).sum(dim=1)
    return (hits.double() / k.double()).cpu()


TOKEN_F1 = SimpleMetric(
    spec=MetricSpec(
        name="token_f1",
        version="1",
        direction="higher",
        kinds=frozenset({CLASSIFICATION, PAIR_CLASSIFICATION}),
        family="plausibility",
        needs_reference=True,
        citation=CITATION,
    ),
    fn=token_f1,
)
