"""Explainers. The reference explainers are ordinary submissions, written only
against ``faithbench.api`` — the same surface an outside submitter uses
(see ``TEMPLATE.py``). Each module exposes one ``EXPLAINER`` object.

``REGISTRY`` lists the reference explainers by explicit ``add`` calls, the same
registration style as tasks and metrics (duplicates refused, "did you mean" for
unknown names); ``REFERENCE`` is its names, in order. ``PARAMS`` declares what
``name[key=value]`` may set on each, the way ``faithbench.metrics.PARAMS`` does for
metrics: only parameters its id shows, so two runs never share an id with different
settings (``rows_per_pass`` changes speed, not scores, and is not settable).
"""

from faithbench.api import ATTENTION, EMBEDDINGS, ERASERS, GRADIENTS
from faithbench.benchmark.core.params import Param
from faithbench.benchmark.core.registry import Registry
from faithbench.submissions import (
    attention,
    attention_norm,
    attention_rollout,
    attention_x_gradient,
    gradient,
    gradient_shap,
    gradient_x_input,
    integrated_gradients,
    kernel_shap,
    lime,
    lrp,
    occlusion,
    random,
    shapley_sampling,
    smoothgrad,
    value_zeroing,
    vargrad,
)

REGISTRY = Registry("reference explainer")
for _module in (attention, gradient, gradient_x_input, integrated_gradients, occlusion, random,
                attention_rollout, lrp, smoothgrad, vargrad, attention_norm, attention_x_gradient,
                value_zeroing, gradient_shap, lime, kernel_shap, shapley_sampling):
    REGISTRY.add(_module.EXPLAINER.spec.name, _module.EXPLAINER)

REFERENCE = tuple(REGISTRY.names())
PARAMS: dict[str, dict[str, Param]] = {
    "attention": {"layer": Param(int, optional=True, text="None | a layer index (negative "
                                 "from the last)"),
                  "heads": Param(str, choices=attention.HEADS, optional=True)},
    "integrated_gradients": {"n_steps": Param(int, low=1, text="int >= 1")},
    "occlusion": {"granularity": Param(str, choices=("word", "subword"), optional=True)},
    "attention_rollout": {"heads": Param(str, choices=attention_rollout.HEADS)},
    "attention_norm": {"layer": Param(int, optional=True, text="None | a layer index "
                                      "(negative from the last; a Transformer's)")},
    "lrp": {"eps": Param(float, low=0.0, low_open=True, text="float > 0 (the ε-rule's "
                         "stabilizer)")},
    **{name: {"n_samples": Param(int, low=1, text="int >= 1 (noisy copies per example)"),
              "noise": Param(float, low=0.0, text="float >= 0 (σ as a fraction of the "
                             "example's embedding range)")}
       for name in ("smoothgrad", "vargrad", "gradient_shap")},
    **{name: {"n_samples": Param(int, low=1, text="int >= 1 (samples of word subsets, "
                                 "or orderings for shapley_sampling)"),
              "eraser": Param(str, choices=ERASERS)}
       for name in ("lime", "kernel_shap", "shapley_sampling")},
}
# ``faithbench roar``'s default: the six of the published ROAR table. ROAR explains the
# training split and retrains per explainer and ratio, so the costly perturbation
# explainers (LIME, SHAP) join it only by name
ROAR_DEFAULT = ("attention", "gradient", "gradient_x_input", "integrated_gradients", "occlusion",
                "random")
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
