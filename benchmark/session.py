"""One prepared model on one split: the evaluation session.

Every verb and the runner go through it, so the setup is written once: the session
owns the examples, the perturbation engine (whose memory shares identical variants
across metrics and explainers), the base predictions and the targets, computed once
each and on first use; it explains (with the explanation cache under ``--out``),
scores, and builds records and their provenance.

Data flows one way: ``open_session`` (task -> prepared model) -> ``explain`` ->
``score`` -> ``record``. The parts live in their own modules: the explanation cache
(``explanations``), scoring (``scoring``) and records (``recording``). Nothing here
knows a concrete task: it sees the ``faithbench.api.PreparedTask`` protocol only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch

from faithbench import tasks as task_registry
from faithbench.benchmark import recording, scoring
from faithbench.benchmark.core.api import Example, Explainer, PreparedTask, Task, TaskOptions
from faithbench.benchmark.core.cache import cache_dir
from faithbench.benchmark.core.cost import Cost
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.gate import ModelReport, gate
from faithbench.benchmark.core.isolation import Confinement, is_reference, plugin_caller
from faithbench.benchmark.core.perturb import Perturber, share_engine
from faithbench.benchmark.core.progress import progress_bar, shown, stage
from faithbench.benchmark.core.records import ResultRecord
from faithbench.benchmark.core.stats import Estimate
from faithbench.benchmark.core.validation import model_eval, spot_check
from faithbench.benchmark.explanations import (
    Explained,
    ExplanationCache,
    append_batch,
    finished_batches,
)
from faithbench.benchmark.plan import RunConfig, Unit, select
from faithbench.benchmark.scoring import Scored, per_example_rows, reference_rate, with_reference

__all__ = ["EvaluationSession", "Explained", "Scored", "confinement", "open_session",
           "per_example_rows", "reference_rate"]

log = logging.getLogger(__name__)


def open_session(task_name: str, config: RunConfig, seed: int | None = None
                 ) -> EvaluationSession:
    """Prepare task ``task_name``'s model for ``seed`` (default: the first of
    ``config.seeds``) and open a session on ``config.split`` / ``config.limit``
    (``session.on(examples)`` moves it to a user's examples)."""
    seed = config.seeds[0] if seed is None else seed
    task = task_registry.get_task(task_name)
    options = config.evaluation.task_options(seed, config.device)
    with stage(f"prepare the {task_name} model, seed {seed} (data, training or the cache)"):
        prepared = task.prepare(options, progress=shown(config.progress))
    return EvaluationSession(prepared, config, seed=seed, task=task, options=options)


def gated(prepared: PreparedTask, config: RunConfig, seed: int) -> ModelReport | None:
    """The model's report once it passed the model gate (``core.gate``): a model that
    learned nothing stops here, before anything is explained, unless the run allows
    weak models (then the report says so, and so does every record)."""
    return gate(getattr(prepared, "report", None), f"{prepared.spec.id} seed {seed}",
                allow=config.allow_weak_model)


class EvaluationSession:
    """Examples, engine, base predictions and targets of one model on one split."""

    def __init__(self, prepared: PreparedTask, config: RunConfig, *, seed: int,
                 examples: list[Example] | None = None, task: Task | None = None,
                 options: TaskOptions | None = None, share: bool = True,
                 report: ModelReport | None = None):
        self.prepared, self.config, self.seed = prepared, config, seed
        # the model gate, once per model: sessions derived from this one pass it on
        self.report = report or gated(prepared, config, seed)
        self.seeds = config.seeds_of(seed)
        self.task, self.options = task, options
        self.spec = prepared.spec
        self.from_file = examples is not None
        # the split (None: a user's file), and which of its examples (first N, or a
        # seeded sample) as keys hash it
        self.split: str | None = None
        self.limit = None if self.from_file else config.selection
        if examples is None:
            self.split = self.spec.split(config.split)
            examples = select(prepared, self.split, config)
        self.examples: list[Example] = examples
        # share=False forwards every requested variant (to measure what sharing saves)
        self.perturber = Perturber(prepared.model, chunk_size=config.chunk_size, share=share)
        if share:  # perturbation explainers forward through it too (``engine_for``)
            share_engine(prepared.model, self.perturber)
        self._probs: torch.Tensor | None = None
        self._targets: torch.Tensor | None = None
        self._collated: dict[tuple[str, ...], list] = {}
        # ``config.fresh``: the cache files explained again by this session and those it
        # derives (``on``, ``on_split``), each once; the cache serves the later calls
        self._renewed: set[Path] = set()

    def on(self, examples: list[Example]) -> EvaluationSession:
        """A session of the same model on other examples (e.g. read from a user's file).
        It shares this session's perturbation engine: a variant either forwarded is
        answered from memory (exact: same model, and a key is what the model sees)."""
        other = EvaluationSession(self.prepared, self.config, seed=self.seed, examples=examples,
                                  task=self.task, options=self.options, report=self.report)
        other.perturber = self.perturber
        other._renewed = self._renewed
        share_engine(self.prepared.model, self.perturber)
        return other

    def part(self, start: int, stop: int) -> EvaluationSession:
        """The session on ``examples[start:stop]`` with this session's targets, sharing
        its engine: explained there, those examples get the scores they get here when
        the part starts and ends on this session's batch boundaries (``batches``)."""
        other = self.on(self.examples[start:stop])
        other.targets = self.targets[start:stop]
        return other

    def on_split(self, split: str, limit: int | None = None) -> EvaluationSession:
        """A session of the same model on another split (e.g. ROAR explains the training
        split); its explanations are cached under their own split key."""
        config = replace(self.config, split=split, limit=limit, sample=None)
        other = EvaluationSession(self.prepared, config, seed=self.seed, task=self.task,
                                  options=self.options, report=self.report)
        other._renewed = self._renewed
        return other

    # -- computed once, on first use ------------------------------------------------------

    @property
    def base_probs(self) -> torch.Tensor:
        """(E, C) p(·|x) of every example (eval mode), shared by every explainer and metric."""
        if self._probs is None:
            model_eval(self.prepared.model)
            with torch.no_grad():
                out = [self.perturber.probs(b) for b, _, _ in self.batches(self.examples)]
            self._probs = torch.cat(out) if out else torch.empty(0, self.prepared.n_outputs)
        return self._probs

    @property
    def targets(self) -> torch.Tensor:
        """(E,) what is explained: the task decides (a classifier's predicted class)."""
        if self._targets is None:
            self._targets = self.prepared.targets(self.examples, self.base_probs)
        return self._targets

    @targets.setter
    def targets(self, value: torch.Tensor | Sequence[int]) -> None:
        """Explicit targets (e.g. a ``target`` field of a user's explanations file)."""
        self._targets = torch.as_tensor(value, dtype=torch.long)

    def has_references(self) -> bool:
        return bool(with_reference(self.examples))

    def applicable(self, metrics: list) -> list:
        """``metrics`` less the reference-needing ones when no example has a reference
        (e.g. the hub copy of a task whose rationales are local), with a warning."""
        if self.has_references():
            return list(metrics)
        skipped = [m.spec.name for m in metrics if m.spec.needs_reference]
        if skipped:
            log.warning("%s: no example has a reference rationale; skipping %s",
                        self.spec.id, ", ".join(skipped))
        return [m for m in metrics if not m.spec.needs_reference]

    # -- explain ---------------------------------------------------------------------------

    def explain(self, explainer: Explainer, *, cache: bool = True) -> Explained:
        """The explainer's scores of every example, for the session's targets.

        Cached under ``<out>/explanations`` when the examples are a split, keyed like a
        unit (weights, seed, data fingerprint, split, limit, explainer: ``unit_key``): a
        resumed run, or another verb on the same ``--out``, does not explain again. With
        ``config.fresh`` (``run --fresh``) the cached explanations are dropped and
        computed again, once per session; the new ones are cached.
        Raises PluginError on the first bad batch; each call is guarded
        (``faithbench.benchmark.core.isolation``).
        """
        cache = cache and not self.from_file
        renew = cache and self.config.fresh and self._cache().path(explainer) not in self._renewed
        if renew:
            self._cache().drop(explainer)
        found = self.cached(explainer) if cache else None
        if found is not None:
            return found
        explained = self._explain(explainer, resumable=cache)
        if cache:
            self.store(explainer, explained)
        if renew:
            self._renewed.add(self._cache().path(explainer))
        return explained

    def cached(self, explainer: Explainer) -> Explained | None:
        """The cached explanations of the session's split (``ExplanationCache.get``)."""
        return self._cache().get(explainer, self.examples)

    def store(self, explainer: Explainer, explained: Explained) -> None:
        """Put explanations computed elsewhere (e.g. by a sweep's worker on another
        machine) into this session's explanation cache."""
        self._cache().put(explainer, self.examples, explained)

    def explanations_path(self, explainer: Explainer) -> Path:
        """Where the explainer's explanations of the session's split are cached."""
        return self._cache().path(explainer)

    def _cache(self) -> ExplanationCache:
        assert self.split is not None  # only a split's explanations are cached
        return ExplanationCache(Path(self.config.out), self.prepared, self.seed,
                                self.seeds.explainer, self.split, self.limit,
                                self.config.precision)

    def _explain(self, explainer: Explainer, *, resumable: bool = True) -> Explained:
        """Batch by batch. On a split, each finished batch is appended to a partial file
        beside the explanation cache, so a run that fails or is stopped at batch k starts
        again at batch k; the file is removed once every batch is done (none is written
        with ``resumable=False``: an uncached explanation leaves nothing under ``--out``)."""
        order = self.explain_order()
        targets, size = self.targets[order], self.config.batch_size
        batches = self.batches([self.examples[i] for i in order])
        partial = None
        if resumable and not self.from_file:
            partial = self._cache().partial(explainer)
        done = finished_batches(partial, batches, targets, size) if partial else []
        scores = [s for line in done for s in line["scores"]]
        seconds = sum(line["seconds"] for line in done)
        costs = [Cost.from_dict(line) for line in done]  # per batch; summed at the end
        with progress_bar(total=len(self.examples), initial=len(scores), leave=False,
                          desc=f"explain {explainer.spec.name}", show=self.config.progress
                          ) as bar, self.caller(explainer) as caller:
            for i in range(len(done), len(batches)):
                batch, start = batches[i][0], time.perf_counter()
                mine = targets[i * size : i * size + len(batch)]
                s = caller.explain(batch, mine, seed=self.seeds.explainer_seed)
                rows = [s[r, : int(n)].tolist() for r, n in enumerate(batch.lengths)]
                took = time.perf_counter() - start
                seconds += took
                costs.append(caller.cost)
                if partial:
                    append_batch(partial, i, batch, mine, rows, took, caller.cost)
                scores += rows
                bar.update(len(batch))
        if not is_reference(explainer) and self.config.isolation != "none":
            self._spot_check(explainer, batches, targets, scores)
        if partial:
            partial.unlink(missing_ok=True)
        return Explained(in_place(scores, order), self.targets.tolist(), seconds,
                         Cost.total(costs))

    def caller(self, explainer: Explainer, model=None):
        """``plugin_caller`` for this session's model (or ``model``: a sanity check's
        randomized copy of it), budget and confinement."""
        return plugin_caller(explainer, self.prepared.model if model is None else model,
                             time_budget_s=self.config.time_budget_s,
                             isolation=self.config.isolation, box=confinement(self.config))

    def explain_on(self, explainer: Explainer, model=None, *,
                   prepared: PreparedTask | None = None) -> list[list[float]]:
        """The explainer's scores of the session's examples on another model (the sanity
        checks): ``model``, fed this session's batches (a randomized copy of this
        model), or ``prepared``'s model, fed its own batches of the same examples (one
        retrained on permuted labels). Always for this session's targets (this model's
        predictions) and explainer seed, through ``caller`` (a plugin in its worker, a
        failure a PluginError); neither cached nor spot-checked."""
        order = self.explain_order()
        examples = [self.examples[i] for i in order]
        if prepared is not None:
            model = prepared.model
            batches = list(prepared.batches(examples, self.config.batch_size))
        else:
            batches = self.batches(examples)
        if model is None:
            raise ValueError("explain_on needs a model or a prepared task")
        model_eval(model)
        targets, scores, start = self.targets[order], [], 0
        with self.caller(explainer, model) as caller:
            for batch, *_ in batches:
                s = caller.explain(batch, targets[start:start + len(batch)],
                                   seed=self.seeds.explainer_seed)
                scores += [s[r, : int(n)].tolist() for r, n in enumerate(batch.lengths)]
                start += len(batch)
        return in_place(scores, order)

    def explain_order(self) -> list[int]:
        """The order in which the examples are explained: as they are on the CPU; by
        length on an accelerator (``bucketed``), so an explain batch holds rows of
        about one length. Scores come back in the examples' order either way."""
        n = len(self.examples)
        if not bucketed(self.config):
            return list(range(n))
        return sorted(range(n), key=lambda i: len(self.examples[i].tokens))

    def _spot_check(self, explainer: Explainer, batches, targets, scores) -> None:
        """A seeded sample of this run's batches explained again by a fresh worker, in
        other batches and alone (``validation.spot_check``): a PluginError on a mismatch."""
        size, padded, start = self.config.batch_size, [], 0
        for batch, *_ in batches:
            padded.append(scoring.padded(scores[start:start + len(batch)], batch.ids.shape))
            start += len(batch)
        seed = self.seeds.explainer_seed
        pick = int(content_hash([explainer.spec.id, seed, self.split]), 16) % 2 ** 31
        spot_check(explainer.spec.name, lambda: self.caller(explainer), [b[0] for b in batches],
                   [targets[i * size : i * size + len(b[0])] for i, b in enumerate(batches)],
                   padded, seed=seed, sample_seed=pick)

    # -- score -----------------------------------------------------------------------------

    def score(self, metric, scores: Sequence[Sequence[float]], *,
              explainer: Explainer | None = None) -> Scored:
        """One metric's per-example values (and statistics) for ``scores``.

        A plausibility metric sees only the examples that have a reference rationale;
        a retraining metric, or one that explains other models (the sanity checks), gets
        a ``TrainingInput`` (and needs ``explainer``).
        """
        start = time.perf_counter()
        rows0, asked0 = self.perturber.rows_forwarded, self.perturber.rows_requested
        if metric.spec.needs_training or metric.spec.needs_explainer:
            scored = scoring.score_training(self, metric, scores, explainer)
        else:
            scored = scoring.score_batches(self, metric, scores)
        scored.seconds = time.perf_counter() - start
        scored.rows_forwarded = self.perturber.rows_forwarded - rows0
        scored.rows_requested = self.perturber.rows_requested - asked0
        return scored

    # -- records ---------------------------------------------------------------------------

    def estimate(self, metric, scored: Scored) -> Estimate:
        """Mean and CI of ``scored`` (``recording.estimate``)."""
        return recording.estimate(metric, scored, seed=self.seeds.bootstrap, what=self.spec.id)

    def record(self, unit: Unit, explainer: Explainer, metric, scored: Scored,
               explained: Explained) -> ResultRecord:
        """The result record of one unit (its per-example rows: ``per_example_rows``)."""
        return recording.record(self, unit, explainer, metric, scored, explained)

    # -- helpers ---------------------------------------------------------------------------

    def batches(self, examples) -> list:
        """Collated batches of ``examples``, built once per list of examples: every
        metric and explainer call walks the same batches."""
        key = tuple(e.id for e in examples)
        if key not in self._collated:
            self._collated[key] = list(self.prepared.batches(examples, self.config.batch_size))
        return self._collated[key]


def bucketed(config: RunConfig) -> bool:
    """Whether explain batches are bucketed by length: on an accelerator, where a padded
    position costs what a real one does (the transformer attends over it) and rows are
    cheap. Not on the CPU: another batching rounds float32 differently, and a CPU run
    stays the same bit for bit (the perturbation engine's passes are length-sorted on
    every device, ``faithbench.benchmark.core.perturb``)."""
    return torch.device(config.device).type != "cpu"


def padded_share(lengths: list[int], order: list[int], size: int) -> float:
    """Padded positions / all positions of the batches of ``size`` taken in ``order``
    (what bucketing saves).

    >>> padded_share([1, 3, 1, 3], [0, 1, 2, 3], 2), padded_share([1, 3, 1, 3], [0, 2, 1, 3], 2)
    (0.3333333333333333, 0.0)
    """
    real = pads = 0
    for i in range(0, len(order), size):
        chunk = [lengths[j] for j in order[i : i + size]]
        real += sum(chunk)
        pads += max(chunk) * len(chunk) - sum(chunk)
    return pads / max(real + pads, 1)


def in_place(rows: list, order: list[int]) -> list:
    """``rows`` computed in ``order`` (row j is example ``order[j]``), in example order.

    >>> in_place(["b", "c", "a"], [1, 2, 0])
    ['a', 'b', 'c']
    """
    out: list = [None] * len(rows)
    for row, i in zip(rows, order):
        out[i] = row
    return out


def confinement(config: RunConfig) -> Confinement:
    """Plugin workers' limits; a sandbox also hides the results, data and model cache."""
    hidden: list[str | Path] = [config.out, cache_dir(),
                                *([config.data_dir] if config.data_dir else [])]
    return Confinement(sandbox=config.sandbox, memory_gib=config.plugin_memory_gib,
                       hidden=tuple(str(Path(p).resolve()) for p in hidden))
