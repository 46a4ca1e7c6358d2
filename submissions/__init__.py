"""Explainers. The reference explainers are ordinary submissions, written only
against ``faithbench.api`` — the same surface an outside submitter uses
(see ``TEMPLATE.py``). Each module exposes one ``EXPLAINER`` object.

``REGISTRY`` lists the reference explainers by explicit ``add`` calls, the same
registration style as tasks and metrics (duplicates refused, "did you mean" for
unknown names); ``REFERENCE`` is its names, in order.
"""

from faithbench.api import ATTENTION, EMBEDDINGS, GRADIENTS
from faithbench.benchmark.core.registry import Registry
from faithbench.submissions import (
    attention,
    attention_rollout,
    gradient,
    gradient_x_input,
    integrated_gradients,
    occlusion,
    random,
)

REGISTRY = Registry("reference explainer")
for _module in (attention, gradient, gradient_x_input, integrated_gradients, occlusion, random,
                attention_rollout):
    REGISTRY.add(_module.EXPLAINER.spec.name, _module.EXPLAINER)

REFERENCE = tuple(REGISTRY.names())
# those every task model serves (the rest need e.g. a Transformer's per-layer attention)
UNIVERSAL = tuple(n for n in REFERENCE
                  if REGISTRY.get(n).spec.requires <= frozenset({GRADIENTS, EMBEDDINGS, ATTENTION}))


def get_explainer(name: str):
    """The reference explainer ``name``; an unknown name raises with "did you mean"."""
    return REGISTRY.get(name)


def reference_module(name: str) -> str:
    """The module that holds reference explainer ``name``.

    >>> reference_module("occlusion")
    'faithbench.submissions.occlusion'
    """
    return type(get_explainer(name)).__module__
