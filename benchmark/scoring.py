"""Scoring explanations with one metric on a session's examples: per-example values
(and a corpus-level metric's statistics), batch by batch through the shared engine.

A plausibility metric sees only the examples that have a reference rationale; a
retraining metric (ROAR) gets a ``TrainingInput`` with a retrainer on the run's
executor. On a generation task a row is one step of a sequence: the metric compares
log-probabilities, and a sequence's value is the mean over its steps (``_mean_by_group``),
so intervals resample sequences, not steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from faithbench.benchmark.core.api import GENERATION, Explainer, MetricInput, TrainingInput
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.progress import progress_bar
from faithbench.benchmark.core.retrain import Retrainer
from faithbench.benchmark.core.validation import model_eval

if TYPE_CHECKING:
    from faithbench.benchmark.session import EvaluationSession


@dataclass
class Scored:
    """One metric on the session's examples (a subset for plausibility metrics)."""

    ids: list[str]
    values: np.ndarray  # (E,) per-example values, in example order
    flags: dict[str, np.ndarray] = field(default_factory=dict)
    stats: np.ndarray | None = None  # (E, K) of a corpus-level metric
    curve: np.ndarray | None = None  # (E, V) an erasure metric's per-step values, NaN-padded
    seconds: float = 0.0
    rows_forwarded: int = 0
    rows_requested: int = 0


def score_batches(session: EvaluationSession, metric, scores: Sequence[Sequence[float]]
                  ) -> Scored:
    """``metric`` on ``scores`` of the session's examples, batch by batch."""
    examples, targets, probs = session.examples, session.targets, session.base_probs
    if metric.spec.needs_reference:
        keep = with_reference(examples)
        examples, scores = [examples[i] for i in keep], [scores[i] for i in keep]
        index = torch.tensor(keep, dtype=torch.long)
        targets, probs = targets.index_select(0, index), probs.index_select(0, index)
    rate = reference_rate(examples) if metric.spec.needs_reference else None
    steps = session.spec.kind == GENERATION
    size, values, stats, curves = session.config.batch_size, [], [], []
    flags: dict[str, list] = {}
    model_eval(session.prepared.model)  # whatever ran before, metrics see no dropout
    with progress_bar(total=len(examples), desc=f"score {metric.spec.name}", leave=False,
                      show=session.config.progress) as bar:
        for i, (batch, _, reference) in enumerate(session.batches(examples)):
            sl = slice(i * size, i * size + len(batch))
            out = metric.compute(MetricInput(
                batch=batch, scores=padded(scores[sl], batch.ids.shape), target=targets[sl],
                base_probs=probs[sl], perturber=session.perturber, reference=reference,
                reference_rate=rate, log_target=steps))
            values.append(out.values.double().cpu().numpy())
            for name, flag in out.flags.items():
                flags.setdefault(name, []).append(flag.cpu().numpy())
            if out.stats is not None:
                stats.append(out.stats.double().cpu().numpy())
            if out.curve is not None:
                curves.append(out.curve.double().cpu().numpy())
            bar.update(len(batch))
    _check_stats(metric, stats, len(values))
    scored = Scored(
        ids=[e.id for e in examples],
        values=np.concatenate(values) if values else np.empty(0),
        flags={k: np.concatenate(v) for k, v in flags.items()},
        stats=np.concatenate(stats) if stats else None,
        curve=nan_padded(curves) if len(curves) == len(values) and curves else None,
    )
    if metric.spec.aggregation is None:
        return _mean_by_group(scored, [session.prepared.group_of(e) for e in examples]) \
            if steps else scored
    return _by_group(scored, [session.prepared.group_of(e) for e in examples],
                     metric.spec.aggregation)


def nan_padded(blocks: list[np.ndarray]) -> np.ndarray:
    """(sum of rows, widest) the blocks stacked, NaN right of a narrower block's columns
    (an AOPC batch of short sentences has fewer steps than the next)."""
    width = max(b.shape[1] for b in blocks)
    return np.concatenate([np.pad(b, ((0, 0), (0, width - b.shape[1])), constant_values=np.nan)
                           for b in blocks])


def score_training(session: EvaluationSession, metric, scores: Sequence[Sequence[float]],
                   explainer: Explainer | None) -> Scored:
    """A retraining metric (or one that explains other models: the sanity checks): it
    gets the task, the explainer and a retrainer."""
    if explainer is None or session.task is None or session.options is None:
        does = "retrains models" if metric.spec.needs_training else "runs the explainer again"
        raise InputError(f"metric {metric.spec.name} {does}: it runs in "
                         "`faithbench run`, which hands it the task and the explainer")
    executor = session.config.execution.job_executor()
    out = metric.evaluate(TrainingInput(
        task=session.task, options=session.options, session=session, explainer=explainer,
        scores=[list(s) for s in scores],
        retrain=Retrainer(session.task, session.options, executor,
                          progress=session.config.progress)))
    return Scored(ids=[e.id for e in session.examples], values=out.values.double().numpy(),
                  flags={k: v.numpy() for k, v in out.flags.items()},
                  stats=None if out.stats is None else out.stats.double().numpy())


def per_example_rows(scored: Scored, *, undefined: bool = False) -> list[dict]:
    """``{"id", "value"}`` per example (and ``"stats"`` for a corpus-level metric,
    ``"curve"`` for an erasure metric: its per-step values, null where the example has
    no such step); a value the example alone does not define (a zero denominator) is
    written as null.

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
        if scored.curve is not None:
            row["curve"] = [float(x) if np.isfinite(x) else None for x in scored.curve[i]]
        rows.append(row)
    return rows


def _by_group(scored: Scored, groups: list[str], aggregation) -> Scored:
    """A corpus-level metric's statistics summed per group (e.g. the rows of one
    sentence pair), in order of first appearance: the group is what the bootstrap and
    ``compare`` resample; its value is the aggregation of its own sums; flags count."""
    if groups == scored.ids or scored.stats is None:
        return scored
    order, index = _group_index(groups)
    stats = np.zeros((len(order), scored.stats.shape[1]))
    np.add.at(stats, index, scored.stats)
    flags = _counted(scored.flags, index, len(order))
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.asarray(aggregation(stats), dtype=float)
    return Scored(ids=order, values=values, flags=flags, stats=stats)


def _mean_by_group(scored: Scored, groups: list[str]) -> Scored:
    """Per-example values (and curves) averaged per group, in order of first appearance:
    a generated sequence's value is the mean over its steps that define the metric (NaN
    where none does); flags count the steps.

    >>> s = Scored(ids=["a-0", "a-1", "b-0"], values=np.array([1.0, 3.0, np.nan]),
    ...            curve=np.array([[1.0, np.nan], [3.0, 5.0], [np.nan, np.nan]]))
    >>> g = _mean_by_group(s, ["a", "a", "b"])
    >>> g.ids, g.values.tolist(), g.curve.tolist()[0]
    (['a', 'b'], [2.0, nan], [2.0, 5.0])
    """
    order, index = _group_index(groups)

    def mean(values: np.ndarray) -> np.ndarray:
        shape = (len(order), *values.shape[1:])
        total, count = np.zeros(shape), np.zeros(shape)
        defined = np.isfinite(values)
        np.add.at(total, index, np.where(defined, values, 0.0))
        np.add.at(count, index, defined.astype(float))
        with np.errstate(invalid="ignore"):
            return np.where(count > 0, total / np.maximum(count, 1), np.nan)

    return Scored(ids=order, values=mean(scored.values),
                  flags=_counted(scored.flags, index, len(order)),
                  curve=None if scored.curve is None else mean(scored.curve),
                  seconds=scored.seconds, rows_forwarded=scored.rows_forwarded,
                  rows_requested=scored.rows_requested)


def _group_index(groups: list[str]) -> tuple[list[str], np.ndarray]:
    """The groups in order of first appearance, and each row's group position."""
    order = list(dict.fromkeys(groups))
    position = {g: i for i, g in enumerate(order)}
    return order, np.array([position[g] for g in groups], dtype=int)


def _counted(flags: dict[str, np.ndarray], index: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """Each flag's count per group."""
    out = {}
    for name, flag in flags.items():
        out[name] = np.zeros(n)
        np.add.at(out[name], index, flag.astype(float))
    return out


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


def padded(rows: Sequence[Sequence[float]], shape) -> torch.Tensor:
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
