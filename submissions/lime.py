"""LIME (Ribeiro, Singh & Guestrin 2016, "Why should I trust you?") with the words of
the input as features: ``n_samples`` random subsets of the words are kept (each word
independently with probability 1/2, Captum's default sampling), the rest removed by the
task's ``eraser``; a weighted linear model of p(target) on the presence indicators is
fitted, and a word's score is its coefficient (on a subword model shared equally among
its pieces).

Captum's definition (``captum.attr.Lime``: the sampler, the exponential kernel on the
cosine distance, the sample weights and the fit) with the two settings of the authors'
``lime`` package for text: the interpretable model is ridge regression with α = 1
(``SkLearnRidge(alpha=1.0)``), and the kernel width is 0.25, which makes Captum's
kernel exp(−d² / 2w²) on the cosine distance d lime's text kernel (√exp(−(100 d)² /
25²)). Not Captum's default ``SkLearnLasso(alpha=0.01)``: on the SST-2 BiLSTM that
Lasso zeroed every word of 8 % of the test sentences (148 of 1,821) and 59 % of the
words on average, leaving the ranking metrics nothing to rank in those sentences.
Every model call goes through the shared perturbation engine
(``faithbench.api.feature_attributions``): a distinct subset is forwarded once, and
each example draws from its own seeded generator (the same scores alone and in any
batch). ``tests/test_perturbation_explainers.py`` checks the scores against Captum's
``Lime`` called directly on the model.
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

KERNEL_WIDTH = 0.25  # lime's text kernel: width 25 on the cosine distance x 100
RIDGE_ALPHA = 1.0  # lime's default regressor: Ridge(alpha=1, fit_intercept=True)


@dataclass(frozen=True)
class LimeExplainer:
    n_samples: int = 500
    eraser: str = "delete"
    spec: ExplainerSpec = field(init=False)  # derived from n_samples and eraser

    def __post_init__(self):
        object.__setattr__(self, "spec", ExplainerSpec(
            name="lime",
            version="1",
            requires=frozenset(),
            params=(("eraser", self.eraser), ("kernel_width", KERNEL_WIDTH),
                    ("n_samples", self.n_samples), ("ridge_alpha", RIDGE_ALPHA)),
            deterministic=True,
            cost=f"<= {self.n_samples} fwd (n_samples; distinct word subsets only, at most "
                 "2^W, W = words)",
            citation="Ribeiro, Singh & Guestrin 2016, \"Why should I trust you?\": explaining "
                     "the predictions of any classifier",
            description="Coefficients of a ridge fit of p(target) on which words are kept, "
                        "over random subsets of the words (Captum Lime with lime's text "
                        "kernel and regressor).",
        ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) LIME coefficients; zero at padding."""
        return feature_attributions(model, batch, target, rng, self.attribute,
                                    eraser=self.eraser)

    def attribute(self, forward, inputs, baselines, target, feature_mask) -> torch.Tensor:
        """Captum's Lime on one example's presence vector, its samples drawn at once.

        Captum draws each sample as ``torch.bernoulli`` of a (1, M) row of ½ from the
        global generator, one call per sample; one (n, M) call draws the same numbers in
        the same order. The kernel is Captum's and the fit solves its ridge problem
        (``fit_linear``), so the result is
        ``Lime(forward, SkLearnRidge(1.0), kernel).attribute(...)``'s, without
        its Python loop over samples (which cost 10x the forward passes on a BiLSTM);
        ``tests/test_perturbation_explainers.py`` compares the two."""
        samples = torch.bernoulli(torch.full((self.n_samples, inputs.shape[1]), 0.5))
        distance = 1 - torch.nn.functional.cosine_similarity(inputs.expand_as(samples),
                                                             samples, dim=1)
        weights = torch.exp(-(distance.double() ** 2) / (2 * KERNEL_WIDTH ** 2))
        return fit_linear(forward, samples, weights, target, alpha=RIDGE_ALPHA)


EXPLAINER = LimeExplainer()
