"""Test models and plugin checks for explainer authors and for faithbench's own tests
(as ``captum.testing``): models whose answers are known by hand, a small seeded
classifier and batch, and the plugin checks ``faithbench validate`` runs, callable
from a plugin's own test suite without a trained task model.

>>> import torch
>>> from faithbench.testing import Votes, check_explainer, three_row_batch, tiny_classifier
>>> batch, target = three_row_batch()
>>> torch.softmax(Votes().logits(batch), -1)[:, 0].tolist()  # no token 2 or 3: 1/2 each
[0.5, 0.5, 0.5]
>>> from faithbench.submissions.gradient import EXPLAINER
>>> [r.check for r in check_explainer(EXPLAINER, tiny_classifier(), batch, target) if not r.passed]
[]
"""

from __future__ import annotations

import torch

from faithbench.benchmark.core.api import Batch, Explainer
from faithbench.benchmark.core.models.classifier import AttentionClassifier, ClassifierConfig
from faithbench.benchmark.core.validation import CheckResult, run_checks
from faithbench.benchmark.core.vocab import collate

__all__ = ["Votes", "check_explainer", "three_row_batch", "tiny_classifier"]

THREE_ROW_IDS = ("ex-a", "ex-b", "ex-c")


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


def tiny_classifier(seed: int = 0) -> AttentionClassifier:
    """A seeded, untrained 16-unit BiLSTM attention classifier over 50 ids, in eval
    mode: the whole model surface (logits, embeddings, attention), in milliseconds."""
    torch.manual_seed(seed)
    return AttentionClassifier(ClassifierConfig(vocab_size=50, num_classes=2, embed_dim=16,
                                                hidden=16, attn_dim=16)).eval()


def three_row_batch() -> tuple[Batch, torch.Tensor]:
    """Rows of lengths 4, 2 and 3 (ids ``THREE_ROW_IDS``, right-padded) and targets
    (0, 1, 0): padding, two classes and unequal lengths in one batch."""
    return collate([[5, 6, 7, 8], [9, 10], [11, 12, 13]], THREE_ROW_IDS), torch.tensor([0, 1, 0])


def check_explainer(explainer: Explainer, model, batch: Batch, target: torch.Tensor, *,
                    time_budget_s: float = 5.0) -> list[CheckResult]:
    """The checks ``faithbench validate`` runs (shape, finite values, determinism, the
    same answer alone, shuffled and in other batch sizes, time), in this process: for
    an explainer object built by the caller. A file or module is checked by
    ``faithbench validate``, which imports it in a worker."""
    from faithbench.benchmark.core.isolation import InProcess

    return run_checks(explainer, InProcess(explainer, model, time_budget_s=time_budget_s),
                      batch, target, time_budget_s=time_budget_s)
