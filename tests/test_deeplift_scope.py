"""Why there is no ``deeplift`` reference explainer: Captum's ``DeepLift`` applies its
Rescale rule only at the nonlinear *modules* it hooks (nn.ReLU, nn.Sigmoid, nn.Tanh,
nn.Softmax, ...). The task BiLSTMs compute theirs inside ``nn.LSTM`` and as functional
calls (``torch.tanh``, ``torch.softmax``), MiniLM as GELU modules and functional
softmax, none of which it hooks, so on these models Captum's DeepLIFT is the plain
gradient times (input − baseline): with the zero baseline, ``gradient_x_input``
exactly. A leaderboard row under DeepLIFT's name would be that row again. This test
keeps the claim true: if it fails, Captum (or a model) changed and DeepLIFT is worth
adding."""

from __future__ import annotations

import warnings

import pytest
import torch
from captum.attr import DeepLift

from faithbench.submissions.gradient_x_input import EXPLAINER as GRADIENT_X_INPUT
from faithbench.testing import three_row_batch, tiny_classifier


class Logits(torch.nn.Module):
    """The model's logits as a module of its embeddings (Captum stacks input and
    baseline: 2B rows, the batch repeated)."""

    def __init__(self, model, batch):
        super().__init__()
        self.model, self.batch = model, batch

    def forward(self, x):
        rows = list(range(len(self.batch))) * (len(x) // len(self.batch))
        return self.model.logits_from_embeddings(x, self.batch.select(rows))


def test_captum_deeplift_on_the_bilstm_is_gradient_x_input():
    model = tiny_classifier(seed=4)
    batch, target = three_row_batch()
    x = model.embed(batch).detach()
    assert model.pad_id == model.baseline_id and not x[~batch.mask].any()  # zero baseline
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Captum warns that it found no hookable module
        deeplift = DeepLift(Logits(model, batch)).attribute(
            x, baselines=torch.zeros_like(x), target=target).sum(-1).detach()
    want = GRADIENT_X_INPUT.explain(model, batch, target, rng=torch.Generator())
    assert deeplift == pytest.approx(want, rel=1e-5, abs=1e-8)
    assert (want.abs() > 1e-4).sum() >= 6  # not a comparison of zeros
