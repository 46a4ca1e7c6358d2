"""Erasure curves: an erasure metric's mean value at each step (the drop in p_ŷ with
k words removed for AOPC, at each bin's fraction for comprehensiveness and
sufficiency) with the interval the leaderboard gives its mean — the percentile
bootstrap over examples with one model seed, the t over seed means plus the example
variance with several (``faithbench.benchmark.core.stats.seed_estimate``), at each
step over the examples that reach it under every seed. The AOPC is the mean of its
curve's points per example, so a curve shows where two explainers' AOPCs part."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from faithbench.benchmark.core.records import ResultRecord
from faithbench.benchmark.core.stats import seed_estimate
from faithbench.leaderboard.entry import Entry
from faithbench.leaderboard.rank import seed_matrix

K_AXIS, FRACTION_AXIS = "words removed (k)", "fraction of words"


@dataclass(frozen=True)
class Curve:
    """One (entry, task, metric)'s curve: x, and per point the mean, CI and n."""

    entry_id: str
    task: str
    metric: str
    axis: str  # K_AXIS or FRACTION_AXIS
    x: list[float]
    mean: list[float]
    ci_low: list[float]
    ci_high: list[float]
    n: list[int]

    def as_dict(self) -> dict:
        return asdict(self)


def x_axis(rec: ResultRecord, width: int) -> tuple[str, list[float]]:
    """The axis of a curve ``width`` points wide: its metric's bins where it has them
    (comprehensiveness, sufficiency), else k = 1..width (AOPC)."""
    bins = ((rec.provenance.config or {}).get("metric") or {}).get("bins")
    if bins:
        return FRACTION_AXIS, [float(b) for b in bins][:width]
    return K_AXIS, [float(k) for k in range(1, width + 1)]


def curve_of(entry: Entry, task: str, metric: str) -> Curve | None:
    """The curve of ``metric`` on ``task`` in ``entry``, or None where its rows have no
    curve points (not an erasure metric, or written before curves were stored)."""
    points = entry.curves(task, metric)
    recs = [r for r in entry.results if r.task == task and r.metric == metric]
    if not points or not recs:
        return None
    seeds = sorted({r.model_seed for r in recs})
    width = max(len(c) for c in points.values())
    axis, xs = x_axis(recs[0], width)
    est = recs[0].estimate
    out: dict[str, list] = {"mean": [], "ci_low": [], "ci_high": [], "n": []}
    kept = []
    for step in range(len(xs)):
        at = {key: c[step] for key, c in points.items() if step < len(c) and c[step] is not None}
        ids, matrix = seed_matrix(at, seeds)
        if not ids:
            continue
        b = seed_estimate(matrix, **est.settings())
        kept.append(xs[step])
        for name, value in (("mean", b.mean), ("ci_low", b.ci_low), ("ci_high", b.ci_high)):
            out[name].append(float(value))
        out["n"].append(int(b.n))
    return Curve(entry.entry_id, task, metric, axis, kept, **out) if kept else None


def curves(entries: list[Entry]) -> list[Curve]:
    """Every curve of every entry, in entry, task and metric order."""
    found = []
    for e in entries:
        for task, metric in dict.fromkeys((r.task, r.metric) for r in e.results):
            c = curve_of(e, task, metric)
            if c is not None:
                found.append(c)
    return found
