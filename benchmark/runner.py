"""The pipeline, top to bottom: plan -> session (task, model, base predictions) ->
explainer -> metrics -> result records -> leaderboard entries.

"Done" is defined by outputs: a unit is complete if and only if its result line
exists in ``results.jsonl`` (per-example values are written first, atomically),
so an interrupted run — even ``kill -9`` — resumes exactly: finished units are
skipped and none is written twice. Explanations are cached per (model,
explainer) the same way, so a resumed run does not explain again. Runs into one
``--out`` at the same time claim each (model, explainer) before computing it
(``faithbench.benchmark.core.claims``): the second waits, then takes what the first wrote.

``--fresh`` recomputes the units the command selects and nothing else: holding an
explainer's claim, it removes the result lines of the explainer's units it
recomputes (``rewrite_jsonl``; they are then not done, so if the run stops there a
plain resume finishes them with the new explanations), drops their cached
explanations and computes them again. For a fresh run only results written since it
started count as done: two fresh runs at once compute each unit once. Every other
result, per-example file, explanation and leaderboard entry of ``--out`` stays as
it was.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import logging
import shlex
import time
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from itertools import groupby
from pathlib import Path

from faithbench import metrics as metric_registry
from faithbench import submissions
from faithbench import tasks as task_registry
from faithbench.benchmark import plan
from faithbench.benchmark.core import ids, params
from faithbench.benchmark.core.api import Explainer, capabilities
from faithbench.benchmark.core.claims import claim
from faithbench.benchmark.core.errors import (
    DataFileError,
    InputError,
    IntegrityError,
    PluginError,
    UnknownNameError,
)
from faithbench.benchmark.core.files import content_hash, folder_problem, writable_folder
from faithbench.benchmark.core.isolation import Confinement
from faithbench.benchmark.core.plugins import ENTRY_POINT_GROUP, load_explainer
from faithbench.benchmark.core.progress import Overall
from faithbench.benchmark.core.records import (
    FailureRecord,
    ResultRecord,
    append_jsonl,
    latest_results,
    read_jsonl,
    rewrite_jsonl,
    write_jsonl_atomic,
)
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.session import (
    EvaluationSession,
    confinement,
    open_session,
    per_example_rows,
)
from faithbench.leaderboard.entry import Entry, save_entry
from faithbench.leaderboard.suite import check_rows, selection_label, suite_key

log = logging.getLogger(__name__)


@dataclass
class RunSummary:
    out: Path
    results: list[ResultRecord] = field(default_factory=list)  # every result of this run's units
    computed: int = 0  # units computed now (the rest were already done)
    skipped: int = 0
    failures: list[FailureRecord] = field(default_factory=list)
    accuracy: dict = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)  # the leaderboard entries written
    seconds: float = 0.0
    rows_requested: int = 0  # perturbed rows the metrics and perturbation explainers asked for
    rows_forwarded: int = 0  # distinct rows that went through a model
    selection: str = "all"  # which examples of each split (selection_label)
    # (task id, seed) -> what made the model and its gate check (``core.gate``)
    models: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0

    def model(self, session: EvaluationSession) -> None:
        """Note the session's model: its accuracy per split and its report."""
        self.accuracy[f"{session.spec.id}/seed={session.seed}"] = session.prepared.accuracy
        self.models[(session.spec.id, session.seed)] = session.report


def configured(ref: str):
    """A reference explainer with parameters, as in its canonical id:
    ``attention[layer=0;heads=max]``, ``integrated_gradients[n_steps=20]``. Only the
    parameters ``submissions.PARAMS`` declares can be set, each to a value its
    declaration accepts (checked here, before any model is prepared).

    >>> configured("attention[heads=max;layer=-2]").spec.id
    'attention[heads=max;layer=-2]@1'
    >>> configured("gradient[norm=l2]@1").spec.id  # a canonical id names its explainer
    'gradient[norm=l2]@1'
    >>> configured("integrated_gradients[n_steps=0]")
    Traceback (most recent call last):
    ...
    faithbench.benchmark.core.errors.InputError: explainer 'integrated_gradients[n_steps=0]': n_steps=0 is not int >= 1 (settable: n_steps: int >= 1)
    """
    parsed = ids.parse_id(ref, "explainer")
    explainer = submissions.get_explainer(parsed.name)
    if parsed.version and parsed.version != explainer.spec.version:
        raise InputError(f"explainer {ref!r}: version {parsed.version} requested, "
                         f"{explainer.spec.version} registered")
    declared = submissions.PARAMS.get(parsed.name, {})
    given = dict(parsed.params)
    fixed = {k: ids.format_value(v) for k, v in explainer.spec.params if k not in declared}
    for key in fixed.keys() & given.keys():  # shown in the id, not settable: restating is fine
        if ids.format_value(given.pop(key)) != fixed[key]:
            raise InputError(f"explainer {ref!r}: {key} is fixed at {fixed[key]} "
                             f"(settable: {params.listing(declared)})")
    values = params.check("explainer", ref, given, declared,
                          defaults=dict(explainer.spec.params))
    try:
        return dataclasses.replace(explainer, **values) if values else explainer
    except (TypeError, ValueError) as exc:
        raise InputError(f"explainer {ref!r}: {exc} (settable: "
                         f"{params.listing(declared)})") from exc


def resolve_explainer(ref: str, box: Confinement | None = None) -> Explainer:
    """A reference name (``gradient``) or any plugin reference (path, module, entry
    point), loaded in a worker confined by ``box``. A name that is none of these is bad
    input (``UnknownNameError``, exit 2, with "did you mean"); a plugin that exists but
    fails to load, or claims a reference explainer's name, is a PluginError."""
    reference = check_explainer(ref)
    if reference is not None:
        return reference
    plugin = load_explainer(ref, box)
    if plugin.spec.name in submissions.REGISTRY:
        raise PluginError(ref, "load", f"the name {plugin.spec.name!r} is reserved for the "
                          "reference explainer; give the plugin a name of its own")
    return plugin


def check_explainer(ref: str) -> Explainer | None:
    """The reference explainer ``ref`` names (parameters checked), None for a plugin
    that exists (not loaded here, so checking runs none of its code), else an
    ``UnknownNameError``: every verb calls it before it prepares a model."""
    if ref in submissions.REGISTRY:
        return submissions.get_explainer(ref)
    if not ref.endswith(".py") and ids.short_name(ref) in submissions.REGISTRY:
        return configured(ref)  # e.g. attention[layer=0], gradient@1
    if not _plugin_exists(ref):
        close = difflib.get_close_matches(ids.short_name(ref), submissions.REFERENCE, n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        what = (f"no such file: {ref}" if ref.endswith(".py") else
                f"unknown explainer {ref!r}: not a reference explainer, a .py file, an entry "
                f"point in {ENTRY_POINT_GROUP!r} or an importable module")
        raise UnknownNameError(f"{what}{hint} (reference explainers: "
                               f"{', '.join(submissions.REFERENCE)})")
    return None


def _plugin_exists(ref: str) -> bool:
    """Whether ``ref`` names a file, entry point or module at all (whether it loads is
    ``load_explainer``'s question)."""
    if ref.endswith(".py"):
        return Path(ref).is_file()
    if any(ep.name == ref for ep in entry_points(group=ENTRY_POINT_GROUP)):
        return True
    try:
        return importlib.util.find_spec(ref) is not None
    except ModuleNotFoundError:
        return False
    except Exception:  # noqa: BLE001 — a parent package that exists but fails to import
        return True


def check_names(config: RunConfig) -> None:
    """Look up every task, metric and explainer name of ``config`` before any work: a
    typo or a bad parameter is an InputError (exit 2, with "did you mean" or the
    settable parameters), never found after a model has trained. Plugins are only
    found here, not loaded (``check_explainer``)."""
    for name in config.tasks:
        task_registry.get_task(name)
    own = [t for t in config.tasks if t in task_registry.OWN_DATA]
    if config.dataset is not None and not own:
        raise InputError(f"--dataset {config.dataset.source} is read by the tasks "
                         f"{', '.join(task_registry.OWN_DATA)}; add --tasks text (or "
                         "text_pair)")
    for name in own:
        task_registry.get_task(name).dataset_of(config.evaluation.task_options(0))
    if config.deceive:
        for name in config.tasks:
            task_registry.check_deceive(name, config.evaluation.task_options(0))
    for name in config.metrics:
        metric_registry.resolve(name)
    for ref in config.explainers:
        check_explainer(ref)


def run(config: RunConfig) -> RunSummary:
    """Run every (task, seed, explainer, metric) unit not already done (with
    ``config.fresh``: every unit, replacing the results it had)."""
    start, started = time.perf_counter(), time.time()
    out = Path(config.out)
    check_names(config)  # names first: a typo stops the run before it trains
    problem = folder_problem(out)  # a file in the way, /proc: said before the data is read
    if problem is not None:
        raise InputError(f"--out {out} {problem}")
    explainers, refs, load_failures = load_explainers(config)
    check_data(config)  # a bad data file stops the run before --out is created
    writable_folder(out)  # created, and a probe file written there and removed
    summary = RunSummary(out, selection=selection_label(config.as_dict()))
    summary.failures += load_failures
    for f in load_failures:
        append_jsonl(out / "failures.jsonl", f.as_dict())
    since = started if config.fresh else None
    done = finished(out, since)
    progress = Overall(plan.planned(config, len(explainers), lambda task: len(metrics_for(
        task_registry.get_task(task).spec, config.metrics))), show=config.progress)
    try:
        if config.executor == "in-process":
            for i, (task_name, seed) in enumerate(plan.models(config)):
                session = open_session(task_name, config, seed)
                summary.model(session)
                _run_session(session, explainers, done, summary,
                             _Progress(progress, i, since))
                summary.rows_requested += session.perturber.rows_requested
                summary.rows_forwarded += session.perturber.rows_forwarded
        else:  # the same units as jobs, on worker processes or a Ray cluster
            from faithbench.benchmark.distributed import run_units

            run_units(config, explainers, refs, done, summary, progress)
    finally:
        progress.close()
    if config.write_leaderboard:
        with claim(out, "leaderboard", "the leaderboard entries"):  # one writer at a time
            summary.entries = write_entries(config, summary)
    summary.seconds = time.perf_counter() - start
    return summary


def check_data(config: RunConfig) -> None:
    """Every task's data read and checked (a duplicate example id, a control character,
    an example over the task's length cap, ...) before anything is trained or written:
    each task's reader keeps what it read, so the models take those rows
    (``tasks.data.read_once``)."""
    for name in config.tasks:
        task = task_registry.get_task(name)
        check = getattr(task, "check_data", None)
        if check is not None:
            check(config.evaluation.task_options(config.seeds[0], config.device))


def finished(out: Path, since: float | None = None) -> dict[str, ResultRecord]:
    """The results of ``out`` by key (a key's last line: ``latest_results``); with
    ``since`` (a fresh run's start), only those written since."""
    return {r.key: r for r in latest_results(Path(out) / "results.jsonl")
            if since is None or r.created_at >= since}


@dataclass
class _Progress:
    """The run's overall progress as one model's units see it: the model's index and
    the fresh run's start (None: not fresh)."""

    overall: Overall
    model: int
    since: float | None


def record_failure(out: Path, exc: PluginError, task: str, explainer: str,
                   seed: int | None) -> FailureRecord:
    """Log a plugin failure and append it to ``failures.jsonl`` (never to results)."""
    log.error("%s", exc)
    failure = FailureRecord(task=task, explainer=explainer, stage=exc.stage, message=str(exc),
                            example_ids=list(exc.example_ids), model_seed=seed)
    append_jsonl(out / "failures.jsonl", failure.as_dict())
    return failure


def load_explainers(config: RunConfig):
    """The explainers that load, {spec id: the reference the run was given} (what a job
    on another process loads one by), and the failures of the others."""
    loaded, failures, refs_of = [], [], {}
    for ref in config.explainers or submissions.REFERENCE:
        try:
            loaded.append(resolve_explainer(ref, confinement(config)))
            refs_of[loaded[-1].spec.id] = ref
        except PluginError as exc:
            log.error("%s", exc)
            failures.append(FailureRecord(task="*", explainer=ref, stage="load", message=str(exc)))
    return loaded, refs_of, failures


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


def session_units(session: EvaluationSession, explainers) -> tuple[list[plan.Unit], dict, dict]:
    """One model's units (explainer by explainer), its metrics by id and the explainers
    it can serve by id: the run's plan for that model, in-process or as jobs."""
    config = session.config
    metrics = {m.spec.id: m for m in session.applicable(metrics_for(session.spec, config.metrics))}
    if not config.explainers:  # the default set: only those this model can serve
        explainers = serviceable(explainers, session.prepared.model, session.spec.id)
    by_id = {e.spec.id: e for e in explainers}
    assert session.split is not None  # a run's sessions are on a split, not a file
    units = plan.units(config, session.spec.name, session.seed, session.prepared.checkpoint,
                       session.split, list(by_id), list(metrics),
                       data=session.prepared.data_fingerprint)
    return units, metrics, by_id


def group_claim(session: EvaluationSession, explainer_id: str) -> tuple[str, str]:
    """The claim key and label of one explainer's units on the session's model: another
    process computing them holds it (``claims``: never computed twice, never wedged)."""
    config = session.config
    key = content_hash([session.prepared.checkpoint, explainer_id, session.split,
                        config.selection, session.seed, session.prepared.data_fingerprint])
    return key, f"{explainer_id} on {session.spec.id}, seed {session.seed}"


def _run_session(session: EvaluationSession, explainers, done, summary,
                 progress: _Progress) -> None:
    """Walk the units of one model: explain once per explainer, then score its metrics."""
    out = Path(session.config.out)
    units, metrics, by_id = session_units(session, explainers)
    progress.overall.model(progress.model, (u.key for u in units), done)
    for explainer_id, same in groupby(units, key=lambda u: u.explainer):
        group = list(same)
        if any(u.key not in done for u in group):
            # another process may be computing these units: wait for its claim, then
            # take what it finished
            with claim(out, *group_claim(session, explainer_id)):
                done.update(finished(out, progress.since))
                _run_group(session, by_id[explainer_id], group, metrics, done, summary,
                           progress.overall)
        else:
            _take_done(group, done, summary, progress.overall)


def _take_done(group, done, summary, progress: Overall) -> list:
    """Count the group's units already in ``done``; return the rest."""
    todo = [u for u in group if u.key not in done]
    summary.results += [done[u.key] for u in group if u.key in done]
    summary.skipped += len(group) - len(todo)
    for u in group:
        if u.key in done:
            progress.finish(u.key)
    return todo


def _run_group(session: EvaluationSession, explainer, group, metrics, done, summary,
               progress: Overall) -> None:
    """Explain once, then score and write each unit of ``group`` not yet done (a fresh
    run first removes the result lines it replaces: ``config.fresh``). Called holding
    the group's claim."""
    out = Path(session.config.out)
    todo = _take_done(group, done, summary, progress)
    if not todo:
        return
    if session.config.fresh:
        stale = {u.key for u in todo}
        rewrite_jsonl(out / "results.jsonl", lambda row: row.get("key") not in stale)
    try:
        explained = session.explain(explainer)
    except PluginError as exc:
        summary.failures.append(record_failure(out, exc, session.spec.id, explainer.spec.id,
                                               session.seed))
        for unit in todo:
            progress.finish(unit.key, failed=True)
        return
    for unit in todo:
        metric = metrics[unit.metric]
        try:
            scored = session.score(metric, explained.scores, explainer=explainer)
        except PluginError as exc:  # a sanity check runs the explainer on another model
            summary.failures.append(record_failure(out, exc, session.spec.id,
                                                   explainer.spec.id, session.seed))
            progress.finish(unit.key, failed=True)
            continue
        write_unit(out, session.record(unit, explainer, metric, scored, explained),
                   per_example_rows(scored), done, summary, progress)


def write_unit(out: Path, record: ResultRecord, rows: list[dict], done, summary,
               progress: Overall) -> None:
    """Write one computed unit: its per-example file first, then its result line (a
    unit is done iff that line exists), and count it."""
    write_jsonl_atomic(out / record.per_example_file, rows)
    append_jsonl(out / "results.jsonl", record.as_dict())
    done[record.key] = record
    summary.results.append(record)
    summary.computed += 1
    progress.finish(record.key)


def backed_rows(out: Path, record: ResultRecord) -> list[dict]:
    """The per-example rows of ``record`` (its file under ``out``), as an entry holds
    them, once they back it (n rows, their mean: ``check_rows``). Rows that do not (the
    result line or the per-example file changed since the run wrote them) are an
    IntegrityError naming both files, the line, and the command that computes the unit
    again."""
    path = out / record.per_example_file
    rows = [{"task": record.task, "model_seed": record.model_seed, "metric": record.metric,
             **row} for row in read_jsonl(path)]
    try:
        check_rows(rows, [record])
    except InputError as exc:
        results = out / "results.jsonl"
        line = next((i for i, d in reversed(list(enumerate(read_jsonl(results), start=1)))
                     if d.get("key") == record.key), None)
        where = f"{results}" + (f", line {line}" if line else "")
        problem = str(exc)
        if isinstance(exc, DataFileError) and exc.line is not None:  # a row of the file
            where = f"{path}, line {exc.line}"
            problem = problem.split(":", 1)[1].strip()
        else:
            problem = f"{problem} ({path})"
        raise IntegrityError(where, problem, "run the same command again with --fresh to "
                             "compute it again; --explainers "
                             f"{shlex.quote(record.explainer)} --metrics "
                             f"{shlex.quote(record.metric)} limits that to this unit") from None
    return rows


def write_entries(config: RunConfig, summary: RunSummary) -> list[Entry]:
    """One leaderboard entry per explainer whose every unit succeeded in this run.

    An entry holds all of the explainer's results in the results file for the same
    suite (task, model checkpoint, split, which examples: first N or a seeded sample),
    so a run that adds metrics extends the entry instead of replacing it with the new
    metrics alone. ``write_entry`` replaces the explainer's earlier entry on the same
    selection (split, examples, data, model seeds: e.g. retrained checkpoints) and keeps
    its entries on other examples, which are another suite, ranked apart.
    """
    failed = {f.explainer for f in summary.failures}
    suites = {(r.explainer, suite_key(r)) for r in summary.results}
    by_explainer: dict[str, list[ResultRecord]] = {}
    for r in latest_results(summary.out / "results.jsonl"):
        if r.explainer not in failed and (r.explainer, suite_key(r)) in suites:
            by_explainer.setdefault(r.explainer, []).append(r)
    written = []
    for records in by_explainer.values():
        per_example = []
        for r in records:
            per_example += backed_rows(summary.out, r)
        spec = (records[0].provenance.config or {})["explainer"]
        written.append(save_entry(summary.out / "leaderboard", explainer_spec=spec,
                                 results=records, per_example=per_example,
                                 notes=config.notes))
    return written

