"""Result records of a session's units: the estimate (mean and CI) of a metric's
per-example values, and the provenance every record carries.

One builder for the records of a run's units (``record``); alignments scored from a
file and agreement records take their provenance from the same functions.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from faithbench.benchmark.core.device import Placement
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.provenance import environment
from faithbench.benchmark.core.records import Provenance, ResultRecord, Timing
from faithbench.benchmark.core.stats import (
    Estimate,
    ZeroDenominator,
    as_estimate,
    bootstrap,
    corpus_bootstrap,
)
from faithbench.benchmark.plan import Unit

if TYPE_CHECKING:
    from faithbench.benchmark.explanations import Explained
    from faithbench.benchmark.scoring import Scored
    from faithbench.benchmark.session import EvaluationSession


def estimate(metric, scored: Scored, *, seed: int, what: str) -> Estimate:
    """Mean and bootstrap CI over the examples that define the metric, or for a
    corpus-level metric the aggregated statistics with a bootstrap that re-aggregates
    resamples. A NaN value is undefined (e.g. ``taucorr_loo`` on a constant score
    vector): left out of n and the CI, and counted in ``undefined``."""
    if metric.spec.aggregation is not None:
        try:
            return as_estimate(corpus_bootstrap(scored.stats, metric.spec.aggregation,
                                                seed=seed))
        except ZeroDenominator as exc:  # say which metric and where
            raise InputError(f"metric {metric.spec.id} is undefined on {what}: {exc}") from None
    undefined = np.isnan(scored.values)
    if len(undefined) and undefined.all():
        raise InputError(f"metric {metric.spec.id} is undefined (NaN) on all "
                         f"{len(undefined)} examples of {what}; there is no mean to report")
    return replace(bootstrap(scored.values[~undefined], seed=seed),
                   undefined=int(undefined.sum()))


def provenance(session: EvaluationSession, *, seeds: dict[str, int], **config: Any
               ) -> Provenance:
    """What a record says about the session's model: code and environment, data
    fingerprint, weights hash (``checkpoint``), cache key, accuracy per split, seeds, and
    ``config``: the unit's own evaluation options (not the run's lists, output folder,
    notes or workers: a unit's provenance is the same whichever run computed it), the
    model's config, and ``config``'s other parts (the explainer and metric specs)."""
    p = session.prepared
    where = Placement(session.config.device, session.config.precision).describe()
    report = session.report
    return Provenance(**environment(), device=where, data_fingerprint=p.data_fingerprint,
                      checkpoint=p.checkpoint, cache_key=p.cache_key, model_accuracy=p.accuracy,
                      config={"run": session.config.evaluation.as_dict(), "task": p.config,
                              **config},
                      seeds=seeds, model=None if report is None else report.as_dict())


def record(session: EvaluationSession, unit: Unit, explainer, metric, scored: Scored,
           explained: Explained) -> ResultRecord:
    """The result record of one unit (its per-example rows: ``per_example_rows``)."""
    est = estimate(metric, scored, seed=session.seeds.bootstrap, what=session.spec.id)
    return ResultRecord.build(
        metric.spec, est,
        key=unit.key,
        task=session.spec.id,
        model_seed=session.seed,
        explainer=explainer.spec.id,
        split=unit.split,
        per_example_file=f"per_example/{unit.key}.jsonl",
        provenance=provenance(session, explainer=spec_dict(explainer.spec),
                              metric=dict(metric.spec.params),
                              **explanations_file(session, explainer),
                              seeds={**session.seeds.as_dict(),
                                     "bootstrap": est.bootstrap_seed}),
        timing=Timing(explain_s=explained.seconds, metric_s=scored.seconds,
                      rows_forwarded=scored.rows_forwarded,
                      rows_requested=scored.rows_requested,
                      n_examples=len(session.examples),
                      explain_forward_rows=explained.cost.forward_rows,
                      explain_backward_rows=explained.cost.backward_rows,
                      explain_forward_equivalents=explained.cost.forward_equivalents,
                      explain_peak_mib=explained.cost.peak_mib,
                      explain_peak_method=explained.cost.peak_method,
                      explain_requested_rows=explained.cost.requested_rows),
        extra={name: int(flag.sum()) for name, flag in scored.flags.items()},
    )


def explanations_file(session: EvaluationSession, explainer) -> dict:
    """``{"explanations": path}``: the cached explanations the unit scored, relative to
    the run's folder (the site's example explorer reads them); none off a split."""
    if session.split is None:
        return {}
    path = session.explanations_path(explainer)
    return {"explanations": str(path.relative_to(session.config.out))}


def spec_dict(spec) -> dict:
    return {"id": spec.id, "name": spec.name, "version": spec.version,
            "requires": sorted(spec.requires), "params": dict(spec.params),
            "deterministic": spec.deterministic, "citation": spec.citation,
            "description": getattr(spec, "description", ""), "cost": getattr(spec, "cost", "")}
