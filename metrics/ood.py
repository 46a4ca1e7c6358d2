"""How far masked inputs sit from a model's training distribution, on its hidden
representation (the input of its output layer): a Mahalanobis detector (Lee et al.
2018: class means, one shared covariance) fitted on clean held-out examples, and the
AUROC of its distances, clean test examples against masked ones. 0.5: the model
cannot tell masked inputs from clean ones; 1.0: every masked input lies farther out
than every clean one, so an erasure metric on that model measures the shift too.

The detector is always fitted on clean inputs. For a model trained on clean data
(the original ROAR model) that is its training distribution, so the AUROC measures how
far masked inputs fall off it. A ROAR-retrained model was trained on masked data and
never saw clean inputs: there the same AUROC (``auroc_retrained``) measures how
differently the model represents clean and masked inputs, measured from the clean
cloud, not whether masked inputs are out of its own training distribution.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

RIDGE = 1e-6  # times the mean variance: keeps the shared covariance invertible


def output_layer(model: torch.nn.Module) -> torch.nn.Linear:
    """The model's last linear layer, which the task models register last: ``out`` of
    the classifier, the final layer of the NLI model's MLP."""
    return [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]


@torch.no_grad()
def forward_states(model: torch.nn.Module, batches: Iterable) -> tuple[np.ndarray, np.ndarray]:
    """(E, C) class probabilities and (E, H) input of the output layer of every
    example, eval mode, from one forward pass of each batch (a ROAR point needs both of
    the same masked inputs)."""
    probs, captured = [], []
    layer = output_layer(model)
    hook = layer.register_forward_pre_hook(lambda _, args: captured.append(args[0].detach().cpu()))
    try:
        model.eval()
        for batch in batches:
            probs.append(torch.softmax(model.logits(batch), -1))
    finally:
        hook.remove()
    if not probs:
        return np.empty((0, 0)), np.empty((0, 0))
    return torch.cat(probs).double().numpy(), torch.cat(captured).double().numpy()


def hidden_states(model: torch.nn.Module, batches: Iterable) -> np.ndarray:
    """(E, H) input of the output layer for every example, eval mode."""
    return forward_states(model, batches)[1]


@dataclass(frozen=True)
class Mahalanobis:
    """Class means and the inverse of the shared (pooled, ridge-regularised) covariance."""

    means: np.ndarray  # (C, H)
    precision: np.ndarray  # (H, H)

    @classmethod
    def fit(cls, states: np.ndarray, labels: np.ndarray) -> Mahalanobis:
        classes = np.unique(labels)
        means = np.stack([states[labels == c].mean(axis=0) for c in classes])
        centred = states - means[np.searchsorted(classes, labels)]
        cov = centred.T @ centred / len(states)
        cov += RIDGE * max(float(np.trace(cov)) / len(cov), 1e-12) * np.eye(len(cov))
        return cls(means, np.linalg.inv(cov))

    def distance(self, states: np.ndarray) -> np.ndarray:
        """(E,) squared distance to the nearest class mean."""
        diff = states[:, None, :] - self.means[None, :, :]  # (E, C, H)
        return np.einsum("ech,hk,eck->ec", diff, self.precision, diff).min(axis=1)


def auroc(negatives: np.ndarray, positives: np.ndarray) -> float:
    """P(positive > negative) + P(tie) / 2 (Mann-Whitney), by ranks.

    >>> auroc(np.array([0.1, 0.2]), np.array([0.3, 0.2]))
    0.875
    """
    values = np.concatenate([negatives, positives])
    order = values.argsort(kind="mergesort")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    for v in np.unique(values):  # mid-ranks for ties
        tied = values == v
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    n_pos, n_neg = len(positives), len(negatives)
    u = ranks[n_neg:].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))
