"""``run`` on an executor (``--executor pool|ray``): the in-process run's units, as jobs.

Two stages. Models: every (task, seed) model that this machine's cache lacks is
trained as a job (``core.retrain.train_job``; its file comes back into the driver's
cache), so the seeds train side by side. Units: one job per (model, explainer) with
units left to compute. The worker loads the model, takes the cached explanations or
explains, scores the units' metrics and sends back the result records, their
per-example rows and any explanations it computed; the driver stores those in its
explanation cache and writes each unit as the in-process run does (per-example file
first, then the result line), under the same claims. So a killed worker loses only
its job, and a killed driver resumes like any run.

Results equal the in-process run's up to float32 rounding: the same keys and the same
computations, but a worker's perturbation engine shares variants only within its own
job, so a variant may be forwarded in another chunk of rows than in one process.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

from faithbench import tasks as task_registry
from faithbench.benchmark import plan
from faithbench.benchmark.core.api import Explainer
from faithbench.benchmark.core.claims import claim
from faithbench.benchmark.core.errors import InputError, PluginError
from faithbench.benchmark.core.records import (
    FailureRecord,
    ResultRecord,
    append_jsonl,
    write_jsonl_atomic,
)
from faithbench.benchmark.core.retrain import TrainJob, keep, train_job
from faithbench.benchmark.plan import Evaluation, Execution, RunConfig, Unit
from faithbench.benchmark.session import (
    EvaluationSession,
    Explained,
    confinement,
    open_session,
    per_example_rows,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UnitsJob:
    """One explainer's units on one model: what a worker needs, and no more."""

    task: str
    seed: int
    evaluation: Evaluation
    execution: Execution  # in-process: a unit's own jobs (the ROAR metric) stay here
    out: str
    explainer: str  # the reference as the run was given it (a name, id, path or module)
    units: tuple[Unit, ...]


@dataclass
class UnitsDone:
    """What a worker sends back: the explanations it computed (None: they were cached),
    each unit's record with its per-example rows, the failure that stopped the job, and
    the rows its engine was asked for and forwarded."""

    explained: Explained | None
    results: list[tuple[ResultRecord, list[dict]]] = field(default_factory=list)
    failures: list[FailureRecord] = field(default_factory=list)
    rows_requested: int = 0
    rows_forwarded: int = 0


# a worker's sessions, by (task, seed, evaluation, out): its later jobs on the same model
# reuse the model, the base predictions and the perturbation engine's memory
_SESSIONS: dict[tuple, EvaluationSession] = {}


def units_job(job: UnitsJob) -> UnitsDone:
    """Explain (unless cached) and score ``job.units`` on the worker."""
    from faithbench.benchmark.runner import metrics_for, resolve_explainer

    config = RunConfig.of(job.evaluation, job.execution, out=job.out)
    name = (job.task, job.seed, job.evaluation, job.out)
    if name not in _SESSIONS:
        _SESSIONS.clear()  # one model at a time: jobs come model by model
        _SESSIONS[name] = open_session(job.task, config, job.seed)
    session = _SESSIONS[name]
    requested, forwarded = session.perturber.rows_requested, session.perturber.rows_forwarded
    explainer = resolve_explainer(job.explainer, confinement(config))
    metrics = {m.spec.id: m for m in session.applicable(metrics_for(session.spec, config.metrics))}
    cached = session.cached(explainer)
    done = UnitsDone(None)
    try:
        explained = cached or session.explain(explainer, cache=False)
        done.explained = None if cached else explained
        for unit in job.units:
            scored = session.score(metrics[unit.metric], explained.scores, explainer=explainer)
            record = session.record(unit, explainer, metrics[unit.metric], scored, explained)
            done.results.append((record, per_example_rows(scored)))
    except PluginError as exc:  # the explainer's failure, reported like the run's own
        done.failures.append(FailureRecord(
            task=session.spec.id, explainer=explainer.spec.id, stage=exc.stage,
            message=str(exc), example_ids=list(exc.example_ids), model_seed=job.seed))
    done.rows_requested = session.perturber.rows_requested - requested
    done.rows_forwarded = session.perturber.rows_forwarded - forwarded
    return done


def train_models(config: RunConfig, executor) -> None:
    """Train every model of the run that this machine's cache lacks, as jobs."""
    jobs = []
    for task_name, seed in plan.models(config):
        task = task_registry.get_task(task_name)
        options = config.evaluation.task_options(seed)
        if options.model_path is None and hasattr(task, "model_file") \
                and not task.model_file(options).exists():
            jobs.append(TrainJob(task, options))
    if jobs:
        log.info("run: %d model(s) to train on %s", len(jobs), executor.name)
        executor.map(train_job, jobs, on_done=lambda _, trained: keep(trained))


def run_units(config: RunConfig, explainers: list, refs: dict[str, str], done: dict,
              summary, progress) -> None:
    """Every unit of the run not in ``done``, computed as jobs on ``config``'s executor
    and written here; results, failures and counts go into ``summary`` (``refs``: each
    explainer's id -> the reference the run was given, which a worker loads it by)."""
    from faithbench.benchmark.runner import group_claim, session_units

    if config.fresh:
        raise InputError("--fresh runs in-process only; drop --executor (or --fresh)")
    executor = config.execution.job_executor()
    train_models(config, executor)
    out = Path(config.out)
    jobs: list[UnitsJob] = []
    sessions: list[tuple[EvaluationSession, Explainer]] = []
    labels: list[tuple[str, str]] = []
    for i, (task_name, seed) in enumerate(plan.models(config)):
        session = open_session(task_name, config, seed)  # the model, from the cache
        summary.accuracy[f"{session.spec.id}/seed={seed}"] = session.prepared.accuracy
        units, _, by_id = session_units(session, explainers)
        progress.model(i, (u.key for u in units), done)
        for explainer_id, explainer in by_id.items():
            jobs.append(UnitsJob(task_name, seed, config.evaluation,
                                 replace(config.execution, executor="in-process"), str(out),
                                 refs[explainer_id],
                                 tuple(u for u in units if u.explainer == explainer_id)))
            sessions.append((session, explainer))
            labels.append(group_claim(session, explainer_id))
    with ExitStack() as claims:
        # another run into --out may be computing some of these: hold the claim of each
        # group with units to compute, then take what the others finished (as the
        # in-process run does, group by group)
        for job, (key, label) in zip(jobs, labels):
            if any(u.key not in done for u in job.units):
                claims.enter_context(claim(out, key, label))
        done.update({r.key: r for r in _finished(out)})
        pending = []
        for job in jobs:
            todo = tuple(u for u in job.units if u.key not in done)
            summary.results += [done[u.key] for u in job.units if u.key in done]
            summary.skipped += len(job.units) - len(todo)
            for u in job.units:
                if u.key in done:
                    progress.finish(u.key)
            pending.append(replace(job, units=todo))
        index = [i for i, job in enumerate(pending) if job.units]
        if index:
            log.info("run: %d job(s) of units on %s", len(index), executor.name)

        def arrived(j: int, result: UnitsDone) -> None:
            session, explainer = sessions[index[j]]
            if result.explained is not None:
                session.store(explainer, result.explained)
            for failure in result.failures:  # reported and kept out, as in-process
                log.error("%s", failure.message)
                append_jsonl(out / "failures.jsonl", failure.as_dict())
                summary.failures.append(failure)
            written = set()
            for record, rows in result.results:
                write_jsonl_atomic(out / record.per_example_file, rows)
                append_jsonl(out / "results.jsonl", record.as_dict())
                done[record.key] = record
                summary.results.append(record)
                summary.computed += 1
                progress.finish(record.key)
                written.add(record.key)
            for unit in pending[index[j]].units:
                if unit.key not in written:
                    progress.finish(unit.key, failed=True)
            summary.rows_requested += result.rows_requested
            summary.rows_forwarded += result.rows_forwarded

        executor.map(units_job, [pending[i] for i in index], on_done=arrived)


def _finished(out: Path) -> list[ResultRecord]:
    from faithbench.benchmark.runner import finished

    return list(finished(out).values())
