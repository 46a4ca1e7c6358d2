"""The pipeline, top to bottom: task -> model -> base predictions -> explainer ->
metrics -> result records -> leaderboard entries.

"Done" is defined by outputs: a unit is complete if and only if its result line
exists in ``results.jsonl`` (per-example values are written first, atomically),
so an interrupted run — even ``kill -9`` — resumes exactly: finished units are
skipped and none is written twice. Explanations are cached per (model,
explainer) the same way, so a resumed run does not explain again.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import metrics as metric_registry
import submissions
import tasks as task_registry
from benchmark.core.api import Explainer
from benchmark.core.errors import PluginError
from benchmark.core.perturb import Perturber
from benchmark.core.plugins import load_explainer
from benchmark.core.provenance import environment
from benchmark.core.records import (
    FailureRecord,
    ResultRecord,
    append_jsonl,
    read_jsonl,
    read_results,
    write_jsonl_atomic,
)
from benchmark.core.stats import bootstrap
from benchmark.plan import RunConfig, unit_key
from benchmark.scoring import base_probs, explain, score, with_reference
from tasks.classification import TaskOptions

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

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0


def resolve_explainer(ref: str) -> Explainer:
    """A reference name (``gradient``) or any plugin reference (path, module, entry point)."""
    if ref in submissions.REFERENCE:
        return load_explainer(submissions.reference_module(ref))
    return load_explainer(ref)


def task_options(config: RunConfig, seed: int) -> TaskOptions:
    return TaskOptions(data_dir=config.data_dir, seed=seed, train_limit=config.train_limit,
                       variant=config.variant, epochs=config.epochs)


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
    for task_name in config.tasks:
        task = task_registry.get_task(task_name)
        metrics = _metrics_for(task.spec, config.metrics)
        for seed in config.seeds:
            ready = task.prepare(task_options(config, seed), progress=config.progress)
            summary.accuracy[f"{task.spec.id}/seed={seed}"] = ready.accuracy
            _run_model(config, ready, seed, explainers, metrics, done, summary)
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


def _metrics_for(spec, names):
    """Named metrics (``name`` or ``name[key=value;...]``), else every one for the task."""
    if names:
        return [metric_registry.resolve(n) for n in names]
    return metric_registry.default_metrics(spec.kind, spec.has_reference)


def _run_model(config, ready, seed, explainers, metrics, done, summary) -> None:
    out = Path(config.out)
    split = config.split or ready.spec.eval_split
    examples = ready.examples(split, config.limit)
    if not with_reference(examples):  # e.g. the hub copy of a task whose rationales are local
        skipped = [m.spec.name for m in metrics if m.spec.needs_reference]
        if skipped:
            log.warning("%s: no example has a reference rationale; skipping %s",
                        ready.spec.id, ", ".join(skipped))
        metrics = [m for m in metrics if not m.spec.needs_reference]
    perturber = Perturber(ready.model, chunk_size=config.chunk_size)
    probs = None  # computed lazily, once per model, shared by every explainer and metric
    for explainer in explainers:
        keys = {m.spec.id: unit_key(ready.checkpoint, explainer.spec.id, m.spec.id, split, config.limit)
                for m in metrics}
        todo = [m for m in metrics if keys[m.spec.id] not in done]
        summary.results += [done[k] for k in keys.values() if k in done]
        summary.skipped += len(metrics) - len(todo)
        if not todo:
            continue
        if probs is None:
            probs = base_probs(ready, examples, perturber, config.batch_size)
        targets = probs.argmax(dim=-1)
        try:
            explained = explanations_for(config, ready, seed, explainer, examples, targets, split)
        except PluginError as exc:
            summary.failures.append(record_failure(out, exc, ready.spec.id, explainer.spec.id, seed))
            continue
        for metric in todo:
            key = keys[metric.spec.id]
            scored = score(metric, ready, examples, explained["scores"], targets, probs, perturber,
                           batch_size=config.batch_size, progress=config.progress)
            record = _record(config, ready, seed, explainer, metric, split, key, examples,
                             scored, explained)
            write_jsonl_atomic(out / record.per_example_file,
                               [{"id": i, "value": float(v)} for i, v in zip(scored.ids, scored.values)])
            append_jsonl(out / "results.jsonl", record.as_dict())
            done[key] = record
            summary.results.append(record)
            summary.computed += 1


def explanations_for(config, ready, seed, explainer, examples, targets, split) -> dict:
    """``{"scores", "seconds"}`` of one explainer on ``examples``, cached per (model,
    explainer, split, limit): a resumed run, or another verb on the same ``--out``,
    does not explain again."""
    key = unit_key(ready.checkpoint, explainer.spec.id, "explanations", split, config.limit)
    path = Path(config.out) / "explanations" / f"{ready.spec.name}-{explainer.spec.name}-{key}.jsonl"
    rows = read_jsonl(path)
    if rows and len(rows) == len(examples):
        return {"scores": [r["scores"] for r in rows], "seconds": rows[0].get("seconds", 0.0)}
    result = explain(explainer, ready, examples, targets, batch_size=config.batch_size, seed=seed,
                     time_budget_s=config.time_budget_s, progress=config.progress,
                     isolation=config.isolation)
    write_jsonl_atomic(path, [
        {"id": e.id, "tokens": list(e.tokens), "scores": s, "target": t, "seconds": result.seconds}
        for e, s, t in zip(examples, result.scores, result.targets)
    ])
    return {"scores": result.scores, "seconds": result.seconds}


def _record(config, ready, seed, explainer, metric, split, key, examples, scored, explained):
    estimate = bootstrap(scored.values)
    extra = {name: int(flag.sum()) for name, flag in scored.flags.items()}
    return ResultRecord(
        key=key,
        task=ready.spec.id,
        model_seed=seed,
        explainer=explainer.spec.id,
        metric=metric.spec.id,
        family=metric.spec.family,
        direction=metric.spec.direction,
        split=split,
        estimate=estimate.as_dict(),
        per_example_file=f"per_example/{key}.jsonl",
        provenance={
            **model_provenance(ready),
            "config": {"run": {k: v for k, v in config.as_dict().items() if k != "progress"},
                       "task": ready.config, "explainer": _spec_dict(explainer.spec),
                       "metric": dict(metric.spec.params)},
            "seeds": {"model": seed, "explainer": seed, "bootstrap": estimate.bootstrap_seed},
        },
        timing={"explain_s": explained["seconds"], "metric_s": scored.seconds,
                "rows_forwarded": scored.rows_forwarded, "n_examples": len(examples)},
        extra=extra,
    )


def model_provenance(ready) -> dict:
    """What every record says about the model it used: code and environment, data
    fingerprint, weights hash (``checkpoint``), cache key, and accuracy per split."""
    return {**environment(), "data_fingerprint": ready.data_fingerprint,
            "checkpoint": ready.checkpoint, "cache_key": ready.cache_key,
            "model_accuracy": ready.accuracy}


def _spec_dict(spec) -> dict:
    return {"id": spec.id, "name": spec.name, "version": spec.version,
            "requires": sorted(spec.requires), "params": dict(spec.params),
            "deterministic": spec.deterministic, "citation": spec.citation}


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
                                    "id": row["id"], "value": row["value"]})
        spec = records[0].provenance["config"]["explainer"]
        paths.append(write_entry(summary.out / "leaderboard", explainer_spec=spec,
                                 results=[r.as_dict() for r in records], per_example=per_example,
                                 notes=config.notes))
    return paths


def _suite_key(r: ResultRecord) -> tuple:
    return (r.task, r.model_seed, r.provenance["checkpoint"], r.split,
            r.provenance["config"]["run"]["limit"])
