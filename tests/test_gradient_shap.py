"""GradientSHAP against Captum's ``GradientShap`` called directly on the same model and
input, fed the same draws: torch's global generator takes the example's generator
state (Captum draws the noise from it in one (n, L, D) call), and numpy's uniform draw
of the α's is answered with the α's that follow in the example's generator."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from captum.attr import GradientShap

from faithbench.benchmark.core.api import Batch, example_generator
from faithbench.benchmark.core.vocab import collate
from faithbench.submissions.gradient_shap import GradientShapExplainer
from faithbench.testing import tiny_classifier

ROWS = [[3 + (i * 5 + j) % 19 for j in range(2 + i % 8)] for i in range(16)]


def batch_of(rows, words=None) -> Batch:
    """Rows "ex0", "ex1", ... right-padded (ids >= 3, so no real token is padding)."""
    return collate(rows, [f"ex{i}" for i in range(len(rows))], words=words)


def captum_alone(model, tokens, example_id, target, n_samples, noise, rng, monkeypatch):
    one = Batch(ids=torch.tensor([tokens]), mask=torch.ones(1, len(tokens), dtype=torch.bool),
                example_ids=(example_id,))
    embeds = model.embed(one).detach()  # (1, L, D)
    baseline = torch.zeros_like(embeds)  # the baseline id's (padding's) embedding is zero
    assert model.baseline_id == model.pad_id == 0
    sigma = noise * float(embeds.max() - embeds.min())
    g = example_generator(rng, example_id)
    torch.normal(0.0, sigma, (n_samples, len(tokens), embeds.shape[-1]), generator=g)
    alphas = torch.rand(n_samples, generator=g).double().numpy()
    monkeypatch.setattr(np.random, "uniform", lambda lo, hi, size: alphas[:size])

    def forward(x):
        k = len(x)
        return model.logits_from_embeddings(x, Batch(ids=one.ids.expand(k, -1),
                                                     mask=one.mask.expand(k, -1),
                                                     example_ids=one.example_ids * k))

    torch.random.set_rng_state(example_generator(rng, example_id).get_state())
    with torch.enable_grad():
        out = GradientShap(forward).attribute(embeds, baselines=baseline, target=target,
                                              n_samples=n_samples, stdevs=sigma)
    return out[0].sum(dim=-1)  # (L,)


def test_equals_captums_gradient_shap_alone_and_in_a_batch_of_16(monkeypatch):
    model = tiny_classifier().eval()
    batch = batch_of(ROWS)
    target = torch.tensor([i % 2 for i in range(16)])
    rng = torch.Generator().manual_seed(8)
    explainer = GradientShapExplainer(n_samples=7, noise=0.2)
    batched = explainer.explain(model, batch, target, rng=rng)
    for row in range(16):
        n = len(ROWS[row])
        want = captum_alone(model, ROWS[row], f"ex{row}", int(target[row]), 7, 0.2, rng,
                            monkeypatch)
        alone = explainer.explain(model, batch.select([row]), target[row:row + 1], rng=rng)
        assert alone[0, :n] == pytest.approx(want, rel=1e-5, abs=1e-8)
        assert batched[row, :n] == pytest.approx(want, rel=1e-5, abs=1e-8)
        assert (batched[row, n:] == 0).all()


def test_without_noise_it_is_integrated_gradients_at_random_points():
    """noise = 0: each draw is (x - x') · ∇f(x' + α(x - x')), its mean over α's drawn
    from the example's generator, computed here by hand for one row."""
    model = tiny_classifier().eval()
    batch, target = batch_of([ROWS[5]]), torch.tensor([1])
    rng = torch.Generator().manual_seed(3)
    got = GradientShapExplainer(n_samples=4, noise=0.0).explain(model, batch, target, rng=rng)
    x = model.embed(batch).detach()
    g = example_generator(rng, "ex0")
    torch.normal(0.0, 0.0, (4, len(ROWS[5]), x.shape[-1]), generator=g)
    want = torch.zeros(len(ROWS[5]))
    for a in torch.rand(4, generator=g).tolist():
        point = (a * x).requires_grad_(True)
        logit = model.logits_from_embeddings(point, batch)[0, 1]
        (grad,) = torch.autograd.grad(logit, point)
        want += (x * grad)[0].sum(-1) / 4
    assert got[0] == pytest.approx(want, rel=1e-5, abs=1e-8)


def test_two_runs_agree_and_the_seed_matters():
    model = tiny_classifier().eval()
    batch, target = batch_of(ROWS[:4]), torch.tensor([0, 1, 0, 1])
    explainer = GradientShapExplainer(n_samples=5)
    first = explainer.explain(model, batch, target, rng=torch.Generator().manual_seed(0))
    again = explainer.explain(model, batch, target, rng=torch.Generator().manual_seed(0))
    other = explainer.explain(model, batch, target, rng=torch.Generator().manual_seed(1))
    assert torch.equal(first, again) and not torch.equal(first, other)
