"""Compare two entries example by example, with ``benchmark.core.stats.paired_bootstrap``.

Values are joined on (task, model seed, example id), so only examples both entries
scored count; with several seeds each example's values are averaged over the shared
seeds first, and the bootstrap resamples examples. ``diff`` is mean(a) - mean(b); the
"better" column reads it through the metric's direction, and only when p < alpha.
"""

from __future__ import annotations

import math

from benchmark.core.errors import InputError
from benchmark.core.stats import ALPHA, N_RESAMPLES, SEED, paired_bootstrap
from leaderboard.entry import Entry, seed_means
from leaderboard.rank import FAMILIES, matches
from leaderboard.suite import require_same_suite, short_name

NO_DIFFERENCE = "no significant difference"


def compare(
    a: Entry, b: Entry, *, task: str | None = None, metric: str | None = None
) -> list[dict]:
    """One row per (task, metric) both entries have: task, family, metric, metric_name,
    direction, a, b, a_entry, b_entry, n, model_seeds, mean_a, mean_b, diff, ci_low,
    ci_high, p_value, confidence, better, better_entry."""
    if a.entry_id == b.entry_id:
        raise InputError(f"compare needs two different entries; got {a.label} twice")
    ra, rb = _results(a, task, metric), _results(b, task, metric)
    keys = sorted(
        ra.keys() & rb.keys(),
        key=lambda k: (
            FAMILIES.index(ra[k]["family"]) if ra[k]["family"] in FAMILIES else len(FAMILIES),
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
        if (rec_a["family"], rec_a["direction"]) != (rec_b["family"], rec_b["direction"]):
            raise InputError(
                f"task {t!r}, metric {m!r}: {a.label} has family/direction "
                f"{rec_a['family']}/{rec_a['direction']}, {b.label} has "
                f"{rec_b['family']}/{rec_b['direction']}"
            )
        rows.append(_compare_one(a, b, t, m, rec_a))
    return rows


def _results(e: Entry, task, metric) -> dict[tuple[str, str], dict]:
    """(task, metric) -> one of its records (they share family, direction, settings)."""
    out = {}
    for r in e.results:
        if matches(r["task"], task) and matches(r["metric"], metric):
            out.setdefault((r["task"], r["metric"]), r)
    return out


def _pairs(results: dict) -> str:
    return ", ".join(f"{t} {m}" for t, m in sorted(results)) or "nothing"


def _compare_one(a: Entry, b: Entry, task: str, metric: str, rec: dict) -> dict:
    va, vb = a.values(task, metric), b.values(task, metric)
    shared = va.keys() & vb.keys()
    xa, xb = seed_means(va, shared), seed_means(vb, shared)
    if not xa:
        raise InputError(
            f"entries {a.label} and {b.label} share no examples for task "
            f"{task!r}, metric {metric!r} ({len(va)} and {len(vb)} per-example "
            "values); a paired comparison needs the same examples"
        )
    ids = sorted(xa)
    est = rec["estimate"]
    confidence = est.get("confidence", 1 - ALPHA)
    alpha = round(1 - confidence, 12)
    d = paired_bootstrap(
        [xa[i] for i in ids],
        [xb[i] for i in ids],
        n_resamples=est.get("n_resamples", N_RESAMPLES),
        alpha=alpha,
        seed=est.get("bootstrap_seed", SEED),
    )
    better, better_entry = NO_DIFFERENCE, None
    if d.p_value < alpha and d.diff != 0 and rec["direction"] != "none":
        a_wins = (d.diff > 0) == (rec["direction"] == "higher")
        winner = a if a_wins else b
        better, better_entry = winner.explainer, winner.entry_id
    return {
        "task": task,
        "family": rec["family"],
        "metric": metric,
        "metric_name": short_name(metric),
        "direction": rec["direction"],
        "a": a.explainer,
        "b": b.explainer,
        "a_entry": a.entry_id,
        "b_entry": b.entry_id,
        "n": d.n,
        "model_seeds": sorted({seed for seed, _ in shared}),
        "mean_a": math.fsum(xa.values()) / len(xa),
        "mean_b": math.fsum(xb.values()) / len(xb),
        "diff": d.diff,
        "ci_low": d.ci_low,
        "ci_high": d.ci_high,
        "p_value": d.p_value,
        "confidence": confidence,
        "better": better,
        "better_entry": better_entry,
    }
