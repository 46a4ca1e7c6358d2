"""Metrics: one module per family, every metric one frozen ``SimpleMetric`` value.

``REGISTRY`` is filled by the explicit ``add`` calls below (registry key = spec name);
``get_metric`` looks one up, ``default_metrics`` lists those that apply to a task
kind, and ``with_params`` makes a parametrized variant as a new frozen value.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from faithbench.benchmark.core import ids, params
from faithbench.benchmark.core.api import SimpleMetric
from faithbench.benchmark.core.erasers import ERASERS
from faithbench.benchmark.core.errors import InputError, UnknownNameError
from faithbench.benchmark.core.links import LINKS
from faithbench.benchmark.core.names import TASK_KINDS
from faithbench.benchmark.core.params import Param
from faithbench.benchmark.core.registry import Registry
from faithbench.metrics.alignment import AER_METRIC, PRECISION_METRIC, RECALL_METRIC
from faithbench.metrics.erasure import AOPC_LERF, AOPC_MORF
from faithbench.metrics.ffidelity import FFIDELITY_MINUS, FFIDELITY_PLUS, MEASURES
from faithbench.metrics.flip import FLIP_FRACTION, FLIP_RATE
from faithbench.metrics.loo import TAUCORR_LOO
from faithbench.metrics.naopc import NAOPC_COMP, NAOPC_SUFF
from faithbench.metrics.plausibility import (
    AUPRC,
    AVERAGE_PRECISION,
    MEAN_RANK,
    R_PRECISION,
    TOKEN_F1,
    TOKEN_F1_MICRO,
)
from faithbench.metrics.rationale import COMPREHENSIVENESS, ROUNDINGS, SUFFICIENCY
from faithbench.metrics.roar import MASKS, ROAR
from faithbench.metrics.sanity import (
    DEPTH,
    RANDOMIZATION_CASCADING,
    RANDOMIZATION_DATA,
    RANDOMIZATION_INDEPENDENT,
)
from faithbench.metrics.share import SEGMENT_SHARE
from faithbench.metrics.soft import SCORE_MAPS, SOFT_COMPREHENSIVENESS, SOFT_SUFFICIENCY
from faithbench.metrics.variants import GRANULARITIES, TIES

REGISTRY: Registry[SimpleMetric] = Registry("metric")
REGISTRY.add(AOPC_MORF.spec.name, AOPC_MORF)
REGISTRY.add(AOPC_LERF.spec.name, AOPC_LERF)
REGISTRY.add(COMPREHENSIVENESS.spec.name, COMPREHENSIVENESS)
REGISTRY.add(SUFFICIENCY.spec.name, SUFFICIENCY)
REGISTRY.add(FLIP_RATE.spec.name, FLIP_RATE)
REGISTRY.add(FLIP_FRACTION.spec.name, FLIP_FRACTION)
REGISTRY.add(TAUCORR_LOO.spec.name, TAUCORR_LOO)
REGISTRY.add(NAOPC_COMP.spec.name, NAOPC_COMP)
REGISTRY.add(NAOPC_SUFF.spec.name, NAOPC_SUFF)
REGISTRY.add(SOFT_COMPREHENSIVENESS.spec.name, SOFT_COMPREHENSIVENESS)
REGISTRY.add(SOFT_SUFFICIENCY.spec.name, SOFT_SUFFICIENCY)
REGISTRY.add(R_PRECISION.spec.name, R_PRECISION)
REGISTRY.add(AVERAGE_PRECISION.spec.name, AVERAGE_PRECISION)
REGISTRY.add(TOKEN_F1.spec.name, TOKEN_F1)
REGISTRY.add(AUPRC.spec.name, AUPRC)
REGISTRY.add(TOKEN_F1_MICRO.spec.name, TOKEN_F1_MICRO)
REGISTRY.add(MEAN_RANK.spec.name, MEAN_RANK)
REGISTRY.add(SEGMENT_SHARE.spec.name, SEGMENT_SHARE)
REGISTRY.add(AER_METRIC.spec.name, AER_METRIC)
REGISTRY.add(PRECISION_METRIC.spec.name, PRECISION_METRIC)
REGISTRY.add(RECALL_METRIC.spec.name, RECALL_METRIC)
REGISTRY.add(ROAR.spec.name, ROAR)
# F-Fidelity: erasure on one surrogate trained with random masking (a training each)
REGISTRY.add(FFIDELITY_PLUS.spec.name, FFIDELITY_PLUS)
REGISTRY.add(FFIDELITY_MINUS.spec.name, FFIDELITY_MINUS)
# sanity checks (family "sanity"): the explainer run again on a randomized model
REGISTRY.add(RANDOMIZATION_CASCADING.spec.name, RANDOMIZATION_CASCADING)
REGISTRY.add(RANDOMIZATION_INDEPENDENT.spec.name, RANDOMIZATION_INDEPENDENT)
REGISTRY.add(RANDOMIZATION_DATA.spec.name, RANDOMIZATION_DATA)


# Named parameter sets: ``name[preset=P]`` is ``name`` with these parameters (explicit
# ones given beside the preset win), so the canonical id spells them all out.
FERRET_BINS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_FERRET = {"rounding": "trunc", "positive_only": True, "distinct": True, "bins": FERRET_BINS,
           "eraser": "retokenize", "granularity": "subword", "ties": "introsort"}
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    # ferret-xai 0.4.2 (Attanasio et al. 2023), evaluators/faithfulness_measures.py:
    # AOPC over 10 %, ..., 100 % with k = int(p·n) over the pieces ([CLS]/[SEP] never
    # count), only positive scores in a rationale, a bin skipped when k = 0 or its
    # rationale repeats the last one, 0 (comprehensiveness) / 1 (sufficiency) when every
    # bin is skipped, every perturbation decoded to text and tokenized again, and equal
    # scores in the order of numpy's own argsort, reversed (``faithbench.metrics.variants.TIES``:
    # the same on every machine; ferret's where its numpy has no AVX-512 argsort)
    "ferret": {
        "comprehensiveness": {**_FERRET, "if_empty": 0.0},
        "sufficiency": {**_FERRET, "if_empty": 1.0},
        "taucorr_loo": {"eraser": "retokenize", "granularity": "subword"},
    },
}


def _choice(*options) -> Param:
    """One of ``options`` (None among them: the parameter may be left off), matched by
    type too: 1 == True, but positive_only=1 is not a bool."""
    values = tuple(o for o in options if o is not None)
    return Param(type(values[0]), choices=values, optional=None in options)


# Every metric parameter, declared once (``core.params``): one meaning per name across
# metrics, checked when a metric is resolved (``resolve``), so a bad value stops a run
# before anything is trained or explained. A test checks that every registered
# parameter has an entry.
PARAMS: dict[str, Param] = {
    "bins": Param(float, low=0, high=1, low_open=True, tuple_of=True,
                  text="one or more fractions in (0, 1], comma-separated"),
    "rounding": _choice(*ROUNDINGS),
    "eraser": _choice(*ERASERS),
    "granularity": _choice(*GRANULARITIES),
    "ties": _choice(*TIES),
    "segment": Param(int, choices=(0, 1), optional=True,
                     text="None | 0 | 1 (premise / hypothesis)"),
    "k_max": Param(int, low=1, text="int >= 1"),
    "positive_only": _choice(None, True, False),
    "distinct": _choice(None, True, False),
    "if_empty": Param(float, optional=True, text="None | a number"),
    "k_frac": Param(float, low=0, high=1, low_open=True, optional=True,
                    text="None | a fraction in (0, 1]"),
    "links": _choice(None, *LINKS),
    "fraction": Param(float, low=0, high=1, low_open=True, optional=True,
                      text="None | a fraction in (0, 1] (with links=threshold)"),
    "ratio": Param(float, low=0, high=1, text="a fraction in [0, 1]"),
    "mask": _choice(*MASKS),
    "depth": DEPTH,
    "layer": Param(str, text="a layer group of the task's model, e.g. out, attention, "
                             "encoder, embedding, layer_0 (the groups are listed when "
                             "one is not found)"),
    "absolute": _choice(True, False),
    "n_samples": Param(int, low=1, text="int >= 1 (mask draws per example)"),
    "seed": Param(int, low=0, text="int >= 0 (seeds each example's masks with its id)"),
    "kept": Param(float, low=0, high=1, low_open=True, optional=True,
                  text="None | a fraction in (0, 1] (expected share of units kept)"),
    "normalized": _choice(True, False),
    "score_map": _choice(*SCORE_MAPS),
    "alpha": Param(float, low=0, high=1, low_open=True,
                   text="a fraction in (0, 1] (F-Fidelity: erasure rate inside the region)"),
    "beta": Param(float, low=0, high=1, low_open=True,
                  text="a fraction in (0, 1] (F-Fidelity: cap on the share of tokens erased)"),
    "samples": Param(int, low=1, text="int >= 1 (random draws per size; in Python, "
                     "samples=None takes every subset, exactly)"),
    "measure": _choice(*MEASURES),
    "search": _choice("beam", "exact"),
    "beam_size": Param(int, low=1, text="int >= 1"),
    "max_exact": Param(int, low=1, high=20, text="int in [1, 20]"),
    "if_flat": Param(float, optional=True, text="None | a number"),
}


def _keys(metric: SimpleMetric) -> list[str]:
    return [k for k, _ in metric.spec.params]


def settable(metric: SimpleMetric) -> str:
    """``key: type; ...`` of a metric's parameters, for error messages.

    >>> settable(get_metric("flip_rate"))
    'eraser: delete | mask | pad | retokenize; segment: None | 0 | 1 (premise / hypothesis); granularity: None | word | subword'
    """
    return params.listing(PARAMS, _keys(metric))


def check_params(metric: SimpleMetric) -> SimpleMetric:
    """Every parameter value of ``metric`` passes its declaration, else an InputError
    naming it and listing the settable parameters with their types."""
    params.check("metric", metric.spec.name, dict(metric.spec.params), PARAMS, _keys(metric))
    return metric


def get_metric(name: str) -> SimpleMetric:
    """The registered metric ``name``; an unknown name raises with "did you mean"."""
    return REGISTRY.get(name)


# The version of each ranking metric from which equal scores are ordered at random,
# seeded by the example's id (``faithbench.benchmark.core.ranking``); its versions before
# ordered them by position, earlier first. The site's metric cards say which applies.
TIES_SEEDED_FROM = {"aopc_morf": 2, "aopc_lerf": 2, "comprehensiveness": 2, "sufficiency": 2,
                    "flip_rate": 3, "flip_fraction": 3, "naopc_comprehensiveness": 2,
                    "naopc_sufficiency": 2, "ffidelity_plus": 2, "ffidelity_minus": 2,
                    "segment_share": 3, "r_precision": 3, "average_precision": 3,
                    "token_f1": 4, "token_f1_micro": 3, "mean_rank": 2}


def tie_rule(metric_id: str) -> str | None:
    """How ``metric_id`` ordered equal scores; None for a metric that ranks nothing.

    >>> tie_rule("comprehensiveness[eraser=mask]@2"), tie_rule("flip_rate@2"), tie_rule("auprc@3")
    ("a random order seeded by the example's id", 'by position, earlier first', None)
    """
    name, version = ids.short_name(metric_id), metric_id.rpartition("@")[2]
    seeded = TIES_SEEDED_FROM.get(name)
    if seeded is None or not version.isdigit():
        return None
    return ("a random order seeded by the example's id" if int(version) >= seeded
            else "by position, earlier first")


# Run only when asked for by name (``--metrics``; ``faithbench meta-eval`` asks for all):
# NAOPC's bounds cost a beam search per example (about 50x aopc_morf's forwards), the
# soft metrics draw masks of embeddings, and mean_rank reads a planted ground truth.
# Default runs, and so the published suites, keep the metric set they had.
BY_NAME_ONLY = frozenset({"mean_rank", "naopc_comprehensiveness", "naopc_sufficiency",
                          "soft_comprehensiveness", "soft_sufficiency"})


def default_metrics(kind: str, has_reference: bool) -> list[SimpleMetric]:
    """Registered metrics that apply to task ``kind``, in registration order;
    reference-needing (plausibility) metrics only if the task has references. Metrics
    that retrain models (ROAR, ``randomization_data``, F-Fidelity) run only when asked
    for by name: each costs a training; so do the other sanity checks, each an
    explanation pass more per explainer (``--metrics randomization_cascading``), and
    ``BY_NAME_ONLY``."""
    if kind not in TASK_KINDS:
        raise UnknownNameError(f"unknown task kind {kind!r} (known: {', '.join(TASK_KINDS)})")
    return [
        metric
        for _, metric in REGISTRY.items()
        if kind in metric.spec.kinds and (has_reference or not metric.spec.needs_reference)
        and not metric.spec.needs_training and not metric.spec.needs_explainer
        and metric.spec.name not in BY_NAME_ONLY
    ]


def with_params(metric: SimpleMetric, **changes: Any) -> SimpleMetric:
    """A new frozen metric with some params changed (e.g. ``eraser="mask"``), each
    checked against its declaration; ``metric`` is left as it was. Lists and single
    values of a tuple parameter become tuples, so the spec stays hashable and its id
    parses back to it.

    >>> with_params(get_metric("comprehensiveness"), bins=[0.1, 0.5], eraser="mask").spec.id
    'comprehensiveness[bins=0.1,0.5;eraser=mask;rounding=ceil]@2'
    >>> with_params(get_metric("comprehensiveness"), bins=0.5).spec.param("bins")
    (0.5,)
    """
    values = params.check("metric", metric.spec.name, changes, PARAMS, _keys(metric),
                          dict(metric.spec.params))
    spec = dataclasses.replace(metric.spec, params=tuple({**dict(metric.spec.params),
                                                          **values}.items()))
    return dataclasses.replace(metric, spec=spec)


def resolve(ref: str) -> SimpleMetric:
    """A metric from a name or a name with parameters, as in canonical ids:
    ``comprehensiveness``, ``comprehensiveness[segment=0;eraser=mask]`` (a trailing
    ``@version`` must match the registered one). Parameter values are checked here,
    before any work.

    >>> resolve("flip_rate[segment=1]").spec.id
    'flip_rate[eraser=delete;segment=1]@3'
    >>> resolve("sufficiency[bins=0.1,0.5]").spec.param("bins")
    (0.1, 0.5)
    >>> resolve("sufficiency[bins=0.5]").spec.param("bins")
    (0.5,)
    """
    parsed = ids.parse_id(ref, "metric")
    metric = get_metric(parsed.name)
    given = dict(parsed.params)
    if "preset" in given:
        given = {**preset(metric.spec.name, given.pop("preset")), **given}
    if parsed.version and parsed.version != metric.spec.version:
        raise InputError(f"metric {ref!r}: version {parsed.version} requested, "
                         f"{metric.spec.version} registered")
    values = params.check("metric", ref, given, PARAMS, _keys(metric), dict(metric.spec.params))
    return check_params(with_params(metric, **values) if values else metric)


def preset(metric: str, name) -> dict[str, Any]:
    """The parameters of preset ``name`` for ``metric``.

    >>> resolve("sufficiency[preset=ferret]").spec.param("if_empty")
    1.0
    """
    if name not in PRESETS:
        raise InputError(f"metric {metric!r}: unknown preset {name!r} (known: {', '.join(PRESETS)})")
    if metric not in PRESETS[name]:
        raise InputError(f"metric {metric!r} has no {name} preset (it has: "
                         f"{', '.join(PRESETS[name])})")
    return PRESETS[name][metric]
