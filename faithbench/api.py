"""What an explainer plugin imports from faithbench: its spec, the batch and model
surface it is handed, the seeded per-example generator, the capability names it may
require, two helpers for attention over word pieces, ``noisy_gradients``
(gradients at noisy copies, the noise drawn per example) and ``feature_attributions``
(a Captum-style perturbation method over the words, forwarded through the shared
engine), and ``variant_probs`` (the model's probabilities of erased variants, through
that engine: each distinct variant forwarded once and shared with the metrics). See
``faithbench/submissions/TEMPLATE.py`` (``submissions/TEMPLATE.py`` in the repository).

Tasks and metrics are written inside the repository against the engine's own
interfaces (``faithbench.benchmark.core.api``); a plugin needs none of them.

>>> import faithbench.api as api
>>> sorted(api.__all__)[:4]
['ATTENTION', 'ATTENTION_GRADIENT', 'ATTENTION_VECTORS', 'Batch']
"""

from faithbench.benchmark.core.api import (
    ATTENTION,
    ATTENTION_GRADIENT,
    ATTENTION_VECTORS,
    EMBEDDINGS,
    GRADIENTS,
    LAYER_ATTENTION,
    LRP,
    VALUE_ZEROING,
    Batch,
    ExplainableModel,
    Explainer,
    ExplainerSpec,
    Target,
    baseline_embeddings,
    capabilities,
    example_generator,
    over_pieces,
    token_attention,
)
from faithbench.benchmark.core.erasers import ERASERS
from faithbench.benchmark.core.features import feature_attributions, fit_linear, fit_surrogate
from faithbench.benchmark.core.noise import gradients_at, noisy_embeddings, noisy_gradients
from faithbench.benchmark.core.perturb import variant_probs

__all__ = [
    "ATTENTION",
    "ATTENTION_GRADIENT",
    "ATTENTION_VECTORS",
    "EMBEDDINGS",
    "ERASERS",
    "GRADIENTS",
    "LAYER_ATTENTION",
    "LRP",
    "VALUE_ZEROING",
    "Batch",
    "ExplainableModel",
    "Explainer",
    "ExplainerSpec",
    "Target",
    "baseline_embeddings",
    "capabilities",
    "example_generator",
    "feature_attributions",
    "fit_linear",
    "fit_surrogate",
    "gradients_at",
    "noisy_embeddings",
    "noisy_gradients",
    "over_pieces",
    "token_attention",
    "variant_probs",
]
