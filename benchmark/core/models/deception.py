"""Deceptive attention (Pruthi, Gupta, Dhingra, Neubig & Lipton, ACL 2020, "Learning to
Deceive with Attention-Based Explanations"): a model trained with a penalty on the
attention it pays to "impermissible" tokens keeps relying on them while its attention
looks away.

The penalty of one attention distribution α with impermissible tokens I is
R = −log(1 − Σ_{i∈I} α_i), added to the cross-entropy with weight λ and averaged over
the batch (a distribution without impermissible tokens adds 0). This follows the
authors' code (danishpruthi/deceptive-attention): ``calc_hammer_loss`` for the
embedding and BiLSTM models, one attention per example; for BERT,
``attention_regularization_loss`` with ``att_opt_func mean``, the [CLS] query row of
the last layer in every head, R averaged over heads and batch. Where a model has
several distributions per example (the NLI BiLSTM attends over the premise and the
hypothesis separately), each pays its own R and they add up.
"""

from __future__ import annotations

import torch

# 1 − mass is kept at least this far from 0: an example made only of impermissible
# tokens has mass 1 and an infinite penalty (the authors' code has no such guard; none
# of their examples is all impermissible)
FLOOR = 1e-6


def penalty(mass: torch.Tensor) -> torch.Tensor:
    """−log(1 − mass), elementwise.

    >>> round(float(penalty(torch.tensor(0.5))), 4), float(penalty(torch.tensor(0.0)))
    (0.6931, -0.0)
    """
    return -torch.log((1 - mass).clamp(min=FLOOR))


def group_mass(weights: torch.Tensor, impermissible: torch.Tensor,
               groups: torch.Tensor | None = None, n_groups: int = 1) -> torch.Tensor:
    """(B, G) the attention mass on impermissible tokens of each of the G distributions
    in a (B, T) row of weights (``groups``: each position's distribution, default one).

    >>> w = torch.tensor([[0.5, 0.5, 0.2, 0.8]])
    >>> group_mass(w, torch.tensor([[True, False, False, True]]), torch.tensor([[0, 0, 1, 1]]),
    ...            2).tolist()
    [[0.5, 0.800000011920929]]
    """
    on = weights * impermissible.to(weights.dtype)
    if groups is None:
        return on.sum(dim=1, keepdim=True)
    return torch.zeros(weights.shape[0], n_groups, dtype=weights.dtype,
                       device=weights.device).scatter_add(1, groups, on)


def hammer(weights: torch.Tensor, impermissible: torch.Tensor,
           groups: torch.Tensor | None = None, n_groups: int = 1) -> torch.Tensor:
    """(B,) Σ over an example's distributions of −log(1 − their impermissible mass)."""
    return penalty(group_mass(weights, impermissible, groups, n_groups)).sum(dim=1)


def require(batch) -> torch.Tensor:
    """The batch's impermissible mask; a deceptive model trains only on batches that
    carry one."""
    if batch.impermissible is None:
        raise ValueError("deceptive training needs batches that mark the impermissible "
                         "tokens (Batch.impermissible); the task must define them")
    return batch.impermissible
