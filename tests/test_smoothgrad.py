"""SmoothGrad and VarGrad against Captum's ``NoiseTunnel(Saliency)`` called directly on
the same model and input, fed the same noise: the example's generator state is put into
torch's global generator, from which Captum draws its (n_samples, L, D) noise in one
call. Then alone against batched (16 rows, other lengths around it), and two runs."""

from __future__ import annotations

import pytest
import torch
from captum.attr import NoiseTunnel, Saliency

from faithbench.benchmark.core.api import Batch, example_generator
from faithbench.benchmark.core.vocab import collate
from faithbench.submissions.smoothgrad import SmoothGradExplainer
from faithbench.submissions.vargrad import VarGradExplainer
from faithbench.testing import tiny_classifier


def batch_of(rows, words=None) -> Batch:
    """Rows "ex0", "ex1", ... right-padded (ids >= 3, so no real token is padding)."""
    return collate(rows, [f"ex{i}" for i in range(len(rows))], words=words)


ROWS = [[3 + (i * 7 + j) % 17 for j in range(2 + i % 9)] for i in range(16)]


def captum_alone(model, batch: Batch, row: int, target: int, kind: str, n_samples: int,
                 noise: float, rng: torch.Generator) -> torch.Tensor:
    one = batch.select([row])
    n = int(one.mask.sum())
    one = Batch(ids=one.ids[:, :n], mask=one.mask[:, :n], example_ids=one.example_ids)
    embeds = model.embed(one).detach()

    def forward(x):
        return model.logits_from_embeddings(x, Batch(ids=one.ids.expand(len(x), -1),
                                                     mask=one.mask.expand(len(x), -1),
                                                     example_ids=one.example_ids * len(x)))

    sigma = noise * float(embeds.max() - embeds.min())
    torch.random.set_rng_state(example_generator(rng, one.example_ids[0]).get_state())
    with torch.enable_grad():
        out = NoiseTunnel(Saliency(forward)).attribute(
            embeds, nt_type=kind, nt_samples=n_samples, stdevs=sigma, target=target, abs=False)
    return out[0]  # (L, D)


@pytest.mark.parametrize("kind", ["smoothgrad", "vargrad"])
def test_equals_captums_noise_tunnel_alone_and_in_a_batch_of_16(kind):
    model = tiny_classifier().eval()
    batch = batch_of(ROWS)
    target = torch.tensor([i % 2 for i in range(16)])
    rng = torch.Generator().manual_seed(5)
    explainer = (SmoothGradExplainer if kind == "smoothgrad" else VarGradExplainer)(
        n_samples=6, noise=0.2)
    batched = explainer.explain(model, batch, target, rng=rng)
    for row in range(16):
        n = len(ROWS[row])
        want = captum_alone(model, batch, row, int(target[row]), kind, 6, 0.2, rng)
        want = want.norm(dim=-1) if kind == "smoothgrad" else want.sum(dim=-1)
        alone = explainer.explain(model, batch.select([row]), target[row:row + 1], rng=rng)
        assert alone[0, :n] == pytest.approx(want, rel=1e-4, abs=1e-9)
        assert batched[row, :n] == pytest.approx(want, rel=1e-4, abs=1e-9)
        assert (batched[row, n:] == 0).all()


def test_noise_matters_and_two_runs_agree():
    model = tiny_classifier().eval()
    batch = batch_of(ROWS[:4])
    target = torch.tensor([0, 1, 0, 1])
    rng = torch.Generator().manual_seed(0)
    first = SmoothGradExplainer(n_samples=4).explain(model, batch, target, rng=rng)
    again = SmoothGradExplainer(n_samples=4).explain(model, batch, target, rng=rng)
    assert torch.equal(first, again)
    other = SmoothGradExplainer(n_samples=4).explain(
        model, batch, target, rng=torch.Generator().manual_seed(1))
    assert not torch.equal(first, other)
    # no noise: every copy is the input, SmoothGrad is the gradient norm, VarGrad zero
    plain = SmoothGradExplainer(n_samples=3, noise=0.0).explain(model, batch, target, rng=rng)
    with torch.enable_grad():
        x = model.embed(batch).detach().requires_grad_(True)
        (g,) = torch.autograd.grad(
            model.logits_from_embeddings(x, batch).gather(1, target.view(-1, 1)).sum(), x)
    assert plain == pytest.approx(g.norm(dim=-1).masked_fill(~batch.mask, 0), abs=1e-6)
    flat = VarGradExplainer(n_samples=3, noise=0.0).explain(model, batch, target, rng=rng)
    assert flat.abs().max() < 1e-9


def test_noise_drawn_for_the_whole_batch_fails_and_is_pointed_to_the_per_example_helper():
    """The failure a SmoothGrad written the naive way gets: its example's noise depends on
    the batch it came in, and the message names the fix."""
    from dataclasses import dataclass, field

    from faithbench.benchmark.core.api import GRADIENTS, ExplainerSpec
    from faithbench.benchmark.core.isolation import InProcess
    from faithbench.benchmark.core.validation import run_checks

    @dataclass(frozen=True)
    class BatchNoise:
        spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(
            name="batch_noise", version="1", requires=frozenset({GRADIENTS})))

        def explain(self, model, batch, target, *, rng):
            return torch.randn(batch.ids.shape, generator=rng)

    explainer, batch = BatchNoise(), batch_of(ROWS[:6])
    results = {r.check: r for r in run_checks(explainer, InProcess(explainer, tiny_classifier(),
                                                                    1.0),
                                              batch, torch.zeros(6, dtype=torch.long))}
    failed = results["alone_vs_batch"]
    assert not failed.passed
    assert "noisy_gradients" in failed.detail and "TEMPLATE" in failed.detail
    good = SmoothGradExplainer(n_samples=3)
    assert all(r.passed for r in run_checks(good, InProcess(good, tiny_classifier(), 1.0),
                                            batch, torch.zeros(6, dtype=torch.long)))
