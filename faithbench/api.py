"""What an explainer plugin imports from faithbench: its spec, the batch and model
surface it is handed, the seeded per-example generator, the capability names it may
require, two helpers for attention over word pieces, and ``noisy_gradients``
(gradients at noisy copies, the noise drawn per example). See
``faithbench/submissions/TEMPLATE.py`` (``submissions/TEMPLATE.py`` in the repository).

Tasks and metrics are written inside the repository against the engine's own
interfaces (``faithbench.benchmark.core.api``); a plugin needs none of them.

>>> import faithbench.api as api
>>> sorted(api.__all__)[:4]
['ATTENTION', 'Batch', 'EMBEDDINGS', 'ExplainableModel']
"""

from faithbench.benchmark.core.api import (
    ATTENTION,
    EMBEDDINGS,
    GRADIENTS,
    LAYER_ATTENTION,
    LRP,
    Batch,
    ExplainableModel,
    Explainer,
    ExplainerSpec,
    Target,
    capabilities,
    example_generator,
    over_pieces,
    token_attention,
)
from faithbench.benchmark.core.noise import noisy_gradients

__all__ = [
    "ATTENTION",
    "EMBEDDINGS",
    "GRADIENTS",
    "LAYER_ATTENTION",
    "LRP",
    "Batch",
    "ExplainableModel",
    "Explainer",
    "ExplainerSpec",
    "Target",
    "capabilities",
    "example_generator",
    "noisy_gradients",
    "over_pieces",
    "token_attention",
]
