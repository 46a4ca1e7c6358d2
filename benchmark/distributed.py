"""``run`` on an executor (``--executor pool|ray``): the in-process run's units, as jobs.

Three stages. Models: every (task, seed) model that this machine's cache lacks is
trained as a job (``core.retrain.train_job``; its file comes back into the driver's
cache), so the seeds train side by side. Explanations: every (model, explainer) with
units left and no cached explanations is explained in chunks of ``CHUNK_BATCHES`` of
the session's batches, one job each (so one slow explainer, such as KernelSHAP on
the 7,020 Hansards rows, spreads over the workers); a chunk is whole batches with the
model's own targets, so each example is explained exactly as in one process, and the
driver puts the chunks together in its explanation cache. Units: one job per
(model, explainer), handed its explanations; the worker scores the units' metrics and
sends back the result records and their per-example rows, which the driver writes as
the in-process run does (per-example file first, then the result line), under the
same claims. So a killed worker loses only its job, and a killed driver resumes like
any run (with the explanations it had stored).

Results equal the in-process run's up to float32 rounding: the same keys and the same
computations, but a worker's perturbation engine shares variants only within its own
job, so a variant may be forwarded in another chunk of rows than in one process.
"""

from __future__ import annotations

import itertools
import logging
import re
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

from faithbench import tasks as task_registry
from faithbench.benchmark import plan
from faithbench.benchmark.core.api import Explainer
from faithbench.benchmark.core.claims import claim
from faithbench.benchmark.core.cost import Cost
from faithbench.benchmark.core.errors import InputError, PluginError
from faithbench.benchmark.core.records import (
    FailureRecord,
    ResultRecord,
    append_jsonl,
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
CHUNK_BATCHES = 8  # an explanation job's examples: this many of the session's batches


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
    explained: Explained | None = None  # put together from its chunks by the driver


@dataclass(frozen=True)
class ChunkJob:
    """The explanations of ``examples[start:stop]`` by one explainer on one model."""

    units: UnitsJob  # whose model and explainer
    start: int
    stop: int


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


def _worker_session(job: UnitsJob) -> tuple[RunConfig, EvaluationSession, Explainer]:
    """The job's configuration, session (kept for the worker's next job on the same
    model) and explainer."""
    from faithbench.benchmark.runner import resolve_explainer

    config = RunConfig.of(job.evaluation, job.execution, out=job.out)
    name = (job.task, job.seed, job.evaluation, job.out)
    if name not in _SESSIONS:
        _SESSIONS.clear()  # one model at a time: jobs come model by model
        _SESSIONS[name] = open_session(job.task, config, job.seed)
    return config, _SESSIONS[name], resolve_explainer(job.explainer, confinement(config))


def chunk_job(job: ChunkJob) -> Explained | FailureRecord:
    """Explain one chunk of the examples on the worker (a plugin's failure comes back
    as its record)."""
    _, session, explainer = _worker_session(job.units)
    try:
        return session.part(job.start, job.stop).explain(explainer, cache=False)
    except PluginError as exc:
        return _failure(session, explainer, exc, job.units.seed)


def _failure(session: EvaluationSession, explainer: Explainer, exc: PluginError,
             seed: int) -> FailureRecord:
    return FailureRecord(task=session.spec.id, explainer=explainer.spec.id, stage=exc.stage,
                         message=str(exc), example_ids=list(exc.example_ids), model_seed=seed)


def units_job(job: UnitsJob) -> UnitsDone:
    """Score ``job.units`` on the worker, explaining first if the job brings no
    explanations and none are cached."""
    from faithbench.benchmark.runner import metrics_for

    config, session, explainer = _worker_session(job)
    requested, forwarded = session.perturber.rows_requested, session.perturber.rows_forwarded
    metrics = {m.spec.id: m for m in session.applicable(metrics_for(session.spec, config.metrics))}
    given = job.explained or session.cached(explainer)
    done = UnitsDone(None)
    try:
        explained = given or session.explain(explainer, cache=False)
        done.explained = None if given else explained
        for unit in job.units:
            scored = session.score(metrics[unit.metric], explained.scores, explainer=explainer)
            record = session.record(unit, explainer, metrics[unit.metric], scored, explained)
            done.results.append((record, per_example_rows(scored)))
    except PluginError as exc:  # the explainer's failure, reported like the run's own
        done.failures.append(_failure(session, explainer, exc, job.seed))
    done.rows_requested = session.perturber.rows_requested - requested
    done.rows_forwarded = session.perturber.rows_forwarded - forwarded
    return done


def train_models(config: RunConfig, executor) -> None:
    """Train every model of the run that this machine's cache lacks, as jobs."""
    jobs = []
    for task_name, seed in plan.models(config):
        task = task_registry.get_task(task_name)
        options = config.evaluation.task_options(seed, config.device)
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
    from faithbench.benchmark.runner import (
        _take_done,
        finished,
        group_claim,
        session_units,
        write_unit,
    )

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
        done.update(finished(out))
        pending = [replace(job, units=tuple(_take_done(job.units, done, summary, progress)))
                   for job in jobs]
        explain_chunks(executor, pending, sessions, summary, progress)
        index = sorted((i for i, job in enumerate(pending) if job.units),
                       key=lambda i: -_expected(pending[i], sessions[i]))
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
                write_unit(out, record, rows, done, summary, progress)
                written.add(record.key)
            for unit in pending[index[j]].units:
                if unit.key not in written:
                    progress.finish(unit.key, failed=True)
            summary.rows_requested += result.rows_requested
            summary.rows_forwarded += result.rows_forwarded

        executor.map(units_job, [pending[i] for i in index], on_done=arrived)


def explain_chunks(executor, pending: list[UnitsJob],
                   sessions: list[tuple[EvaluationSession, Explainer]], summary,
                   progress) -> None:
    """Explain, in chunks of whole batches on the executor, every pending job's
    examples that the cache lacks; each job gets its explanations (stored in the cache
    as its last chunk arrives), or, when a chunk fails, is dropped with its failure
    recorded (``pending`` is updated in place)."""
    chunks: list[ChunkJob] = []
    owner: list[int] = []  # the pending job of each chunk
    for i, job in enumerate(pending):
        session, explainer = sessions[i]
        if not job.units or session.cached(explainer) is not None:
            continue
        ends = list(itertools.accumulate(len(b) for b, _, _ in session.batches(session.examples)))
        bounds = [0, *ends[CHUNK_BATCHES - 1::CHUNK_BATCHES]]
        if bounds[-1] != len(session.examples):
            bounds.append(len(session.examples))
        if len(bounds) <= 2:  # one chunk: its units job explains it, with no wait between
            continue
        chunks += [ChunkJob(job, a, b) for a, b in itertools.pairwise(bounds)]
        owner += [i] * (len(bounds) - 1)
    if not chunks:
        return
    order = sorted(range(len(chunks)), key=lambda j: -_expected(pending[owner[j]], sessions[owner[j]],
                                                              chunks[j].stop - chunks[j].start))
    chunks, owner = [chunks[j] for j in order], [owner[j] for j in order]
    log.info("run: %d chunk(s) of examples to explain on %s", len(chunks), executor.name)
    parts: dict[int, dict[int, Explained | FailureRecord]] = {}
    wanted = {i: owner.count(i) for i in set(owner)}
    out = Path(pending[owner[0]].out)

    def arrived(j: int, part: Explained | FailureRecord) -> None:
        i = owner[j]
        parts.setdefault(i, {})[chunks[j].start] = part
        if len(parts[i]) < wanted[i]:
            return
        got = [parts[i][start] for start in sorted(parts[i])]
        failed = [p for p in got if isinstance(p, FailureRecord)]
        if failed:  # reported and kept out, as in-process; its units are not computed
            log.error("%s", failed[0].message)
            append_jsonl(out / "failures.jsonl", failed[0].as_dict())
            summary.failures.append(failed[0])
            for unit in pending[i].units:
                progress.finish(unit.key, failed=True)
            pending[i] = replace(pending[i], units=())
            return
        done = [p for p in got if isinstance(p, Explained)]
        explained = Explained([s for p in done for s in p.scores],
                              [t for p in done for t in p.targets],
                              sum(p.seconds for p in done), Cost.total([p.cost for p in done]))
        session, explainer = sessions[i]
        session.store(explainer, explained)
        pending[i] = replace(pending[i], explained=explained)

    executor.map(chunk_job, chunks, on_done=arrived)


def _expected(job: UnitsJob, where: tuple[EvaluationSession, Explainer],
              examples: int | None = None) -> float:
    """A job's nominal cost in forward passes, to hand out the longest jobs first (so no
    long one starts last while the other workers idle): a chunk job's explaining of its
    ``examples``; a units job's scoring (one pass per example and metric, nominally) and
    its explaining, unless it was handed its explanations or they are cached."""
    session, explainer = where
    n = len(session.examples) if examples is None else examples
    mean_tokens = sum(len(e.tokens) for e in session.examples) / max(len(session.examples), 1)
    explaining = nominal_passes(explainer.spec.cost, mean_tokens) * n
    if examples is not None:
        return explaining
    if job.explained is not None or session.cached(explainer) is not None:
        explaining = 0.0
    return explaining + len(job.units) * n


def nominal_passes(cost: str, tokens: float) -> float:
    """Forward-equivalents per example named by an explainer's ``cost`` text (a backward
    pass counts 2; T, S and W stand for the example's tokens); 1 when it names none.

    >>> nominal_passes("50 fwd + 50 bwd (n_steps)", 20), nominal_passes("T + 1 fwd (T = tokens)", 20)
    (150.0, 21.0)
    >>> nominal_passes("<= 25 x W + 1 fwd (orderings)", 20), nominal_passes("", 20)
    (501.0, 1.0)
    """
    total = 0.0
    for term in cost.split("(")[0].split("+"):
        m = re.fullmatch(r"\s*(?:<=\s*)?(\d+(?:\.\d+)?|[TSW])(?:\s*x\s*([TSW]))?\s*(fwd|bwd)?\s*",
                         term)
        if m is None:
            continue
        count = tokens if m.group(1) in "TSW" else float(m.group(1))
        total += count * (tokens if m.group(2) else 1) * (2 if m.group(3) == "bwd" else 1)
    return total or 1.0
