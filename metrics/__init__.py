"""Metrics: one module per family, every metric one frozen ``SimpleMetric`` value.

``REGISTRY`` is filled by the explicit ``add`` calls below (registry key = spec name);
``get_metric`` looks one up, ``default_metrics`` lists those that apply to a task
kind, and ``with_params`` makes a parametrized variant as a new frozen value.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from benchmark.core.api import SimpleMetric
from benchmark.core.errors import InputError, UnknownNameError
from benchmark.core.names import TASK_KINDS
from benchmark.core.registry import Registry
from metrics.alignment import AER_METRIC, PRECISION_METRIC, RECALL_METRIC
from metrics.erasure import AOPC_LERF, AOPC_MORF
from metrics.flip import FLIP_FRACTION, FLIP_RATE
from metrics.plausibility import AUPRC, AVERAGE_PRECISION, R_PRECISION, TOKEN_F1, TOKEN_F1_MICRO
from metrics.rationale import COMPREHENSIVENESS, SUFFICIENCY
from metrics.roar import ROAR
from metrics.share import SEGMENT_SHARE

REGISTRY: Registry[SimpleMetric] = Registry("metric")
REGISTRY.add(AOPC_MORF.spec.name, AOPC_MORF)
REGISTRY.add(AOPC_LERF.spec.name, AOPC_LERF)
REGISTRY.add(COMPREHENSIVENESS.spec.name, COMPREHENSIVENESS)
REGISTRY.add(SUFFICIENCY.spec.name, SUFFICIENCY)
REGISTRY.add(FLIP_RATE.spec.name, FLIP_RATE)
REGISTRY.add(FLIP_FRACTION.spec.name, FLIP_FRACTION)
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
        params[key] = tuple(value) if isinstance(value, list) else value
    spec = dataclasses.replace(metric.spec, params=tuple(params.items()))
    return dataclasses.replace(metric, spec=spec)


def resolve(ref: str) -> SimpleMetric:
    """A metric from a name or a name with parameters, as in canonical ids:
    ``comprehensiveness``, ``comprehensiveness[segment=0;eraser=mask]`` (a trailing
    ``@version`` must match the registered one).

    >>> resolve("flip_rate[segment=1]").spec.id
    'flip_rate[eraser=delete;segment=1]@2'
    >>> resolve("sufficiency[bins=0.1,0.5]").spec.param("bins")
    (0.1, 0.5)
    """
    name, _, version = ref.partition("@")
    params: dict[str, Any] = {}
    if "[" in name:
        if not name.endswith("]"):
            raise InputError(f"metric {ref!r}: expected name[key=value;...]")
        name, inner = name[:-1].split("[", 1)
        for item in filter(None, inner.split(";")):
            key, eq, value = item.partition("=")
            if not eq:
                raise InputError(f"metric {ref!r}: parameter {item!r} is not key=value")
            params[key.strip()] = _parse_value(value.strip())
    metric = get_metric(name)
    if version and version != metric.spec.version:
        raise InputError(f"metric {ref!r}: version {version} requested, "
                         f"{metric.spec.version} registered")
    return with_params(metric, **params) if params else metric


def _parse_value(text: str):
    if "," in text:
        return tuple(_parse_value(t) for t in text.split(","))
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None if text == "None" else text
