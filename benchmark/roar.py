"""ROAR sweeps (Hooker et al. 2019; Madsen et al. 2022) and the diagnostics that say
how much of an erasure result is distribution shift.

For each model seed s, explainer E and ratio k: E's explanations of every split by the
original model (cached like every explanation), the top floor(k·n) tokens of each
example masked, a fresh model trained on the masked training split (same config,
early stopping on the masked validation split) and scored on the masked test split.
Random masking at the same ratios is the baseline; k = 0 is the original model and
k = 1 a model trained with every token masked, the end points both curves share.
``recursive`` recomputes the explanation at each ratio with the model retrained at
the previous one (Madsen et al.), keeping what the previous step masked.

Every retraining is a job named by content (its model's cache key). Jobs run through
an executor (``faithbench.benchmark.core.executor``: in-process, pool, Ray); as each finishes its
model goes into the cache and its row into ``<out>/roar/rows.jsonl``, so a killed
sweep loses only the jobs in flight, and a finished one reruns as a report.

Beside every point a row holds the original model's accuracy and probability drop on
the same masked inputs (erasure without retraining) and the Mahalanobis AUROC of
clean against masked test inputs on the original and on the retrained model
(``faithbench.metrics.ood``). Both detectors are fitted on *clean* validation inputs: for the
original model that is its training distribution; the retrained model never saw clean
inputs, so ``auroc_retrained`` says how differently it represents clean and masked
inputs, not whether masked inputs are out of its own training distribution.

The leakage check trains a model on the mask pattern alone
(``faithbench.metrics.masking.MaskPattern``) for the first ``leakage_seeds`` seeds and compares
it, example by example, with a model that sees only the length and with the random
mask's pattern model (``faithbench.benchmark.roar_report.leakage_cells``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from faithbench import submissions
from faithbench import tasks as task_registry
from faithbench.benchmark.core.api import (
    CLASSIFICATION,
    PAIR_CLASSIFICATION,
    TaskOptions,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.records import RoarRow, append_jsonl, read_roar_rows
from faithbench.benchmark.core.retrain import Retrainer, Trained, probabilities
from faithbench.benchmark.core.retrain import masked as masked_examples  # not the Mask types
from faithbench.benchmark.plan import Evaluation, Execution, RunConfig
from faithbench.benchmark.roar_report import ALL, CLEAN, LENGTH, RANDOM, report  # noqa: F401
from faithbench.benchmark.runner import resolve_explainer, serviceable
from faithbench.benchmark.session import EvaluationSession, Explained, confinement
from faithbench.metrics.masking import Mask, MaskPattern, RandomMask, RecursiveMask, TopKMask
from faithbench.metrics.ood import Mahalanobis, auroc, forward_states, hidden_states

log = logging.getLogger(__name__)

RATIOS = (0.1, 0.3, 0.5, 0.7, 0.9)
# one point of a sweep: (model seed, mask name, ratio, the data transform, row kind)
Point = tuple[int, str, float, "Mask", str]
ROWS = "rows.jsonl"


@dataclass(frozen=True)
class SweepConfig:
    ratios: tuple[float, ...] = RATIOS
    recursive: bool = False  # also the recursive curves (one more sweep per explainer)
    leakage: bool = True  # a mask-pattern model per (mask, ratio), first seeds only
    leakage_seeds: int = 3  # the paired test needs seeds to see retraining noise
    leakage_ratios: tuple[float, ...] | None = None  # None: every ratio


# -- jobs: what runs on a worker -------------------------------------------------------


@dataclass(frozen=True)
class ExplainJob:
    """One split's explanations by one model: what a worker needs, and no more (the
    evaluation and execution options, and where its explanation cache lives)."""

    task: str
    options: TaskOptions  # of the model that explains (a retrained one in recursive ROAR)
    evaluation: Evaluation
    execution: Execution
    out: str
    explainer: str
    split: str


def explain_job(job: ExplainJob) -> Explained:
    config = RunConfig.of(job.evaluation, job.execution, out=job.out)
    session = _session(job.task, config, job.options).on_split(job.split)
    return session.explain(resolve_explainer(job.explainer, confinement(config)))


def _session(task: str, config: RunConfig, options: TaskOptions) -> EvaluationSession:
    t = task_registry.get_task(task)
    prepared = t.prepare(options, progress=False)
    return EvaluationSession(prepared, config, seed=options.seed, task=t, options=options)


# -- one sweep ---------------------------------------------------------------------------


@dataclass
class Original:
    """The original model of one seed, with what every point compares against."""

    session: EvaluationSession
    labels: np.ndarray
    detector: Mahalanobis
    clean_distance: np.ndarray

    @property
    def split(self) -> str:
        """The split every point is scored on (the session is on a split, not a file)."""
        assert self.session.split is not None
        return self.session.split


def sweep(config: RunConfig, sweep_config: SweepConfig = SweepConfig()) -> list[RoarRow]:
    """Run every missing job of the sweep; return all rows of ``config.tasks``."""
    executor = config.execution.job_executor()
    out = Path(config.out) / "roar" / ROWS
    rows = []
    for task in config.tasks:
        rows += _TaskSweep(task, config, sweep_config, executor, out).run()
    return rows


class _TaskSweep:
    def __init__(self, task: str, config: RunConfig, sc: SweepConfig, executor, out: Path):
        self.task, self.config, self.sc, self.executor, self.out = task, config, sc, executor, out
        self.spec = task_registry.get_task(task).spec
        if self.spec.kind not in (CLASSIFICATION, PAIR_CLASSIFICATION):
            raise InputError(f"roar: task {task!r} is not a classification task")
        if list(sc.ratios) != sorted(set(sc.ratios)) or not all(0 < k < 1 for k in sc.ratios):
            raise InputError("roar: ratios must increase strictly, each in (0, 1)")
        self.refs = list(config.explainers or submissions.ROAR_DEFAULT)
        self.explainers = [resolve_explainer(e, confinement(config)) for e in self.refs]
        self.done = {r.key: r for r in read_roar_rows(out)}
        self.originals: dict[int, Original] = {}
        self.retrainer = Retrainer(task_registry.get_task(task),
                                   config.evaluation.task_options(0, config.device), executor)

    def options(self, seed: int, transform=None) -> TaskOptions:
        return self.retrainer.options(transform, seed)

    def run(self) -> list[RoarRow]:
        seeds = self.config.seeds
        self.train([self.options(s) for s in seeds])
        for s in seeds:
            self.originals[s] = self.original(s)
            self.record(s, CLEAN, 0.0, None, "roar")
        if not self.config.explainers:  # the default set: only what the model serves, as run
            kept = serviceable(self.explainers, self.originals[seeds[0]].session.prepared.model,
                               self.spec.id)
            self.refs = [r for r, e in zip(self.refs, self.explainers) if e in kept]
            self.explainers = kept
        wanted = [(s, ref, e) for s in seeds for ref, e in zip(self.refs, self.explainers)]
        scores = self.explain([(self.options(s), ref) for s, ref, _ in wanted])
        points: list[Point] = []
        for s in seeds:
            points.append((s, ALL, 1.0, RandomMask(1.0, seed=s), "roar"))
            points += [(s, RANDOM, k, RandomMask(k, seed=s), "roar") for k in self.sc.ratios]
        for (s, _, e), by_id in zip(wanted, scores):
            points += [(s, e.spec.id, k, TopKMask(by_id, k, e.spec.id), "roar")
                       for k in self.sc.ratios]
        if self.sc.leakage:
            for s in seeds[: self.sc.leakage_seeds]:
                points.append((s, LENGTH, 0.0, MaskPattern(RandomMask(0.0, seed=s)), "leakage"))
                ratios = self.sc.ratios if self.sc.leakage_ratios is None else self.sc.leakage_ratios
                points += [(s, m, k, MaskPattern(t), "leakage")
                           for s_, m, k, t, kind in list(points)
                           if s_ == s and kind == "roar" and m != ALL and k in ratios
                           and not isinstance(t, MaskPattern)]
        self.run_points(points)
        if self.sc.recursive:
            self.run_recursive()
        return [r for r in read_roar_rows(self.out) if r.task == self.spec.id]

    def run_recursive(self) -> None:
        chains = [(s, ref, e) for s in self.config.seeds
                  for ref, e in zip(self.refs, self.explainers)]
        # each chain's last mask (None: the clean data)
        previous: list[TopKMask | RecursiveMask | None] = [None] * len(chains)
        for k in self.sc.ratios:
            scores = self.explain([(self.options(s, t), ref)
                                   for (s, ref, _), t in zip(chains, previous)])
            # the first step is plain ROAR's mask (same model, trained once)
            previous = [TopKMask(by_id, k, e.spec.id) if t is None
                        else RecursiveMask(t, by_id, k, e.spec.id)
                        for (_, _, e), t, by_id in zip(chains, previous, scores)]
            self.run_points([(s, e.spec.id, k, t, "recursive")
                             for (s, _, e), t in zip(chains, previous)])

    # -- training and explaining through the executor --------------------------------------

    def train(self, options: list[TaskOptions], on_done=None) -> None:
        """Train every model not in this machine's cache (``core.retrain``: the files
        come back from the executor); ``on_done(i, Trained)`` as each arrives."""
        log.info("roar %s: up to %d model(s) to train on %s", self.task, len(options),
                 self.executor.name)
        self.retrainer.train(options, on_done)

    def explain(self, wanted: list[tuple[TaskOptions, str]]) -> list[dict]:
        """For each (options, explainer ref): {example id: scores} over every split of
        that model, explaining on the executor what this machine's cache lacks."""
        sessions: dict[tuple, EvaluationSession] = {}
        for options, _ in wanted:
            if _name(options) not in sessions:
                sessions[_name(options)] = _session(self.task, self.config, options)
        jobs, found = [], {}
        for options, ref in wanted:
            explainer = resolve_explainer(ref, confinement(self.config))
            for split in sessions[_name(options)].prepared.splits:
                session = sessions[_name(options)].on_split(split)
                hit = session.cached(explainer)
                if hit is None:
                    jobs.append(ExplainJob(self.task, options, self.config.evaluation,
                                           self.config.execution, self.config.out, ref, split))
                found[(_name(options), ref, split)] = (session, hit)
        if jobs:
            log.info("roar %s: %d split explanation(s) on %s", self.task, len(jobs),
                     self.executor.name)

        def store(i: int, explained: Explained) -> None:
            job = jobs[i]
            session, _ = found[(_name(job.options), job.explainer, job.split)]
            session.store(resolve_explainer(job.explainer, confinement(self.config)), explained)
            found[(_name(job.options), job.explainer, job.split)] = (session, explained)

        self.executor.map(explain_job, jobs, on_done=store)
        out = []
        for options, ref in wanted:
            by_id: dict[str, list[float]] = {}
            for split in sessions[_name(options)].prepared.splits:
                session, explained = found[(_name(options), ref, split)]
                assert explained is not None  # cached, or stored as its job finished
                by_id.update(zip((e.id for e in session.examples), explained.scores))
            out.append(by_id)
        return out

    # -- evaluating ----------------------------------------------------------------------

    def key(self, seed: int, transform, kind: str) -> str:
        o = self.originals[seed]
        return content_hash({"task": self.spec.id, "original": o.session.prepared.checkpoint,
                             "transform": None if transform is None else transform.key,
                             "kind": kind, "split": o.split, "limit": o.session.limit})

    def run_points(self, points: list) -> None:
        todo = [p for p in points if self.key(p[0], p[3], p[4]) not in self.done]
        if not todo:
            return

        def evaluate(i: int, trained: Trained) -> None:
            s, mask, ratio, transform, kind = todo[i]
            self.record(s, mask, ratio, transform, kind, trained)

        self.train([self.options(p[0], p[3]) for p in todo], on_done=evaluate)
        for p in todo:  # models already in the cache (trained by an earlier, killed sweep)
            if self.key(p[0], p[3], p[4]) not in self.done:
                self.record(*p)

    def original(self, seed: int) -> Original:
        session = _session(self.task, self.config, self.options(seed))
        prepared = session.prepared
        labels = np.array([e.label for e in session.examples])
        if (labels < 0).any():
            raise InputError(f"roar: {self.spec.id} split {session.split} has unlabelled "
                             "examples; ROAR scores accuracy")
        val = prepared.examples(_validation(prepared))
        detector = Mahalanobis.fit(_hidden(prepared, val), np.array([e.label for e in val]))
        return Original(session, labels, detector,
                        detector.distance(_hidden(prepared, session.examples)))

    def record(self, seed: int, mask: str, ratio: float, transform, kind: str,
               trained: Trained | None = None) -> RoarRow:
        key = self.key(seed, transform, kind)
        if key in self.done:
            return self.done[key]
        o = self.originals[seed]
        clean = o.session.examples
        prepared = o.session.prepared if transform is None else \
            task_registry.get_task(self.task).prepare(self.options(seed, transform), progress=False)
        masked = masked_examples(prepared, o.split, clean)
        if kind == "leakage" or transform is None:
            probs, shift = probabilities(prepared, masked), {}
        else:  # one forward of the masked inputs gives the accuracy and the shift's states
            probs, states = _states(prepared, masked)
            shift = self.shift(o, prepared, masked, states)
        correct = (probs.argmax(1) == o.labels).astype(int)
        row = RoarRow(
            key=key, task=self.spec.id, kind=kind, seed=seed, mask=mask, ratio=ratio,
            transform=None if transform is None else transform.key,
            checkpoint=prepared.checkpoint, original_checkpoint=o.session.prepared.checkpoint,
            split=o.split, n=len(clean), accuracy=float(correct.mean()),
            correct=correct.tolist(), majority=_majority(o.labels),
            validation_accuracy=prepared.accuracy.get(_validation(prepared)),
            train_s=None if trained is None or trained.loaded_from_cache else trained.seconds,
            epochs=len(prepared.history), **shift)
        append_jsonl(self.out, row.as_dict())
        self.done[key] = row
        return row

    def shift(self, o: Original, prepared, masked: list, masked_states: np.ndarray) -> dict:
        """Erasure without retraining, and how far out the masked inputs lie
        (``masked_states``: the retrained model's hidden states of ``masked``). Each
        model forwards the masked inputs once; the retrained model's detector is fitted
        once, on the original's clean validation split."""
        n = np.arange(len(masked))
        target = o.session.targets.numpy()
        fixed, fixed_states = _states(o.session.prepared, masked)  # the original model
        base = o.session.base_probs.numpy()
        val = o.session.prepared.examples(_validation(o.session.prepared))
        detector = Mahalanobis.fit(_hidden(prepared, val), np.array([e.label for e in val]))
        clean = o.session.examples
        return {
            "fixed_accuracy": float((fixed.argmax(1) == o.labels).mean()),
            "fixed_drop": float((base[n, target] - fixed[n, target]).mean()),
            "auroc_original": auroc(o.clean_distance, o.detector.distance(fixed_states)),
            "auroc_retrained": auroc(detector.distance(_hidden(prepared, clean)),
                                     detector.distance(masked_states)),
        }


def _name(options: TaskOptions) -> tuple:
    """A model's name within one sweep (options hold unhashable masks)."""
    return options.seed, None if options.transform is None else options.transform.key


def _validation(prepared) -> str:
    return "validation" if "validation" in prepared.splits else prepared.spec.split(None)


def _batches(prepared, examples):
    return (b for b, _, _ in prepared.batches(examples, 256))


def _hidden(prepared, examples) -> np.ndarray:
    return hidden_states(prepared.model, _batches(prepared, examples))


def _states(prepared, examples) -> tuple[np.ndarray, np.ndarray]:
    """(E, C) probabilities and (E, H) hidden states, one forward of each batch."""
    return forward_states(prepared.model, _batches(prepared, examples))


def _majority(labels: np.ndarray) -> float:
    return float(np.bincount(labels).max() / len(labels))
