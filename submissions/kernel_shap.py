"""KernelSHAP (Lundberg & Lee 2017, "A unified approach to interpreting model
predictions") with the words of the input as features: Shapley values estimated by a
weighted linear regression of p(target) on which words are kept, over ``n_samples``
subsets drawn from the Shapley kernel (the full and the empty input first, with
near-infinite weight), the removed words erased by the task's ``eraser``. A word's
score is its estimated Shapley value (on a subword model shared equally among its
pieces); the scores of an example sum to about p(target | x) − p(target | empty input).

Captum's definition (``captum.attr.KernelShap``: its sampling distribution, its
weights and its linear regression); the samples are drawn at once (version 2; version 1
drew Captum's own random stream, one sample at a time, and cost twice the forward
passes it needed), every model call goes through the shared perturbation engine
(``faithbench.api.feature_attributions``), and each example draws from its own seeded
generator. ``tests/test_perturbation_explainers.py`` checks the sampler's distribution
by simulation and the scores against Captum's ``KernelShap`` called directly on the
model with the same samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import (
    Batch,
    ExplainableModel,
    ExplainerSpec,
    Target,
    feature_attributions,
    fit_linear,
)

INF_WEIGHT = 1e6  # Captum's KernelShap.inf_weight: the endpoints the fit must pass through


@dataclass(frozen=True)
class KernelShapExplainer:
    n_samples: int = 500
    eraser: str = "delete"
    spec: ExplainerSpec = field(init=False)  # derived from n_samples and eraser

    def __post_init__(self):
        object.__setattr__(self, "spec", ExplainerSpec(
            name="kernel_shap",
            version="2",
            requires=frozenset(),
            params=(("eraser", self.eraser), ("n_samples", self.n_samples)),
            deterministic=True,
            cost=f"<= {self.n_samples} fwd (n_samples; distinct word subsets only, at most "
                 "2^W, W = words)",
            citation="Lundberg & Lee 2017, A unified approach to interpreting model "
                     "predictions",
            description="Shapley values of the words for p(target), estimated by Captum's "
                        "KernelShap with removed words erased.",
        ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) estimated Shapley values; zero at padding."""
        return feature_attributions(model, batch, target, rng, self.attribute,
                                    eraser=self.eraser)

    def attribute(self, forward, inputs, baselines, target, feature_mask) -> torch.Tensor:
        """Captum's KernelShap on one example's presence vector: its samples and weights
        (``shapley_kernel_samples``) and its least-squares fit (``fit_linear``), with one forward
        call instead of Captum's Python loop over samples;
        ``tests/test_perturbation_explainers.py`` compares the two. A one-word example
        has no subset between the full and the empty input to sample (Captum's kernel
        distribution is empty); its Shapley value is exactly p(x) − p(empty), the value
        KernelSHAP's two weighted endpoints give."""
        m = inputs.shape[1]
        if m == 1:
            p = forward(torch.cat([inputs, baselines]))[:, target]
            return (p[0] - p[1]).view(1, 1)
        return fit_linear(forward, *shapley_kernel_samples(m, self.n_samples), target)


def shapley_kernel_samples(m: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, m) presence samples and their weights, from Captum's KernelShap distribution:
    the full and the empty input first (weight 10^6), then per sample a size k from the
    Shapley kernel p(k) ∝ (m − 1) / (k (m − k)) and a uniformly random subset of k
    features (the k largest of m standard normals, as Captum picks them), weight 1.

    Drawn with two generator calls for all samples, where Captum makes two per sample
    (about 1.5 µs each, which cost as much as the BiLSTM's forward passes of the
    example): the stream differs from Captum's, the distribution does not.
    ``tests/test_perturbation_explainers.py`` checks the distribution by simulation and
    hands these samples to Captum's own KernelShap to check the rest of the estimator."""
    k = torch.arange(m, dtype=torch.float)
    probs = torch.tensor(m - 1) / (k * (m - k))
    probs[0] = 0.0
    draws = max(n - 2, 0)
    sizes = torch.multinomial(probs, draws, replacement=True) if draws else torch.zeros(0)
    ranks = torch.randn(draws, m).argsort(dim=1).argsort(dim=1)
    subsets = (ranks >= (m - sizes).unsqueeze(1)).float()
    samples = torch.cat([torch.ones(1, m), torch.zeros(1, m), subsets])[:n]
    weights = torch.ones(len(samples))
    weights[:2] = INF_WEIGHT
    return samples, weights


EXPLAINER = KernelShapExplainer()
