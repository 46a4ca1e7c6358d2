"""KernelSHAP (Lundberg & Lee 2017, "A unified approach to interpreting model
predictions") with the words of the input as features: Shapley values estimated by a
weighted linear regression of p(target) on which words are kept, over ``n_samples``
subsets drawn from the Shapley kernel (the full and the empty input first, with
near-infinite weight), the removed words erased by the task's ``eraser``. A word's
score is its estimated Shapley value (on a subword model shared equally among its
pieces); the scores of an example sum to about p(target | x) − p(target | empty input).

Captum's definition (``captum.attr.KernelShap``, its sampler and its linear
regression); every model call goes through the shared perturbation engine
(``faithbench.api.feature_attributions``), and each example draws from its own seeded
generator. ``tests/test_perturbation_explainers.py`` checks the scores against
Captum's ``KernelShap`` called directly on the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from captum.attr import KernelShap

from faithbench.api import Batch, ExplainableModel, ExplainerSpec, Target, feature_attributions


@dataclass(frozen=True)
class KernelShapExplainer:
    n_samples: int = 500
    eraser: str = "delete"
    spec: ExplainerSpec = field(init=False)  # derived from n_samples and eraser

    def __post_init__(self):
        object.__setattr__(self, "spec", ExplainerSpec(
            name="kernel_shap",
            version="1",
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
        """Captum's KernelShap on one example's presence vector. A one-word example has
        no subset between the full and the empty input to sample (Captum's kernel
        distribution is empty); its Shapley value is exactly p(x) − p(empty), the value
        KernelSHAP's two weighted endpoints give."""
        if inputs.shape[1] == 1:
            p = forward(torch.cat([inputs, baselines]))[:, target]
            return (p[0] - p[1]).view(1, 1)
        return KernelShap(forward).attribute(
            inputs, baselines=baselines, target=target, feature_mask=feature_mask,
            n_samples=self.n_samples, perturbations_per_eval=self.n_samples)


EXPLAINER = KernelShapExplainer()
