"""Compare two entries example by example: a paired test, Holm-corrected.

Values are joined on (task, model seed, example id), so only examples both entries
define count (an example where either leaves the metric undefined, NaN, is left out
and counted in ``undefined``), and with several seeds only the examples defined under
every shared seed; ``n`` is how many are compared. Per (task, metric):

- one model seed: ``p_value`` from ``faithbench.benchmark.core.stats.sign_flip_test`` on the
  per-example differences (exact when 2^n fits the resample budget), conditional on
  the checkpoint; the CI of ``diff`` = mean(a) - mean(b) is the bootstrap over examples.
- several seeds (both entries explain the same checkpoints): ``paired_seed_test`` on
  the (seeds x examples) matrix of a - b, a t over the seed means plus the example
  variance, which also covers retraining; its p is below alpha exactly when its CI
  excludes 0.
- ``p_holm``: Holm's correction across every row one ``compare`` call returns (all
  tasks x metrics), since a reader scans them all for a winner. ``better`` reads
  ``diff`` through the metric's direction, and only when p_holm < alpha *and* the CI
  of ``diff`` excludes 0.

A corpus-level metric (AER-like, a record with an ``aggregation``) is compared on its
per-example statistics instead: with one seed approximate randomization (swap each
example's statistics between the entries) and a bootstrap of the difference of the
re-aggregated values; with several, ``paired_seed_test`` on linearized statistics.
"""

from __future__ import annotations

import math

from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.ids import short_name
from faithbench.benchmark.core.names import FAMILIES
from faithbench.benchmark.core.records import ResultRecord
from faithbench.benchmark.core.stats import (
    BOOTSTRAP,
    Aggregation,
    holm,
    paired_corpus_test,
    paired_seed_test,
    sign_flip_test,
)
from faithbench.leaderboard.entry import Entry, matching_entries
from faithbench.leaderboard.rank import matches, scored_count, seed_matrix
from faithbench.leaderboard.rows import Compared
from faithbench.leaderboard.suite import (
    require_same_suite,
    suite_differences,
    suite_label,
    suite_labels,
)

NO_DIFFERENCE = "no significant difference"


def find_pair(entries: list[Entry], a: str, b: str, task: str | None = None,
              root=None) -> tuple[Entry, Entry]:
    """The two entries ``a`` and ``b`` name (ids, id prefixes, explainer ids or names)
    that can be compared: on ``task`` (or on every task they share), the same suite.
    A name with entries on several suites (a quick ``--limit`` run beside the full
    one) is resolved by the other side; where that leaves several pairs, or none, the
    error lists the candidates with their ids and suites."""
    ours_a, ours_b = matching_entries(entries, a, root), matching_entries(entries, b, root)
    pairs = [(x, y) for x in ours_a for y in ours_b
             if x.entry_id != y.entry_id and _comparable(x, y, task)]
    if len(pairs) == 1:
        return pairs[0]
    if not pairs and len(ours_a) == len(ours_b) == 1:
        return ours_a[0], ours_b[0]  # ``compare`` says what differs
    on = f" on task {task!r}" if task else ""
    listing = "\n".join(f"  {e.entry_id[:8]}  {e.explainer}  " + "; ".join(
        f"{t}: {suite_label(s)}" for t, s in sorted(e.suite.items()) if matches(t, task))
        for e in {e.entry_id: e for e in [*ours_a, *ours_b]}.values())
    if not pairs:
        raise InputError(f"no entry named {a!r} was scored on the same suite as one named "
                         f"{b!r}{on}; the candidates:\n{listing}")
    narrow = "" if task else " or --task"
    raise InputError(f"{a!r} and {b!r} name {len(pairs)} comparable pairs{on}; give entry "
                     f"ids (a unique prefix is enough){narrow}:\n{listing}")


def _comparable(x: Entry, y: Entry, task: str | None) -> bool:
    shared = [t for t in x.suite.keys() & y.suite.keys() if matches(t, task)]
    return bool(shared) and not any(suite_differences(x, y, t) for t in shared)


def compare(
    a: Entry, b: Entry, *, task: str | None = None, metric: str | None = None
) -> list[Compared]:
    """One row per (task, metric) both entries have, paired on the examples and seeds
    both scored.

    ``p_holm`` is adjusted over the rows of this call, so narrowing ``task`` or
    ``metric`` changes it."""
    if a.entry_id == b.entry_id:
        raise InputError(f"compare needs two different entries; got {a.label} twice")
    ra, rb = _results(a, task, metric), _results(b, task, metric)
    keys = sorted(
        ra.keys() & rb.keys(),
        key=lambda k: (
            FAMILIES.index(ra[k].family) if ra[k].family in FAMILIES else len(FAMILIES),
            k,
        ),
    )
    if not keys:
        asked = "".join(f", {k}={v!r}" for k, v in (("task", task), ("metric", metric)) if v)
        raise InputError(
            f"entries {a.label} and {b.label} share no (task, metric) results"
            f"{asked}; a has {_pairs(ra)}; b has {_pairs(rb)}"
        )
    rows = []
    for t, m in keys:
        require_same_suite(a, b, t)
        rec_a, rec_b = ra[(t, m)], rb[(t, m)]
        if (rec_a.family, rec_a.direction) != (rec_b.family, rec_b.direction):
            raise InputError(
                f"task {t!r}, metric {m!r}: {a.label} has family/direction "
                f"{rec_a.family}/{rec_a.direction}, {b.label} has "
                f"{rec_b.family}/{rec_b.direction}"
            )
        rows.append(_compare_one(a, b, t, m, rec_a))
    return [Compared(**row, **_decide(row, p, a, b))
            for row, p in zip(rows, holm([r["p_value"] for r in rows]))]


def _results(e: Entry, task, metric) -> dict[tuple[str, str], ResultRecord]:
    """(task, metric) -> one of its records (they share family, direction, settings)."""
    out: dict[tuple[str, str], ResultRecord] = {}
    for r in e.results:
        if matches(r.task, task) and matches(r.metric, metric):
            out.setdefault((r.task, r.metric), r)
    return out


def _pairs(results: dict) -> str:
    return ", ".join(f"{t} {m}" for t, m in sorted(results)) or "nothing"


def _compare_one(a: Entry, b: Entry, task: str, metric: str, rec: ResultRecord) -> dict:
    """The row's fields before Holm's adjustment over the call's rows (``_decide``)."""
    if rec.aggregation is not None:
        return _compare_corpus(a, b, task, metric, rec)
    va, vb = a.values(task, metric), b.values(task, metric)
    shared = va.keys() & vb.keys()
    seeds = sorted({seed for seed, _ in shared})
    ids, ma = seed_matrix({k: va[k] for k in shared}, seeds)  # (S, N) each, same ids
    _, mb = seed_matrix({k: vb[k] for k in shared}, seeds)
    # per example, the mean over the shared seeds (examples, not (seed, example) pairs,
    # are what the test permutes: one sentence under two seeds is not two draws)
    xa = dict(zip(ids, (math.fsum(col) / len(col) for col in zip(*ma))))
    xb = dict(zip(ids, (math.fsum(col) / len(col) for col in zip(*mb))))
    if not xa:
        raise InputError(
            f"entries {a.label} and {b.label} share no examples for task "
            f"{task!r}, metric {metric!r} ({len(va)} and {len(vb)} per-example "
            "values); a paired comparison needs the same examples"
        )
    settings = rec.estimate.settings()
    if len(seeds) > 1:  # seed-aware: the same checkpoints under a and b, rows paired
        d = paired_seed_test(ma, mb, alpha=settings["alpha"])
    else:
        d = sign_flip_test([xa[i] for i in ids], [xb[i] for i in ids], **settings)
    return _row(a, b, task, metric, rec, d, seeds,
                means=(math.fsum(xa.values()) / len(xa), math.fsum(xb.values()) / len(xb)))


def _compare_corpus(a: Entry, b: Entry, task: str, metric: str, rec: ResultRecord) -> dict:
    """A corpus-level metric, on the examples both entries scored under every shared
    seed: one seed, approximate randomization over the examples' statistics
    (``faithbench.benchmark.core.stats.paired_corpus_test``); several, ``paired_seed_test`` on
    their linearized statistics."""
    sa, sb = a.stats(task, metric), b.stats(task, metric)
    shared = sa.keys() & sb.keys()
    seeds = sorted({seed for seed, _ in shared})
    ids, ca = seed_matrix({k: sa[k] for k in shared}, seeds)  # (S, N, K)
    _, cb = seed_matrix({k: sb[k] for k in shared}, seeds)
    if not ids:
        raise InputError(
            f"entries {a.label} and {b.label} share no examples for task {task!r}, metric "
            f"{metric!r}; a paired comparison needs the same examples"
        )
    assert rec.aggregation is not None  # a corpus-level metric's record
    agg = Aggregation.from_dict(rec.aggregation)
    settings = rec.estimate.settings()
    if len(seeds) > 1:
        d = paired_seed_test(ca, cb, agg, alpha=settings["alpha"])
    else:
        d = paired_corpus_test(ca, cb, agg, **settings)
    mean_a = math.fsum(float(agg([math.fsum(c) for c in zip(*row)])) for row in ca) / len(seeds)
    mean_b = math.fsum(float(agg([math.fsum(c) for c in zip(*row)])) for row in cb) / len(seeds)
    return _row(a, b, task, metric, rec, d, seeds, means=(mean_a, mean_b))


def _row(a: Entry, b: Entry, task: str, metric: str, rec: ResultRecord, d, seeds, *,
         means) -> dict:
    scored = max(scored_count([r for r in e.results if (r.task, r.metric) == (task, metric)
                               and r.model_seed in seeds]) for e in (a, b))
    return {
        "task": task,
        "suite": suite_labels([[a, b]], task)[0],
        "family": rec.family,
        "metric": metric,
        "metric_name": short_name(metric),
        "direction": rec.direction,
        "a": a.explainer,
        "b": b.explainer,
        "a_entry": a.entry_id,
        "b_entry": b.entry_id,
        "n": d.n,
        "undefined": scored - d.n,
        "model_seeds": seeds,
        "n_seeds": len(seeds),
        "mean_a": means[0],
        "mean_b": means[1],
        "diff": d.diff,
        "ci_low": d.ci_low,
        "ci_high": d.ci_high,
        "ci_method": BOOTSTRAP if len(seeds) == 1 else d.test,
        "p_value": d.p_value,
        "test": d.test,
        "confidence": rec.estimate.confidence,
    }


def _decide(row: dict, p_holm: float, a: Entry, b: Entry) -> dict:
    """p_holm, and the winner where it is below alpha, the CI of the difference excludes
    zero, and the metric has a side."""
    alpha = round(1 - row["confidence"], 12)
    ci_excludes_zero = row["ci_low"] > 0 or row["ci_high"] < 0
    if p_holm < alpha and ci_excludes_zero and row["diff"] != 0 and row["direction"] != "none":
        a_wins = (row["diff"] > 0) == (row["direction"] == "higher")
        winner = a if a_wins else b
        return {"p_holm": p_holm, "better": winner.explainer, "better_entry": winner.entry_id}
    return {"p_holm": p_holm, "better": NO_DIFFERENCE, "better_entry": None}
