"""Metrics: one module per family, every metric one frozen ``SimpleMetric`` value.

``REGISTRY`` is filled by the explicit ``add`` calls below (registry key = spec name);
``get_metric`` looks one up, ``default_metrics`` lists those that apply to a task
kind, and ``with_params`` makes a parametrized variant as a new frozen value.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from faithbench.benchmark.core.api import SimpleMetric
from faithbench.benchmark.core.erasers import ERASERS
from faithbench.benchmark.core.errors import InputError, UnknownNameError
from faithbench.benchmark.core.links import LINKS
from faithbench.benchmark.core.names import TASK_KINDS
from faithbench.benchmark.core.registry import Registry
from faithbench.metrics.alignment import AER_METRIC, PRECISION_METRIC, RECALL_METRIC
from faithbench.metrics.erasure import AOPC_LERF, AOPC_MORF
from faithbench.metrics.flip import FLIP_FRACTION, FLIP_RATE
from faithbench.metrics.loo import TAUCORR_LOO
from faithbench.metrics.plausibility import (
    AUPRC,
    AVERAGE_PRECISION,
    R_PRECISION,
    TOKEN_F1,
    TOKEN_F1_MICRO,
)
from faithbench.metrics.rationale import COMPREHENSIVENESS, ROUNDINGS, SUFFICIENCY
from faithbench.metrics.roar import MASKS, ROAR
from faithbench.metrics.share import SEGMENT_SHARE
from faithbench.metrics.variants import GRANULARITIES, TIES

REGISTRY: Registry[SimpleMetric] = Registry("metric")
REGISTRY.add(AOPC_MORF.spec.name, AOPC_MORF)
REGISTRY.add(AOPC_LERF.spec.name, AOPC_LERF)
REGISTRY.add(COMPREHENSIVENESS.spec.name, COMPREHENSIVENESS)
REGISTRY.add(SUFFICIENCY.spec.name, SUFFICIENCY)
REGISTRY.add(FLIP_RATE.spec.name, FLIP_RATE)
REGISTRY.add(FLIP_FRACTION.spec.name, FLIP_FRACTION)
REGISTRY.add(TAUCORR_LOO.spec.name, TAUCORR_LOO)
REGISTRY.add(R_PRECISION.spec.name, R_PRECISION)
REGISTRY.add(AVERAGE_PRECISION.spec.name, AVERAGE_PRECISION)
REGISTRY.add(TOKEN_F1.spec.name, TOKEN_F1)
REGISTRY.add(AUPRC.spec.name, AUPRC)
REGISTRY.add(TOKEN_F1_MICRO.spec.name, TOKEN_F1_MICRO)
REGISTRY.add(SEGMENT_SHARE.spec.name, SEGMENT_SHARE)
REGISTRY.add(AER_METRIC.spec.name, AER_METRIC)
REGISTRY.add(PRECISION_METRIC.spec.name, PRECISION_METRIC)
REGISTRY.add(RECALL_METRIC.spec.name, RECALL_METRIC)
REGISTRY.add(ROAR.spec.name, ROAR)


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


def _number(value, low: float, high: float, *, low_open: bool, whole: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        return False
    return (low < value if low_open else low <= value) and value <= high


def _choice(*options):
    # by type too: 1 == True, but positive_only=1 is not a bool
    return (lambda v: any(type(v) is type(o) and v == o for o in options),
            " | ".join(map(str, options)))


# Every metric parameter: its declared type, and the check its value must pass when
# the metric is resolved (``resolve``), so a bad value stops a run before anything is
# trained or explained. One meaning per name across metrics; a test checks that every
# registered parameter has an entry.
PARAMS: dict[str, tuple[Any, str]] = {
    "bins": (lambda v: isinstance(v, tuple) and len(v) > 0
             and all(_number(b, 0, 1, low_open=True) for b in v),
             "one or more fractions in (0, 1], comma-separated"),
    "rounding": _choice(*ROUNDINGS),
    "eraser": _choice(*ERASERS),
    "granularity": _choice(*GRANULARITIES),
    "ties": _choice(*TIES),
    "segment": (lambda v: v is None or _number(v, 0, 1, low_open=False, whole=True),
                "None | 0 | 1 (premise / hypothesis)"),
    "k_max": (lambda v: _number(v, 1, float("inf"), low_open=False, whole=True),
              "int >= 1"),
    "positive_only": _choice(None, True, False),
    "distinct": _choice(None, True, False),
    "if_empty": (lambda v: v is None or _number(v, float("-inf"), float("inf"), low_open=True),
                 "None | a number"),
    "k_frac": (lambda v: v is None or _number(v, 0, 1, low_open=True),
               "None | a fraction in (0, 1]"),
    "links": _choice(None, *LINKS),
    "fraction": (lambda v: v is None or _number(v, 0, 1, low_open=True),
                 "None | a fraction in (0, 1] (with links=threshold)"),
    "ratio": (lambda v: _number(v, 0, 1, low_open=False), "a fraction in [0, 1]"),
    "mask": _choice(*MASKS),
}
# parameters that take several values: one value given alone is a list of one
_TUPLES = frozenset({"bins"})


def settable(metric: SimpleMetric) -> str:
    """``key: type; ...`` of a metric's parameters, for error messages.

    >>> settable(get_metric("flip_rate"))
    'eraser: delete | mask | pad | retokenize; segment: None | 0 | 1 (premise / hypothesis); granularity: None | word | subword'
    """
    return "; ".join(f"{k}: {PARAMS.get(k, (None, 'any'))[1]}" for k, _ in metric.spec.params)


def check_params(metric: SimpleMetric) -> SimpleMetric:
    """Every parameter value of ``metric`` passes its declared check, else an
    InputError naming it and listing the settable parameters with their types."""
    for key, value in metric.spec.params:
        check, kind = PARAMS.get(key, (lambda v: True, "any"))  # a test keeps PARAMS complete
        if not check(value):
            raise InputError(f"metric {metric.spec.name!r}: {key}={value!r} is not "
                             f"{kind} (settable: {settable(metric)})")
    return metric


def get_metric(name: str) -> SimpleMetric:
    """The registered metric ``name``; an unknown name raises with "did you mean"."""
    return REGISTRY.get(name)


def default_metrics(kind: str, has_reference: bool) -> list[SimpleMetric]:
    """Registered metrics that apply to task ``kind``, in registration order;
    reference-needing (plausibility) metrics only if the task has references. Metrics
    that retrain models (ROAR) run only when asked for by name: each costs a training."""
    if kind not in TASK_KINDS:
        raise UnknownNameError(f"unknown task kind {kind!r} (known: {', '.join(TASK_KINDS)})")
    return [
        metric
        for _, metric in REGISTRY.items()
        if kind in metric.spec.kinds and (has_reference or not metric.spec.needs_reference)
        and not metric.spec.needs_training
    ]


def with_params(metric: SimpleMetric, **changes: Any) -> SimpleMetric:
    """A new frozen metric with some params changed (e.g. ``eraser="mask"``);
    ``metric`` is left as it was. Lists become tuples so the spec stays hashable.

    >>> with_params(get_metric("comprehensiveness"), bins=[0.1, 0.5], eraser="mask").spec.id
    'comprehensiveness[bins=0.1,0.5;eraser=mask;rounding=ceil]@1'
    """
    params = dict(metric.spec.params)
    for key, value in changes.items():
        if key not in params:
            close = difflib.get_close_matches(key, params, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            known = ", ".join(params) or "none"
            raise InputError(
                f"metric {metric.spec.name!r} has no parameter {key!r}{hint} (known: {known})"
            )
        if isinstance(value, list) or (key in _TUPLES and isinstance(value, (int, float))):
            value = tuple(value) if isinstance(value, list) else (value,)
        params[key] = value
    spec = dataclasses.replace(metric.spec, params=tuple(params.items()))
    return dataclasses.replace(metric, spec=spec)


def resolve(ref: str) -> SimpleMetric:
    """A metric from a name or a name with parameters, as in canonical ids:
    ``comprehensiveness``, ``comprehensiveness[segment=0;eraser=mask]`` (a trailing
    ``@version`` must match the registered one). Parameter values are checked here
    (``check_params``), before any work.

    >>> resolve("flip_rate[segment=1]").spec.id
    'flip_rate[eraser=delete;segment=1]@2'
    >>> resolve("sufficiency[bins=0.1,0.5]").spec.param("bins")
    (0.1, 0.5)
    >>> resolve("sufficiency[bins=0.5]").spec.param("bins")
    (0.5,)
    """
    name, params = parse_params(ref)
    name, _, version = name.partition("@")
    metric = get_metric(name)
    if "preset" in params:
        params = {**preset(metric.spec.name, params.pop("preset")), **params}
    if version and version != metric.spec.version:
        raise InputError(f"metric {ref!r}: version {version} requested, "
                         f"{metric.spec.version} registered")
    return check_params(with_params(metric, **params) if params else metric)


def parse_params(ref: str, what: str = "metric") -> tuple[str, dict[str, Any]]:
    """``name[key=value;...]@version`` -> (``name@version``, {key: value}).

    >>> parse_params("aopc_morf[k_max=5;eraser=mask]@1")
    ('aopc_morf@1', {'k_max': 5, 'eraser': 'mask'})
    """
    head, _, version = ref.partition("@")
    params: dict[str, Any] = {}
    if "[" in head:
        if not head.endswith("]"):
            raise InputError(f"{what} {ref!r}: expected name[key=value;...]")
        head, inner = head[:-1].split("[", 1)
        for item in filter(None, inner.split(";")):
            key, eq, value = item.partition("=")
            if not eq:
                raise InputError(f"{what} {ref!r}: parameter {item!r} is not key=value")
            params[key.strip()] = _parse_value(value.strip())
    return head + (f"@{version}" if version else ""), params


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


def _parse_value(text: str):
    if "," in text:
        return tuple(_parse_value(t) for t in text.split(","))
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"None": None, "True": True, "False": False}.get(text, text)
