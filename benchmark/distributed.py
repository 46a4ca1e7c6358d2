"""``run`` on an executor (``--executor pool|ray``): the in-process run's units, as jobs.

Models first: every (task, seed) model that this machine's cache lacks is trained as
a job (``core.retrain.train_job``; its file comes back into the driver's cache), so
the seeds train side by side. Then the units of every (model, explainer) with units
left (``Stages``): an explainer whose explaining is a large share of the run (``_big``:
LIME on the 7,020 Hansards rows) is explained in chunks of ``CHUNK_BATCHES`` of the
session's batches, one job each, so it spreads over the workers; a chunk is whole
batches with the model's own targets, so each example is explained exactly as in one
process, and the driver puts the chunks together in its explanation cache. Every
other (model, explainer) is one job that explains and scores; a chunked explainer's
units job, handed its explanations, follows as soon as its last chunk is in. A worker
sends back the result records and their per-example rows, which the driver writes as
the in-process run does (per-example file first, then the result line), under the
same claims. So a killed worker loses only its job, and a killed driver resumes like
any run (with the explanations it had stored). Jobs go out longest first
(``nominal_passes``), and a pool's forked workers inherit the driver's sessions
(model, base predictions).

Results equal the in-process run's up to float32 rounding: the same keys and the same
computations, but a worker's perturbation engine shares variants only within its own
job, so a variant may be forwarded in another chunk of rows than in one process.
"""

from __future__ import annotations

import itertools
import logging
import os
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
# sessions the driver opened for its pool's workers, which inherit them when forked
# (the model loaded, the base predictions computed once, not once per worker and stage)
_INHERITED: dict[tuple, EvaluationSession] = {}


def _session_name(job: UnitsJob) -> tuple:
    return job.task, job.seed, job.evaluation, job.out


def _worker_session(job: UnitsJob) -> tuple[RunConfig, EvaluationSession, Explainer]:
    """The job's configuration, session (kept for the worker's next job on the same
    model, or inherited from the driver) and explainer."""
    from faithbench.benchmark.runner import resolve_explainer

    config = RunConfig.of(job.evaluation, job.execution, out=job.out)
    name = _session_name(job)
    if name in _INHERITED:
        return config, _INHERITED[name], resolve_explainer(job.explainer, confinement(config))
    if name not in _SESSIONS:
        _SESSIONS.clear()  # one model at a time: jobs come model by model
        _SESSIONS[name] = open_session(job.task, config, job.seed)
    return config, _SESSIONS[name], resolve_explainer(job.explainer, confinement(config))


def _bequeath(job: UnitsJob, driver: EvaluationSession) -> None:
    """Open, in the driver, the session a forked worker would open for ``job``: on the
    driver's model, with the base predictions and targets computed, so every worker of
    every stage inherits them."""
    name = _session_name(job)
    if name not in _INHERITED:
        config = RunConfig.of(job.evaluation, job.execution, out=job.out)
        session = EvaluationSession(driver.prepared, config, seed=job.seed, task=driver.task,
                                    options=driver.options)
        session.targets  # noqa: B018 -- computed here, once
        _INHERITED[name] = session


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
        summary.model(session)
        units, _, by_id = session_units(session, explainers)
        progress.model(i, (u.key for u in units), done)
        for explainer_id, explainer in by_id.items():
            jobs.append(UnitsJob(task_name, seed, config.evaluation,
                                 replace(config.execution, executor="in-process"), str(out),
                                 refs[explainer_id],
                                 tuple(u for u in units if u.explainer == explainer_id)))
            sessions.append((session, explainer))
            labels.append(group_claim(session, explainer_id))
            if executor.name == "pool" and any(u.key not in done for u in jobs[-1].units):
                _bequeath(jobs[-1], session)
    with ExitStack() as claims:
        claims.callback(_INHERITED.clear)  # the driver's copies go with the run
        # another run into --out may be computing some of these: hold the claim of each
        # group with units to compute, then take what the others finished (as the
        # in-process run does, group by group)
        for job, (key, label) in zip(jobs, labels):
            if any(u.key not in done for u in job.units):
                claims.enter_context(claim(out, key, label))
        done.update(finished(out))
        pending = [replace(job, units=tuple(_take_done(job.units, done, summary, progress)))
                   for job in jobs]
        Stages(executor, pending, sessions, out, done, summary, progress).run()


class Stages:
    """The jobs of a run's pending (model, explainer) groups. An explainer whose
    explaining alone would hold one worker for a large share of the run (``_big``) is
    explained in chunks of ``CHUNK_BATCHES`` batches; the others are explained and
    scored in one job each. Those jobs and every chunk go out longest first; a chunked
    explainer's units job follows as soon as its chunks are put together (a failed chunk
    drops its explainer's units, recorded)."""

    def __init__(self, executor, pending: list[UnitsJob],
                 sessions: list[tuple[EvaluationSession, Explainer]], out: Path, done: dict,
                 summary, progress):
        self.executor, self.pending, self.sessions = executor, pending, sessions
        self.out, self.done, self.summary, self.progress = out, done, summary, progress
        self.parts: dict[int, dict[int, Explained | FailureRecord]] = {}
        self.wanted: dict[int, int] = {}  # chunks of each chunked group
        self.complete: set[int] = set()  # groups whose chunks are all in, units not sent

    def run(self) -> None:
        chunks = self.chunks()
        chunked = {c.owner for c in chunks}
        whole = [Whole(i) for i, job in enumerate(self.pending) if job.units and i not in chunked]
        items: list = sorted([*chunks, *whole], key=lambda j: -self.expected(j))
        if items:
            log.info("run: %d chunk(s) of examples and %d job(s) of units on %s, then the "
                     "units of %d chunked explainer(s)", len(chunks), len(whole),
                     self.executor.name, len(chunked))

        def then(i: int, _) -> list[UnitsJob]:
            """A chunked explainer's units job, once its last chunk is in (not after a
            round: the workers never wait)."""
            item = items[i]
            if not isinstance(item, Chunk) or item.owner not in self.complete:
                return []
            self.complete.discard(item.owner)
            items.append(Whole(item.owner))
            return [self.pending[item.owner]]

        self.executor.map(stage_job, [self.job(j) for j in items],
                          on_done=lambda k, result: self.arrived(items[k], result), then=then)

    def chunks(self) -> list[Chunk]:
        """The chunks of the big explainers whose explanations are not cached."""
        costs = {i: _expected(job, self.sessions[i], len(self.sessions[i][0].examples))
                 for i, job in enumerate(self.pending) if job.units}
        workers = getattr(self.executor, "workers", None) or os.cpu_count() or 1
        out = []
        for i, job in enumerate(self.pending):
            session, explainer = self.sessions[i]
            if (not job.units or not _big(costs[i], sum(costs.values()), workers)
                    or session.cached(explainer) is not None):
                continue
            ends = list(itertools.accumulate(len(b) for b, _, _ in
                                             session.batches(session.examples)))
            bounds = [0, *ends[CHUNK_BATCHES - 1::CHUNK_BATCHES]]
            if bounds[-1] != len(session.examples):
                bounds.append(len(session.examples))
            if len(bounds) > 2:  # else one chunk: its units job explains it
                out += [Chunk(i, a, b) for a, b in itertools.pairwise(bounds)]
                self.wanted[i] = len(bounds) - 1
        return out

    def job(self, item) -> ChunkJob | UnitsJob:
        if isinstance(item, Chunk):
            return ChunkJob(self.pending[item.owner], item.start, item.stop)
        return self.pending[item.index]

    def expected(self, item) -> float:
        if isinstance(item, Chunk):
            return _expected(self.pending[item.owner], self.sessions[item.owner],
                             item.stop - item.start)
        return _expected(self.pending[item.index], self.sessions[item.index])

    def arrived(self, item, result) -> None:
        if isinstance(item, Chunk):
            self.chunk_arrived(item, result)
        else:
            self.scored(item.index, result)

    def chunk_arrived(self, chunk: Chunk, part: Explained | FailureRecord) -> None:
        """Keep a chunk; once its explainer's last one is in, store the explanations and
        hand them to its units job (or drop the units of a failed one)."""
        i = chunk.owner
        self.parts.setdefault(i, {})[chunk.start] = part
        if len(self.parts[i]) < self.wanted[i]:
            return
        session, explainer = self.sessions[i]
        got = [self.parts[i][start] for start in sorted(self.parts[i])]
        failed = [p for p in got if isinstance(p, FailureRecord)]
        if failed:  # reported and kept out, as in-process; its units are not computed
            self.failure(failed[0])
            for unit in self.pending[i].units:
                self.progress.finish(unit.key, failed=True)
            self.pending[i] = replace(self.pending[i], units=())
            return
        done = [p for p in got if isinstance(p, Explained)]
        explained = Explained([s for p in done for s in p.scores],
                              [t for p in done for t in p.targets],
                              sum(p.seconds for p in done), Cost.total([p.cost for p in done]))
        session.store(explainer, explained)
        self.pending[i] = replace(self.pending[i], explained=explained)
        self.complete.add(i)

    def scored(self, i: int, result: UnitsDone) -> None:
        """Write a units job's results (as the in-process run writes them)."""
        from faithbench.benchmark.runner import write_unit

        session, explainer = self.sessions[i]
        if result.explained is not None:
            session.store(explainer, result.explained)
        for failure in result.failures:  # reported and kept out, as in-process
            self.failure(failure)
        written = set()
        for record, rows in result.results:
            write_unit(self.out, record, rows, self.done, self.summary, self.progress)
            written.add(record.key)
        for unit in self.pending[i].units:
            if unit.key not in written:
                self.progress.finish(unit.key, failed=True)
        self.summary.rows_requested += result.rows_requested
        self.summary.rows_forwarded += result.rows_forwarded

    def failure(self, failure: FailureRecord) -> None:
        log.error("%s", failure.message)
        append_jsonl(self.out / "failures.jsonl", failure.as_dict())
        self.summary.failures.append(failure)


@dataclass(frozen=True)
class Chunk:
    """Examples [start, stop) of pending group ``owner``, explained as one job."""

    owner: int
    start: int
    stop: int


@dataclass(frozen=True)
class Whole:
    """Pending group ``index``'s units, as one job (explaining first if it must)."""

    index: int


def stage_job(job: ChunkJob | UnitsJob):
    """A job on a worker: a chunk to explain, or units to explain (if need be) and score."""
    return chunk_job(job) if isinstance(job, ChunkJob) else units_job(job)


def _big(cost: float, total: float, workers: int) -> bool:
    """Whether an explainer's explaining (``cost`` of all explainers' ``total``) is big
    enough to chunk: more than half of what each worker should get. Chunked, it spreads
    over the workers; whole, it would be the last job running while the others idle.

    >>> _big(500, 1700, 2), _big(150, 1700, 2), _big(150, 1700, 8)
    (True, False, True)
    """
    return cost > total / (2 * workers)


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
