"""The pipeline, top to bottom: plan -> session (task, model, base predictions) ->
explainer -> metrics -> result records -> leaderboard entries.

"Done" is defined by outputs: a unit is complete if and only if its result line
exists in ``results.jsonl`` (per-example values are written first, atomically),
so an interrupted run — even ``kill -9`` — resumes exactly: finished units are
skipped and none is written twice. Explanations are cached per (model,
explainer) the same way, so a resumed run does not explain again.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import shutil
import time
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path

import metrics as metric_registry
import submissions
from benchmark import plan
from benchmark.core.api import Explainer, capabilities
from benchmark.core.errors import InputError, PluginError
from benchmark.core.plugins import load_explainer
from benchmark.core.records import (
    FailureRecord,
    ResultRecord,
    append_jsonl,
    read_jsonl,
    read_results,
    write_jsonl_atomic,
)
from benchmark.plan import RunConfig
from benchmark.session import EvaluationSession, open_session, per_example_rows

log = logging.getLogger(__name__)


@dataclass
class RunSummary:
    out: Path
    results: list[ResultRecord] = field(default_factory=list)  # every result of this run's units
    computed: int = 0  # units computed now (the rest were already done)
    skipped: int = 0
    failures: list[FailureRecord] = field(default_factory=list)
    accuracy: dict = field(default_factory=dict)
    entries: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    rows_requested: int = 0  # perturbed rows the metrics asked for
    rows_forwarded: int = 0  # distinct rows that went through a model

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0


def configured(ref: str):
    """A reference explainer with parameters, as in its canonical id:
    ``attention[layer=0;heads=max]``, ``integrated_gradients[n_steps=20]``.

    >>> configured("attention[heads=max;layer=-2]").spec.id
    'attention[heads=max;layer=-2]@1'
    """
    name, params = metric_registry.parse_params(ref, "explainer")  # one syntax for both
    explainer = submissions.get_explainer(name)
    fields = {f.name for f in dataclasses.fields(explainer) if f.init}
    unknown = sorted(set(params) - fields)
    if unknown:
        raise InputError(f"explainer {name!r} has no parameter {unknown[0]!r} "
                         f"(settable: {', '.join(sorted(fields)) or 'none'})")
    try:
        return dataclasses.replace(explainer, **params)
    except (TypeError, ValueError) as exc:
        raise InputError(f"explainer {ref!r}: {exc}") from exc


def resolve_explainer(ref: str) -> Explainer:
    """A reference name (``gradient``) or any plugin reference (path, module, entry point)."""
    if ref in submissions.REGISTRY:
        return submissions.get_explainer(ref)
    if "[" in ref and ref.split("[", 1)[0] in submissions.REGISTRY:  # e.g. attention[layer=0]
        return configured(ref)
    try:
        return load_explainer(ref)
    except PluginError as exc:
        close = difflib.get_close_matches(ref, submissions.REFERENCE, n=3)
        if close and exc.stage == "load" and not ref.endswith(".py"):
            hint = ", ".join(map(repr, close))
            raise PluginError(ref, "load", f"{exc.problem}; did you mean {hint}?") from None
        raise


def run(config: RunConfig) -> RunSummary:
    """Run every (task, seed, explainer, metric) unit not already done."""
    start = time.perf_counter()
    out = Path(config.out)
    if config.fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    summary = RunSummary(out)
    explainers, load_failures = _load_explainers(config)
    summary.failures += load_failures
    for f in load_failures:
        append_jsonl(out / "failures.jsonl", f.as_dict())
    done = {r.key: r for r in read_results(out / "results.jsonl")}
    for task_name, seed in plan.models(config):
        session = open_session(task_name, config, seed)
        summary.accuracy[f"{session.spec.id}/seed={seed}"] = session.prepared.accuracy
        _run_session(session, explainers, done, summary)
        summary.rows_requested += session.perturber.rows_requested
        summary.rows_forwarded += session.perturber.rows_forwarded
    if config.write_leaderboard:
        summary.entries = write_entries(config, summary)
    summary.seconds = time.perf_counter() - start
    return summary


def record_failure(out: Path, exc: PluginError, task: str, explainer: str,
                   seed: int | None) -> FailureRecord:
    """Log a plugin failure and append it to ``failures.jsonl`` (never to results)."""
    log.error("%s", exc)
    failure = FailureRecord(task=task, explainer=explainer, stage=exc.stage, message=str(exc),
                            example_ids=list(exc.example_ids), model_seed=seed)
    append_jsonl(out / "failures.jsonl", failure.as_dict())
    return failure


def _load_explainers(config: RunConfig):
    refs = config.explainers or submissions.REFERENCE
    loaded, failures = [], []
    for ref in refs:
        try:
            loaded.append(resolve_explainer(ref))
        except PluginError as exc:
            log.error("%s", exc)
            failures.append(FailureRecord(task="*", explainer=ref, stage="load", message=str(exc)))
    return loaded, failures


def serviceable(explainers, model, task_id: str) -> list:
    """The explainers whose required capabilities the model offers; the rest are left
    out with a log line (named explicitly, they are refused by ``plugin_caller``)."""
    have = capabilities(model)
    kept = [e for e in explainers if e.spec.requires <= have]
    for e in explainers:
        if e not in kept:
            log.info("%s: %s needs %s, which this model does not offer; left out", task_id,
                     e.spec.name, ", ".join(sorted(e.spec.requires - have)))
    return kept


def metrics_for(spec, names):
    """Named metrics (``name`` or ``name[key=value;...]``), else every one for the task."""
    if names:
        return [metric_registry.resolve(n) for n in names]
    return metric_registry.default_metrics(spec.kind, spec.has_reference)


def _run_session(session: EvaluationSession, explainers, done, summary) -> None:
    """Walk the units of one model: explain once per explainer, then score its metrics."""
    config, out = session.config, Path(session.config.out)
    metrics = {m.spec.id: m for m in session.applicable(metrics_for(session.spec, config.metrics))}
    if not config.explainers:  # the default set: only those this model can serve
        explainers = serviceable(explainers, session.prepared.model, session.spec.id)
    by_id = {e.spec.id: e for e in explainers}
    units = plan.units(config, session.spec.name, session.seed, session.prepared.checkpoint,
                       session.split, list(by_id), list(metrics))
    for explainer_id, group in groupby(units, key=lambda u: u.explainer):
        group = list(group)
        todo = [u for u in group if u.key not in done]
        summary.results += [done[u.key] for u in group if u.key in done]
        summary.skipped += len(group) - len(todo)
        if not todo:
            continue
        explainer = by_id[explainer_id]
        try:
            explained = session.explain(explainer)
        except PluginError as exc:
            summary.failures.append(record_failure(out, exc, session.spec.id, explainer_id,
                                                   session.seed))
            continue
        for unit in todo:
            metric = metrics[unit.metric]
            scored = session.score(metric, explained.scores, explainer=explainer)
            record = session.record(unit, explainer, metric, scored, explained)
            write_jsonl_atomic(out / record.per_example_file, per_example_rows(scored))
            append_jsonl(out / "results.jsonl", record.as_dict())
            done[unit.key] = record
            summary.results.append(record)
            summary.computed += 1


def write_entries(config: RunConfig, summary: RunSummary) -> list[Path]:
    """One leaderboard entry per explainer whose every unit succeeded in this run.

    An entry holds all of the explainer's results in the results file for the same
    suite (task, model checkpoint, split, example limit), so a run that adds metrics
    extends the entry instead of replacing it with the new metrics alone.
    """
    from leaderboard.entry import write_entry

    failed = {f.explainer for f in summary.failures}
    suites = {(r.explainer, _suite_key(r)) for r in summary.results}
    by_explainer: dict[str, list[ResultRecord]] = {}
    for r in read_results(summary.out / "results.jsonl"):
        if r.explainer not in failed and (r.explainer, _suite_key(r)) in suites:
            by_explainer.setdefault(r.explainer, []).append(r)
    paths = []
    for records in by_explainer.values():
        per_example = []
        for r in records:
            for row in read_jsonl(summary.out / r.per_example_file):
                per_example.append({"task": r.task, "model_seed": r.model_seed, "metric": r.metric,
                                    **row})
        spec = records[0].provenance["config"]["explainer"]
        paths.append(write_entry(summary.out / "leaderboard", explainer_spec=spec,
                                 results=[r.as_dict() for r in records], per_example=per_example,
                                 notes=config.notes))
    return paths


def _suite_key(r: ResultRecord) -> tuple:
    return (r.task, r.model_seed, r.provenance["checkpoint"], r.split,
            r.provenance["config"]["run"]["limit"])
