"""One prepared model on one split: the evaluation session.

Every verb and the runner go through it, so the setup is written once: the session
owns the examples, the perturbation engine (whose memory shares identical variants
across metrics and explainers), the base predictions and the targets, computed once
each and on first use; it explains (with the explanation cache under ``--out``),
scores, and builds records and their provenance.

Data flows one way: ``open_session`` (task -> prepared model) -> ``explain`` ->
``score`` -> ``record``. Nothing here knows a concrete task: it sees the
``faithbench.api.PreparedTask`` protocol only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from faithbench import tasks as task_registry
from faithbench.benchmark.core.api import (
    Example,
    Explainer,
    MetricInput,
    PreparedTask,
    Task,
    TaskOptions,
    TrainingInput,
)
from faithbench.benchmark.core.cache import cache_dir
from faithbench.benchmark.core.errors import InputError, IntegrityError
from faithbench.benchmark.core.files import atomic_write, content_hash, file_hash
from faithbench.benchmark.core.isolation import Confinement, is_reference, plugin_caller
from faithbench.benchmark.core.perturb import Perturber
from faithbench.benchmark.core.provenance import environment
from faithbench.benchmark.core.records import (
    ResultRecord,
    append_jsonl,
    read_jsonl,
    write_jsonl_atomic,
)
from faithbench.benchmark.core.retrain import Retrainer
from faithbench.benchmark.core.stats import as_estimate, bootstrap, corpus_bootstrap
from faithbench.benchmark.core.validation import model_eval, spot_check
from faithbench.benchmark.plan import RunConfig, Unit, select, unit_key

log = logging.getLogger(__name__)


@dataclass
class Explained:
    """Per-example scores (one float per token) and the target they explain."""

    scores: list[list[float]]
    targets: list[int]
    seconds: float


@dataclass
class Scored:
    """One metric on the session's examples (a subset for plausibility metrics)."""

    ids: list[str]
    values: np.ndarray  # (E,) per-example values, in example order
    flags: dict[str, np.ndarray] = field(default_factory=dict)
    stats: np.ndarray | None = None  # (E, K) of a corpus-level metric
    seconds: float = 0.0
    rows_forwarded: int = 0
    rows_requested: int = 0


def open_session(task_name: str, config: RunConfig, seed: int | None = None
                 ) -> EvaluationSession:
    """Prepare task ``task_name``'s model for ``seed`` (default: the first of
    ``config.seeds``) and open a session on ``config.split`` / ``config.limit``
    (``session.on(examples)`` moves it to a user's examples)."""
    seed = config.seeds[0] if seed is None else seed
    task = task_registry.get_task(task_name)
    options = config.evaluation.task_options(seed)
    prepared = task.prepare(options, progress=config.progress)
    return EvaluationSession(prepared, config, seed=seed, task=task, options=options)


class EvaluationSession:
    """Examples, engine, base predictions and targets of one model on one split."""

    def __init__(self, prepared: PreparedTask, config: RunConfig, *, seed: int,
                 examples: list[Example] | None = None, task: Task | None = None,
                 options: TaskOptions | None = None, share: bool = True):
        self.prepared, self.config, self.seed = prepared, config, seed
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
        self._probs: torch.Tensor | None = None
        self._targets: torch.Tensor | None = None
        self._collated: dict[tuple[str, ...], list] = {}

    def on(self, examples: list[Example]) -> EvaluationSession:
        """A session of the same model on other examples (e.g. read from a user's file).
        It shares this session's perturbation engine: a variant either forwarded is
        answered from memory (exact: same model, and a key is what the model sees)."""
        other = EvaluationSession(self.prepared, self.config, seed=self.seed, examples=examples,
                                  task=self.task, options=self.options)
        other.perturber = self.perturber
        return other

    def on_split(self, split: str, limit: int | None = None) -> EvaluationSession:
        """A session of the same model on another split (e.g. ROAR explains the training
        split); its explanations are cached under their own split key."""
        config = replace(self.config, split=split, limit=limit, sample=None)
        return EvaluationSession(self.prepared, config, seed=self.seed, task=self.task,
                                 options=self.options)

    # -- computed once, on first use ------------------------------------------------------

    @property
    def base_probs(self) -> torch.Tensor:
        """(E, C) p(·|x) of every example (eval mode), shared by every explainer and metric."""
        if self._probs is None:
            model_eval(self.prepared.model)
            with torch.no_grad():
                out = [self.perturber.probs(b) for b, _, _ in self._batches(self.examples)]
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
        resumed run, or another verb on the same ``--out``, does not explain again.
        Raises PluginError on the first bad batch; each call is guarded
        (``faithbench.benchmark.core.isolation``).
        """
        cache = cache and not self.from_file
        found = self.cached(explainer) if cache else None
        if found is not None:
            return found
        explained = self._explain(explainer, resumable=cache)
        if cache:
            self.store(explainer, explained)
        return explained

    def cached(self, explainer: Explainer) -> Explained | None:
        """The cached explanations of the session's split, or None (also when the file's
        ids or tokens are not the session's examples, one by one: its explanations
        would belong to other sentences, so they are computed again). The file's
        sha256 must be the one written beside it: a changed file is an IntegrityError."""
        path = self._explanations_path(explainer)
        if not path.exists():
            return None
        seal = path.with_suffix(".sha256")
        if not seal.exists():
            log.warning("%s: no content hash beside it (written before faithbench kept one, "
                        "or interrupted); explaining again", path)
            return None
        if seal.read_text().strip() != file_hash(path):
            raise IntegrityError(path, "its content hash is not the one written beside it "
                                 f"({seal.name})", f"delete {path} and {seal} to explain "
                                 "again")
        rows = read_jsonl(path)
        if not rows:
            return None
        same = len(rows) == len(self.examples) and all(
            r.get("id") == e.id and r.get("tokens") == list(e.tokens)
            and len(r.get("scores", ())) == len(e.tokens) for r, e in zip(rows, self.examples))
        if not same:
            log.warning("%s: cached explanations are not of this session's examples; "
                        "explaining again", path)
            return None
        return Explained([r["scores"] for r in rows], [r["target"] for r in rows],
                         rows[0].get("seconds", 0.0))

    def store(self, explainer: Explainer, explained: Explained) -> None:
        """Put explanations computed elsewhere (e.g. by a sweep's worker on another
        machine) into this session's explanation cache."""
        path = self._explanations_path(explainer)
        seal = path.with_suffix(".sha256")
        # the old hash goes first: a run killed between the two writes leaves a file
        # without one (explained again), never new rows beside the old rows' hash (refused)
        seal.unlink(missing_ok=True)
        write_jsonl_atomic(path, [
            {"id": e.id, "tokens": list(e.tokens), "scores": s, "target": t,
             "seconds": explained.seconds}
            for e, s, t in zip(self.examples, explained.scores, explained.targets)])
        digest = file_hash(path)  # checked on every hit (``cached``)
        atomic_write(seal, lambda tmp: Path(tmp).write_text(digest + "\n"))

    def _explanations_path(self, explainer: Explainer) -> Path:
        assert self.split is not None  # only a split's explanations are cached
        key = unit_key(self.prepared.checkpoint, explainer.spec.id, "explanations", self.split,
                       self.limit, seed=self.seed, data=self.prepared.data_fingerprint,
                       explainer_seed=self.seeds.explainer)
        return (Path(self.config.out) / "explanations"
                / f"{self.spec.name}-{explainer.spec.name}-{key}.jsonl")

    def _explain(self, explainer: Explainer, *, resumable: bool = True) -> Explained:
        """Batch by batch. On a split, each finished batch is appended to a partial file
        beside the explanation cache, so a run that fails or is stopped at batch k starts
        again at batch k; the file is removed once every batch is done (none is written
        with ``resumable=False``: an uncached explanation leaves nothing under ``--out``)."""
        targets, size, batches = self.targets, self.config.batch_size, self._batches(self.examples)
        partial = None
        if resumable and not self.from_file:
            partial = self._explanations_path(explainer).with_suffix(".partial.jsonl")
        done = _finished_batches(partial, batches, targets, size) if partial else []
        scores = [s for line in done for s in line["scores"]]
        seconds = sum(line["seconds"] for line in done)
        bar = tqdm(total=len(self.examples), initial=len(scores), leave=False,
                   desc=f"explain {explainer.spec.name}", disable=not self.config.progress)
        with self.caller(explainer) as caller:
            for i in range(len(done), len(batches)):
                batch, start = batches[i][0], time.perf_counter()
                s = caller.explain(batch, targets[i * size : i * size + len(batch)],
                                   seed=self.seeds.explainer_seed)
                rows = [s[r, : int(n)].tolist() for r, n in enumerate(batch.lengths)]
                took = time.perf_counter() - start
                seconds += took
                if partial:
                    append_jsonl(partial, {"batch": i, "ids": list(batch.example_ids),
                                           "targets": targets[i * size : i * size + len(batch)]
                                           .tolist(), "scores": rows, "seconds": took})
                scores += rows
                bar.update(len(batch))
        bar.close()
        if not is_reference(explainer) and self.config.isolation != "none":
            self._spot_check(explainer, batches, targets, scores)
        if partial:
            partial.unlink(missing_ok=True)
        return Explained(scores, targets.tolist(), seconds)

    def caller(self, explainer: Explainer):
        """``plugin_caller`` for this session's model, budget and confinement."""
        return plugin_caller(explainer, self.prepared.model, time_budget_s=self.config.time_budget_s,
                             isolation=self.config.isolation, box=confinement(self.config))

    def _spot_check(self, explainer: Explainer, batches, targets, scores) -> None:
        """A seeded sample of this run's batches explained again by a fresh worker, in
        other batches and alone (``validation.spot_check``): a PluginError on a mismatch."""
        size, padded, start = self.config.batch_size, [], 0
        for batch, *_ in batches:
            padded.append(_padded(scores[start:start + len(batch)], batch.ids.shape))
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
        a retraining metric gets a ``TrainingInput`` (and needs ``explainer``).
        """
        start = time.perf_counter()
        rows0, asked0 = self.perturber.rows_forwarded, self.perturber.rows_requested
        if metric.spec.needs_training:
            scored = self._score_training(metric, scores, explainer)
        else:
            scored = self._score_batches(metric, scores)
        scored.seconds = time.perf_counter() - start
        scored.rows_forwarded = self.perturber.rows_forwarded - rows0
        scored.rows_requested = self.perturber.rows_requested - asked0
        return scored

    def _score_batches(self, metric, scores) -> Scored:
        examples, targets, probs = self.examples, self.targets, self.base_probs
        if metric.spec.needs_reference:
            keep = with_reference(examples)
            examples, scores = [examples[i] for i in keep], [scores[i] for i in keep]
            index = torch.tensor(keep, dtype=torch.long)
            targets, probs = targets.index_select(0, index), probs.index_select(0, index)
        rate = reference_rate(examples) if metric.spec.needs_reference else None
        size, values, stats = self.config.batch_size, [], []
        flags: dict[str, list] = {}
        bar = tqdm(total=len(examples), desc=f"score {metric.spec.name}", leave=False,
                   disable=not self.config.progress)
        model_eval(self.prepared.model)  # whatever ran before, metrics see no dropout
        for i, (batch, _, reference) in enumerate(self._batches(examples)):
            sl = slice(i * size, i * size + len(batch))
            out = metric.compute(MetricInput(
                batch=batch, scores=_padded(scores[sl], batch.ids.shape), target=targets[sl],
                base_probs=probs[sl], perturber=self.perturber, reference=reference,
                reference_rate=rate))
            values.append(out.values.double().cpu().numpy())
            for name, flag in out.flags.items():
                flags.setdefault(name, []).append(flag.cpu().numpy())
            if out.stats is not None:
                stats.append(out.stats.double().cpu().numpy())
            bar.update(len(batch))
        bar.close()
        _check_stats(metric, stats, len(values))
        scored = Scored(
            ids=[e.id for e in examples],
            values=np.concatenate(values) if values else np.empty(0),
            flags={k: np.concatenate(v) for k, v in flags.items()},
            stats=np.concatenate(stats) if stats else None,
        )
        if metric.spec.aggregation is None:
            return scored
        return _by_group(scored, [self.prepared.group_of(e) for e in examples],
                         metric.spec.aggregation)

    def _score_training(self, metric, scores, explainer) -> Scored:
        if explainer is None or self.task is None or self.options is None:
            raise InputError(f"metric {metric.spec.name} retrains models: it runs in "
                             "`faithbench run`, which hands it the task and the explainer")
        executor = self.config.execution.job_executor()
        out = metric.evaluate(TrainingInput(
            task=self.task, options=self.options, session=self, explainer=explainer,
            scores=[list(s) for s in scores],
            retrain=Retrainer(self.task, self.options, executor, progress=self.config.progress)))
        return Scored(ids=[e.id for e in self.examples], values=out.values.double().numpy(),
                      flags={k: v.numpy() for k, v in out.flags.items()},
                      stats=None if out.stats is None else out.stats.double().numpy())

    # -- records ---------------------------------------------------------------------------

    def estimate(self, metric, scored: Scored):
        """Mean and bootstrap CI over the examples that define the metric, or for a
        corpus-level metric the aggregated statistics with a bootstrap that re-aggregates
        resamples. A NaN value is undefined (e.g. ``taucorr_loo`` on a constant score
        vector): left out of n and the CI, and counted in ``undefined``."""
        if metric.spec.aggregation is not None:
            return as_estimate(corpus_bootstrap(scored.stats, metric.spec.aggregation,
                                                seed=self.seeds.bootstrap))
        undefined = np.isnan(scored.values)
        if len(undefined) and undefined.all():
            raise InputError(f"metric {metric.spec.id} is undefined (NaN) on all "
                             f"{len(undefined)} examples of {self.spec.id}; there is no "
                             "mean to report")
        return replace(bootstrap(scored.values[~undefined], seed=self.seeds.bootstrap),
                       undefined=int(undefined.sum()))

    def provenance(self) -> dict:
        """What every record says about the model it used: code and environment, data
        fingerprint, weights hash (``checkpoint``), cache key, and accuracy per split."""
        p = self.prepared
        return {**environment(), "data_fingerprint": p.data_fingerprint,
                "checkpoint": p.checkpoint, "cache_key": p.cache_key,
                "model_accuracy": p.accuracy}

    def config_provenance(self, explainer_spec: dict, metric_params: dict) -> dict:
        """``provenance.config`` of a record: the unit's own evaluation options (not the
        run's lists, output folder, notes or workers: a unit's provenance is the same
        whichever run computed it), the model's config, explainer and metric."""
        return {"run": self.config.evaluation.as_dict(), "task": self.prepared.config,
                "explainer": explainer_spec, "metric": metric_params}

    def record(self, unit: Unit, explainer: Explainer, metric, scored: Scored,
               explained: Explained) -> ResultRecord:
        """The result record of one unit (its per-example rows: ``per_example_rows``)."""
        estimate = self.estimate(metric, scored)
        return ResultRecord.build(
            metric.spec, estimate,
            key=unit.key,
            task=self.spec.id,
            model_seed=self.seed,
            explainer=explainer.spec.id,
            split=unit.split,
            per_example_file=f"per_example/{unit.key}.jsonl",
            provenance={
                **self.provenance(),
                "config": self.config_provenance(spec_dict(explainer.spec),
                                                 dict(metric.spec.params)),
                "seeds": {**self.seeds.as_dict(), "bootstrap": estimate.bootstrap_seed},
            },
            timing={"explain_s": explained.seconds, "metric_s": scored.seconds,
                    "rows_forwarded": scored.rows_forwarded,
                    "rows_requested": scored.rows_requested, "n_examples": len(self.examples)},
            extra={name: int(flag.sum()) for name, flag in scored.flags.items()},
        )

    # -- helpers ---------------------------------------------------------------------------

    def _batches(self, examples) -> list:
        """Collated batches of ``examples``, built once per list of examples: every
        metric and explainer call walks the same batches."""
        key = tuple(e.id for e in examples)
        if key not in self._collated:
            self._collated[key] = list(self.prepared.batches(examples, self.config.batch_size))
        return self._collated[key]


def _finished_batches(path: Path, batches: list, targets: torch.Tensor, size: int) -> list[dict]:
    """The lines of a partial explanation file that are this session's batches 0, 1, ...
    in order (same example ids, targets and lengths); anything after the first line that
    is not is cut off the file (e.g. written with another ``--batch-size``)."""
    lines = read_jsonl(path)
    good = 0
    for i, line in enumerate(lines[: len(batches)]):
        batch = batches[i][0]
        if (line.get("batch") != i or line.get("ids") != list(batch.example_ids)
                or line.get("targets") != targets[i * size : i * size + len(batch)].tolist()
                or [len(r) for r in line.get("scores", ())] != batch.lengths.tolist()):
            break
        good = i + 1
    if good < len(lines):
        log.warning("%s: %d of %d finished batches match this session; explaining the rest",
                    path, good, len(lines))
        write_jsonl_atomic(path, lines[:good])
    elif good:
        log.info("%s: resuming after %d finished batches", path, good)
    return lines[:good]


def per_example_rows(scored: Scored, *, undefined: bool = False) -> list[dict]:
    """``{"id", "value"}`` per example (and ``"stats"`` for a corpus-level metric); a
    value the example alone does not define (a zero denominator) is written as null.

    An example a per-example metric leaves undefined (NaN) has no row — the result's
    n and mean are over the rest, and its estimate counts them in ``undefined`` — unless
    ``undefined`` is set: then its row has a null value."""
    rows = []
    for i, (ex, v) in enumerate(zip(scored.ids, scored.values)):
        if scored.stats is None and np.isnan(v) and not undefined:
            continue
        row: dict = {"id": ex, "value": float(v) if np.isfinite(v) else None}
        if scored.stats is not None:
            row["stats"] = [float(x) for x in scored.stats[i]]
        rows.append(row)
    return rows


def spec_dict(spec) -> dict:
    return {"id": spec.id, "name": spec.name, "version": spec.version,
            "requires": sorted(spec.requires), "params": dict(spec.params),
            "deterministic": spec.deterministic, "citation": spec.citation}


def _by_group(scored: Scored, groups: list[str], aggregation) -> Scored:
    """A corpus-level metric's statistics summed per group (e.g. the rows of one
    sentence pair), in order of first appearance: the group is what the bootstrap and
    ``compare`` resample; its value is the aggregation of its own sums; flags count."""
    if groups == scored.ids or scored.stats is None:
        return scored
    order = list(dict.fromkeys(groups))
    position = {g: i for i, g in enumerate(order)}
    index = np.array([position[g] for g in groups])
    stats = np.zeros((len(order), scored.stats.shape[1]))
    np.add.at(stats, index, scored.stats)
    flags = {}
    for name, flag in scored.flags.items():
        flags[name] = np.zeros(len(order))
        np.add.at(flags[name], index, flag.astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.asarray(aggregation(stats), dtype=float)
    return Scored(ids=order, values=values, flags=flags, stats=stats)


def with_reference(examples: Sequence) -> list[int]:
    """Positions of the examples that have a non-empty reference rationale."""
    return [i for i, e in enumerate(examples) if e.reference is not None and any(e.reference)]


def reference_rate(examples: Sequence) -> float | None:
    """Mean over the examples with a reference of |reference| / n (None if none has one),
    counted in words where the tokens are subword pieces, as plausibility metrics count."""
    rates = []
    for e in examples:
        if e.reference is None or not len(e.reference):
            continue
        units = e.words if e.words is not None else range(len(e.reference))
        marked = {u for u, bit in zip(units, e.reference) if bit}
        rates.append(len(marked) / len(set(units)))
    return sum(rates) / len(rates) if rates else None


def confinement(config: RunConfig) -> Confinement:
    """Plugin workers' limits; a sandbox also hides the results, data and model cache."""
    hidden: list[str | Path] = [config.out, cache_dir(),
                                *([config.data_dir] if config.data_dir else [])]
    return Confinement(sandbox=config.sandbox, memory_gib=config.plugin_memory_gib,
                       hidden=tuple(str(Path(p).resolve()) for p in hidden))


def _padded(rows: Sequence[Sequence[float]], shape) -> torch.Tensor:
    """(B, T) float32 scores, row r's values at its first len(rows[r]) positions."""
    out = torch.zeros(shape, dtype=torch.float32)
    lengths = torch.tensor([len(r) for r in rows])
    flat = torch.tensor([v for r in rows for v in r], dtype=torch.float32)
    out[torch.arange(shape[1]).unsqueeze(0) < lengths.unsqueeze(1)] = flat
    return out


def _check_stats(metric, stats: list, n_batches: int) -> None:
    corpus = metric.spec.aggregation is not None
    if corpus and len(stats) != n_batches:
        raise ValueError(f"metric {metric.spec.name} is corpus-level but returned no stats")
    if not corpus and stats:
        raise ValueError(f"metric {metric.spec.name} returned stats but declares no aggregation")
