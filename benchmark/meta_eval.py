"""Meta-evaluation: on models whose evidence is known, which explainer finds it, and
does each faithfulness metric rank the explainers the way the truth does?

A ground-truth model is one whose test examples carry a ``reference`` that marks the
tokens the model must use: the shortcut tasks (``shortcut_single``, ``shortcut_pair``,
Bastings et al. 2022) and the synthetic task's planted rationales. Beside the
explainers under test, two oracles are scored on every model: ``ground_truth`` (the
reference tokens first: the ceiling) and ``inverted_ground_truth`` (them last: a
deliberately wrong explainer). A ground truth orders only its own tokens, so within
the truth and within the rest both oracles order tokens as the ``random`` explainer
does (``oracle_scores``): each differs from ``random``, which is scored too, only in
where the truth is.

Three tables come out of one values file (``<out>/meta_eval/values.jsonl``: every
example's value of every (model, explainer, metric), appended as computed, so an
interrupted run resumes where it stopped):

1. ``explainer_table``: per ground-truth model, each explainer's precision@k
   (``r_precision``, k = |reference|) and ``mean_rank``, the paper's two measures,
   with the 95 % interval over seeds and examples (``core.stats.seed_estimate``), and
   the model's reliance on its shortcut (``reliance``).
2. ``metric_table``: per (metric, ground-truth task): is ``ground_truth`` ranked first
   and ``inverted_ground_truth`` last (``placed``: yes / no / tie from intervals of
   the gaps to every other explainer), the Kendall τ-b between the metric's ranking of all
   explainers and their precision@k ranking (pooled over seeds; the per-seed range
   beside it), and, for an erasure metric, the share of explainer pairs whose order
   flips between the ``delete`` and ``mask`` erasers.
3. ``metric_agreement``: Kendall τ-b between two metrics' rankings of the explainers,
   per model seed, from any run's results: which metrics measure the same thing.

A model scored again on other examples (another ``--sample``) replaces its earlier
values in the tables: the file keeps both, the last one read wins.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from faithbench.benchmark.core import seed_interval, stats
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.records import append_jsonl, read_jsonl
from faithbench.benchmark.core.validation import model_eval

log = logging.getLogger(__name__)
GROUND_TRUTH, INVERTED = "ground_truth", "inverted_ground_truth"
ORACLES = (GROUND_TRUTH, INVERTED)
TRUTH_MEASURES = ("r_precision", "mean_rank")  # precision@k and mean rank
TRUTH_BOUNDS = {"r_precision": (0.0, 1.0), "mean_rank": (1.0, math.inf)}
# a ground truth is one only where the model follows it: the scored examples' labels are
# the ones the planted tokens decide, and the protocol asks for (near) 100 % accuracy on
# them before any explainer is scored (Bastings et al. report 99.7 % at the least)
RELIANCE_MIN = 0.95
VALUES = "values.jsonl"
# tasks whose references mark what the model must use (planted); a human rationale
# (SST-2's phrases, e-SNLI) says what people find plausible, not what a model relied on
def ground_truth_tasks() -> list[str]:
    """The registered tasks that plant their references (``TaskSpec.ground_truth``)."""
    from faithbench import tasks as task_registry

    return [name for name, task in task_registry.REGISTRY.items() if task.spec.ground_truth]


def planted(name: str, config) -> bool:
    """Whether task ``name``'s references are a ground truth: a task that plants them, or
    a user's dataset whose rationale column is declared planted (an unknown name: "did
    you mean")."""
    from faithbench import tasks as task_registry

    task = task_registry.get_task(name)
    if task.spec.ground_truth:
        return True
    own = config.dataset
    return (name in task_registry.OWN_DATA and own is not None and own.rationale is not None
            and own.rationale_kind == "planted")


def oracle_scores(name: str, references: Iterable[Sequence[bool] | None],
                  random: Sequence[Sequence[float]]) -> list[list[float]]:
    """The oracles' scores of examples with these references: 1 (ground truth) or −1
    (inverted) on reference tokens, 0 elsewhere, plus the ``random`` explainer's score
    (in [0, 1)) divided by n + 1 (n = the example's tokens). The small random part
    orders the tokens within each group as ``random`` does and never crosses groups,
    even when a metric sums the pieces of a word (at most n pieces of less than
    1/(n + 1) each); metrics that read magnitudes (the soft ones) see a mask.

    >>> oracle_scores(INVERTED, [(False, True, True)], [[0.5, 0.25, 0.75]])
    [[0.125, -0.9375, -0.8125]]
    """
    sign = {GROUND_TRUTH: 1.0, INVERTED: -1.0}[name]
    return [[sign * float(r) + s / (len(scores) + 1)
             for s, r in zip(scores, ref or (), strict=True)]
            for ref, scores in zip(references, random, strict=True)]


def with_truth(examples) -> list:
    """The examples whose reference marks at least one token: the only ones with a
    ground truth (a shortcut task's test split and the synthetic task: all of them)."""
    return [e for e in examples if e.reference is not None and any(e.reference)]


# -- the values file ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Model:
    """One ground-truth model: task id, seed, weights hash and the examples scored."""

    task: str
    seed: int
    checkpoint: str
    selection: str

    @property
    def key(self) -> dict:
        return dataclasses.asdict(self)


def relies(row: dict) -> bool:
    """Whether a reliance row's model follows its ground truth (``RELIANCE_MIN``)."""
    return row["scored_accuracy"] >= RELIANCE_MIN


def row_key(model: Model, explainer: str, metric: str) -> str:
    return content_hash({**model.key, "explainer": explainer, "metric": metric})


def write_values(path: Path, model: Model, explainer: str, metric: str, direction: str,
                 ids: Sequence[str], values: Sequence[float]) -> None:
    append_jsonl(path, {"kind": "values", "key": row_key(model, explainer, metric),
                        **model.key, "explainer": explainer, "metric": metric,
                        "direction": direction, "ids": list(ids),
                        "values": [None if math.isnan(v) else float(v) for v in values]})


def write_reliance(path: Path, model: Model, row: dict) -> None:
    append_jsonl(path, {"kind": "reliance", "key": row_key(model, "-", "reliance"),
                        **model.key, **row})


@dataclasses.dataclass
class Values:
    """The values file read back: {(task, metric, explainer): {seed: (ids, values)}},
    each metric's direction, and the reliance rows (the last one per task and seed).
    A model whose accuracy on the scored examples is below ``RELIANCE_MIN`` does not
    follow its ground truth: its reliance row says so (``relies`` False) and its values
    are left out of every table."""

    rows: dict
    direction: dict
    reliance: list

    @classmethod
    def read(cls, path: Path) -> Values:
        if not path.exists():
            raise InputError(f"{path}: no meta-evaluation values here (run `faithbench "
                             "meta-eval` with this --out first)")
        return cls.of_rows(read_jsonl(path))

    @classmethod
    def of_rows(cls, lines: Iterable[dict]) -> Values:
        rows, direction, reliance = {}, {}, {}
        for row in lines:
            if row["kind"] == "reliance":
                reliance[(row["task"], row["seed"])] = row
                continue
            values = np.array([np.nan if v is None else v for v in row["values"]], float)
            rows.setdefault((row["task"], row["metric"], row["explainer"]), {})[row["seed"]] = (
                tuple(row["ids"]), values)
            direction[row["metric"]] = row["direction"]
        for (task, seed), row in reliance.items():
            row["relies"] = relies(row)
            if not row["relies"]:
                for by_seed in (v for (t, _, _), v in rows.items() if t == task):
                    by_seed.pop(seed, None)
        rows = {k: v for k, v in rows.items() if v}
        return cls(rows, direction, list(reliance.values()))

    def tasks(self) -> list[str]:
        return list(dict.fromkeys(t for t, _, _ in self.rows))

    def metrics(self, task: str) -> list[str]:
        return list(dict.fromkeys(m for t, m, _ in self.rows if t == task))

    def explainers(self, task: str, metric: str) -> list[str]:
        return [e for t, m, e in self.rows if t == task and m == metric]

    def measure(self, task: str, name: str) -> str | None:
        """The id of ground-truth measure ``name`` (``r_precision``) in ``task``'s rows."""
        return next((m for m in self.metrics(task) if base_name(m) == name), None)

    def seeds(self, task: str, metrics: Sequence[str], explainers: Sequence[str]) -> list[int]:
        """The model seeds on which every one of ``explainers`` has every one of
        ``metrics`` (a run still going, or stopped, has some seeds only part-done)."""
        sets = [set(self.rows.get((task, m, e), {})) for m in metrics for e in explainers]
        return sorted(set.intersection(*sets)) if sets else []

    def matrix(self, task: str, metric: str, explainer: str,
               seeds: Sequence[int] | None = None) -> tuple[list[int], np.ndarray]:
        """(seeds, (S, N) values) of one explainer (on ``seeds``, default all it has),
        examples in the first seed's order."""
        by_seed = self.rows[(task, metric, explainer)]
        seeds = sorted(by_seed) if seeds is None else list(seeds)
        ids = by_seed[seeds[0]][0]
        for s in seeds:
            if by_seed[s][0] != ids:
                raise InputError(f"meta-eval values of {task} {metric} {explainer}: seed {s} "
                                 f"scored other examples than seed {seeds[0]}; use the same "
                                 "--limit/--sample for every seed")
        return seeds, np.stack([by_seed[s][1] for s in seeds])


# -- tables ------------------------------------------------------------------------------


def base_name(ref: str) -> str:
    """``aopc_morf[eraser=mask;k_max=10]@1`` -> ``aopc_morf``."""
    return ref.split("[")[0].split("@")[0]


def sign_of(direction: str) -> float:
    """+1 where higher is better, −1 where lower is."""
    if direction not in ("higher", "lower"):
        raise InputError(f"meta-eval ranks explainers by a metric with a direction; got "
                         f"{direction!r}")
    return 1.0 if direction == "higher" else -1.0


def interval(matrix: np.ndarray, alpha: float = 0.05,
             bounds: tuple[float, float] = (-math.inf, math.inf)) -> dict:
    """Mean and (1 - alpha) interval over seeds and examples of a (S, N) matrix, cut to
    the ``bounds`` the values cannot leave (a t interval on three seeds can); the
    examples undefined on any seed (NaN) are left out and counted."""
    keep = np.isfinite(matrix).all(axis=0)
    if not keep.any():
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0,
                "undefined": int(matrix.shape[1])}
    e = stats.seed_estimate(matrix[:, keep], alpha=alpha)
    return {"mean": e.mean, "ci_low": max(bounds[0], e.ci_low),
            "ci_high": min(bounds[1], e.ci_high), "n": e.n,
            "undefined": int((~keep).sum()), "seed_means": list(e.seed_means)}


def explainer_table(values: Values) -> list[dict]:
    """One row per (ground-truth task, explainer): precision@k and mean rank."""
    rows = []
    for task in values.tasks():
        precision = values.measure(task, TRUTH_MEASURES[0])
        for explainer in values.explainers(task, precision) if precision else ():
            row = {"task": task, "explainer": explainer}
            for name in TRUTH_MEASURES:
                measure = values.measure(task, name)
                if (task, measure, explainer) in values.rows:
                    assert measure is not None
                    seeds, m = values.matrix(task, measure, explainer)
                    row[name] = interval(m, bounds=TRUTH_BOUNDS[name])
                    row["seeds"] = seeds
            rows.append(row)
    return rows


def reliance_table(values: Values) -> list[dict]:
    """The reliance checks of every model, one row per (task, seed)."""
    return sorted(values.reliance, key=lambda r: (r["task"], r["seed"]))


def _means(values: Values, task: str, metric: str, explainers: Sequence[str],
           seeds: Sequence[int]) -> np.ndarray:
    """Each explainer's mean over ``seeds`` and the examples, signed so that higher is
    better."""
    sign = sign_of(values.direction[metric])
    return np.array([sign * float(np.nanmean(values.matrix(task, metric, e, seeds)[1]))
                     for e in explainers])


def kendall(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Kendall τ-b of two rankings (None where either is constant).

    >>> kendall([1, 2, 3], [10, 20, 30]), kendall([1, 2, 3], [3, 2, 1])
    (1.0, -1.0)
    """
    from scipy.stats import kendalltau

    tau = kendalltau(a, b, variant="b").statistic
    return None if tau is None or math.isnan(tau) else float(tau)


def placed(values: Values, task: str, metric: str, oracle: str, explainers: Sequence[str],
           *, first: bool, seeds: Sequence[int] | None = None) -> dict:
    """Is ``oracle`` ranked first (``first``) or last by ``metric``, against every other
    explainer at once? Each per-example gap (oracle − other, signed so that > 0 agrees
    with the claim) gets an interval over seeds and examples (``interval``):

    - "yes" when every 95 % interval is above 0: an intersection-union test (the claim
      needs every comparison, so none is corrected for the others);
    - "no" when some Bonferroni interval, 1 − 0.05 / (explainers − 1), is below 0;
    - "tie" otherwise.

    A "yes" or a "no" is wrong in at most 5 % of datasets: ``tests/test_coverage.py``
    measures 2.2 % (six tied explainers) and 4.1 % (the oracle tied with one, 3.7 % of
    them a false "yes") with three seeds. ``mean`` and ``against``: the
    gap to the closest other explainer by mean."""
    sign = sign_of(values.direction[metric]) * (1.0 if first else -1.0)
    others = [e for e in explainers if e != oracle]
    seeds = values.seeds(task, [metric], explainers) if seeds is None else seeds
    _, a = values.matrix(task, metric, oracle, seeds)
    diffs = {e: sign * (a - values.matrix(task, metric, e, seeds)[1]) for e in others}
    each = {e: interval(d) for e, d in diffs.items()}
    each = {e: g for e, g in each.items() if g["mean"] is not None}
    if not each:
        return {"verdict": "n/a", "mean": None, "against": None}
    corrected = [interval(diffs[e], alpha=0.05 / len(others)) for e in each]
    closest = min(each, key=lambda e: each[e]["mean"])
    verdict = ("yes" if all(g["ci_low"] > 0 for g in each.values()) else
               "no" if any(g["ci_high"] < 0 for g in corrected) else "tie")
    return {**each[closest], "verdict": verdict, "against": closest}


def eraser_pair(metric: str) -> str | None:
    """The id of the same metric with the other eraser (delete <-> mask), if it has one.

    >>> eraser_pair("aopc_morf[eraser=delete;k_max=10]@1")
    'aopc_morf[eraser=mask;k_max=10]@1'
    """
    for a, b in (("eraser=delete", "eraser=mask"), ("eraser=mask", "eraser=delete")):
        if a in metric:
            return metric.replace(a, b)
    return None


def pair_flips(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Share of item pairs ordered one way by ``x`` and the other by ``y`` (a pair tied
    in either counts as no flip).

    >>> pair_flips([1, 2, 3], [1, 3, 2])  # of 3 pairs, (2, 3) flips
    0.3333333333333333
    """
    pairs = list(itertools.combinations(range(len(x)), 2))
    if not pairs:
        return None
    flips = sum((x[i] - x[j]) * (y[i] - y[j]) < 0 for i, j in pairs)
    return flips / len(pairs)


def metric_table(values: Values) -> list[dict]:
    """One row per (faithfulness metric, ground-truth task): does the metric recover
    the known ranking (module docstring)."""
    rows = []
    for task in values.tasks():
        precision = values.measure(task, TRUTH_MEASURES[0])
        if precision is None:
            continue
        truth_explainers = values.explainers(task, precision)
        for metric in values.metrics(task):
            if base_name(metric) in TRUTH_MEASURES:
                continue
            explainers = [e for e in values.explainers(task, metric) if e in truth_explainers]
            if not set(ORACLES) <= set(explainers) or len(explainers) < 3:
                continue
            seeds = values.seeds(task, [metric, precision], explainers)
            if not seeds:
                continue
            means = _means(values, task, metric, explainers, seeds)
            truth = _means(values, task, precision, explainers, seeds)
            by_mean = dict(zip(explainers, means))
            per_seed = [kendall(_means(values, task, metric, explainers, [s]),
                                _means(values, task, precision, explainers, [s]))
                        for s in seeds]
            row = {"task": task, "metric": metric, "explainers": len(explainers),
                   "seeds": seeds,
                   "ground_truth_first": placed(values, task, metric, GROUND_TRUTH,
                                                explainers, first=True, seeds=seeds),
                   "inverted_last": placed(values, task, metric, INVERTED, explainers,
                                           first=False, seeds=seeds),
                   "tau": kendall(means, truth),
                   "tau_seeds": [t for t in per_seed if t is not None],
                   "rank_of_truth": 1 + int(sum(m > by_mean[GROUND_TRUTH] for m in means))}
            other = eraser_pair(metric)
            if other is not None and (task, other, GROUND_TRUTH) in values.rows:
                shared = [e for e in explainers if (task, other, e) in values.rows]
                both = values.seeds(task, [metric, other], shared)
                if both:
                    row["eraser_flips"] = pair_flips(_means(values, task, metric, shared, both),
                                                     _means(values, task, other, shared, both))
            rows.append(row)
    return rows


# -- deceptive attention ---------------------------------------------------------------


ATTENTION = "attention"  # the explainer deceptive training targets: the raw weights


def deceived(task: str) -> tuple[str, float]:
    """(the task id without its deception weight, λ): the models of one task and family
    that differ only in ``--deceive`` share the first.

    >>> deceived("shortcut_single[deceive=0.1;model=transformer]@1")
    ('shortcut_single[model=transformer]@1', 0.1)
    >>> deceived("shortcut_pair@1")
    ('shortcut_pair@1', 0.0)
    """
    from faithbench.benchmark.core.ids import format_id, parse_id

    parsed = parse_id(task, "task")
    lam = float(parsed.params.pop("deceive", 0.0))
    return format_id(parsed.name, parsed.params.items(), parsed.version or "1"), lam


def deception_groups(values: Values) -> dict[str, list[tuple[float, str]]]:
    """{base task: [(λ, task id), ...] by λ} for every task that has a deceptive model."""
    groups: dict[str, list[tuple[float, str]]] = {}
    for task in values.tasks():
        base, lam = deceived(task)
        groups.setdefault(base, []).append((lam, task))
    return {b: sorted(m) for b, m in groups.items() if any(lam > 0 for lam, _ in m)}


def attention_of(values: Values, task: str, metric: str) -> str | None:
    """The id of the raw-attention explainer among ``task``'s rows of ``metric``."""
    return next((e for e in values.explainers(task, metric) if base_name(e) == ATTENTION), None)


def finders(values: Values, task: str, attention: str) -> list[str]:
    """The explainers (oracles aside) whose precision@k beats raw attention's on
    ``task``: the 95 % interval over seeds and examples of their per-example gap is
    above 0."""
    precision = values.measure(task, TRUTH_MEASURES[0])
    assert precision is not None
    seeds = values.seeds(task, [precision], values.explainers(task, precision))
    _, base = values.matrix(task, precision, attention, seeds)
    out = []
    for e in values.explainers(task, precision):
        if e in ORACLES or e == attention:
            continue
        gap = interval(values.matrix(task, precision, e, seeds)[1] - base)
        if gap["ci_low"] is not None and gap["ci_low"] > 0:
            out.append(e)
    return out


def attention_verdicts(values: Values) -> list[dict]:
    """One row per (metric, model of a deception group): does the metric rank raw
    attention below every explainer that finds the shortcut better than it
    (``finders``)? ``placed`` with attention as the one to be last among itself and
    the finders: yes / no / tie, with the same error rates."""
    rows = []
    for members in deception_groups(values).values():
        for lam, task in members:
            precision = values.measure(task, TRUTH_MEASURES[0])
            if precision is None:
                continue
            attention = attention_of(values, task, precision)
            if attention is None:
                continue
            found = finders(values, task, attention)
            for metric in values.metrics(task):
                if base_name(metric) in TRUTH_MEASURES:
                    continue
                shared = [e for e in [attention, *found]
                          if (task, metric, e) in values.rows]
                if attention not in shared or len(shared) < 2:
                    continue
                seeds = values.seeds(task, [metric], shared)
                if not seeds:
                    continue
                verdict = placed(values, task, metric, attention, shared, first=False,
                                 seeds=seeds)
                rows.append({"task": task, "lambda": lam, "metric": metric,
                             "finders": len(shared) - 1, "attention_last": verdict})
    return rows


# -- cross-metric agreement --------------------------------------------------------------


def seed_t(per_seed: Sequence[float], alpha: float = 0.05,
           bounds: tuple[float, float] = (-1.0, 1.0)) -> dict:
    """Mean and (1 - alpha) t interval (S - 1 df) of per-seed values, cut to ``bounds``
    (a τ's [-1, 1]): the spread of the statistic over retrained models, for the run's
    test examples (their sampling is common to every seed and not in the interval).
    Simulated coverage of the 95 % interval of per-seed Kendall τ with three seeds:
    0.937-0.955 (``tests/test_coverage.py``). One seed gives no interval.

    >>> round(seed_t([0.5, 0.7, 0.6])["ci_low"], 3), seed_t([0.9, 1.0, 1.0])["ci_high"]
    (0.352, 1.0)
    """
    v = np.asarray(per_seed, dtype=float)
    mean = float(v.mean())
    if len(v) < 2:
        return {"mean": mean, "ci_low": None, "ci_high": None, "n_seeds": len(v)}
    # one value per seed: the seed part of the project's interval alone (t on S - 1 df)
    half = seed_interval.seed_parts(v[:, None]).half_width(alpha)
    return {"mean": mean, "ci_low": max(bounds[0], mean - half),
            "ci_high": min(bounds[1], mean + half), "n_seeds": len(v)}


def ranked_metrics(records: Iterable[dict], families=("faithfulness",)) -> dict:
    """{task: {seed: {metric: {explainer: mean signed so that higher is better}}}} of a
    run's result records (``results.jsonl``), metrics of ``families`` only."""
    out: dict = {}
    for r in records:
        if r.get("record_type", "result") != "result" or r.get("family") not in families:
            continue
        mean = (r.get("estimate") or {}).get("mean")
        if mean is None or r.get("direction") not in ("higher", "lower"):
            continue
        out.setdefault(r["task"], {}).setdefault(r["model_seed"], {}).setdefault(
            r["metric"], {})[r["explainer"]] = sign_of(r["direction"]) * mean
    return out


def metric_agreement(records: Iterable[dict], families=("faithfulness",)) -> list[dict]:
    """One row per (task, metric pair): Kendall τ-b between the two metrics' rankings
    of the explainers (those both scored on every seed), per seed, and the mean with
    its t interval over seeds (``seed_t``)."""
    rows = []
    for task, by_seed in ranked_metrics(records, families).items():
        seeds = sorted(by_seed)
        metrics = sorted(set.intersection(*(set(by_seed[s]) for s in seeds)))
        for a, b in itertools.combinations(metrics, 2):
            taus = []
            for s in seeds:
                shared = sorted(set(by_seed[s][a]) & set(by_seed[s][b]))
                tau = kendall([by_seed[s][a][e] for e in shared],
                              [by_seed[s][b][e] for e in shared]) if len(shared) > 2 else None
                if tau is not None:
                    taus.append(tau)
            if taus:
                rows.append({"task": task, "a": a, "b": b, "tau_seeds": taus,
                             "explainers": len(shared), **seed_t(taus)})
    return rows


def render_agreement(rows: list[dict], table: str = "pairs", tablefmt: str = "github") -> str:
    """``pairs``: one line per metric pair, least alike first, τ-b mean [95 % CI over
    seeds] and the per-seed values; ``matrix``: metric x metric mean τ-b. One table per
    task."""
    from faithbench.leaderboard.render import safe_table

    parts = []
    for task in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == task]
        if table == "pairs":
            parts.append(safe_table(
                [[f"{short(r['a'])} / {short(r['b'])}", _ci(r, ".2f"),
                  ", ".join(f"{t:.2f}" for t in r["tau_seeds"]), r["explainers"]]
                 for r in sorted(mine, key=lambda r: r["mean"])],
                ["metrics", "τ-b mean [95 % CI]", "per seed", "explainers"],
                tablefmt=tablefmt, disable_numparse=True))
            continue
        names = list(dict.fromkeys(n for r in mine for n in (r["a"], r["b"])))
        mean = {frozenset((r["a"], r["b"])): r["mean"] for r in mine}
        labels = [short(n) for n in names]
        parts.append(safe_table(
            [[labels[i]] + ["1" if a == b else _num(mean.get(frozenset((a, b))), ".2f")
                            for b in names] for i, a in enumerate(names)],
            ["", *labels], tablefmt=tablefmt, disable_numparse=True))
    return "\n\n".join(parts)


# -- computing the values ----------------------------------------------------------------


# retraining metrics that score the explanations they are given (not the explainer run
# again elsewhere, as ROAR and the sanity checks do): the oracles can take them
SCORES_ONLY = frozenset({"ffidelity_plus", "ffidelity_minus"})


def default_metrics(kind: str, retrains: bool = True) -> list:
    """Every faithfulness metric (those a default run leaves out for their cost
    included; F-Fidelity, whose surrogate is one training per model, where ``retrains``),
    and each erasure metric again with the ``mask`` eraser (its default is ``delete``) —
    but NAOPC, whose beam search would double the run's cost."""
    from faithbench import metrics as registry

    chosen = [m for _, m in registry.REGISTRY.items()
              if kind in m.spec.kinds and m.spec.family == "faithfulness"
              and (not m.spec.needs_training or (retrains and m.spec.name in SCORES_ONLY))
              and not m.spec.needs_explainer]
    masked = [registry.with_params(m, eraser="mask") for m in chosen
              if dict(m.spec.params).get("eraser") == "delete"
              and not m.spec.name.startswith("naopc")]
    return chosen + masked


def reliance(session) -> dict:
    """How much the model relies on the reference tokens: its accuracy on every
    labelled split (a shortcut task's agree / contradict / clean splits among them),
    the share of the scored examples whose prediction changes when their reference
    tokens are deleted, and the mean attention mass on them (``attention_mass``, where
    the model has one: what deceptive training lowers, Pruthi et al. 2020)."""
    examples = session.examples
    stripped = [dataclasses.replace(e, tokens=_kept(e.tokens, e.reference),
                                    segments=None if e.segments is None
                                    else _kept(e.segments, e.reference),
                                    words=None if e.words is None else _kept_words(e),
                                    reference=None)
                for e in examples]
    if any(not e.tokens for e in stripped):
        raise InputError("meta-eval: an example is all reference tokens; deleting them "
                         "leaves nothing to classify")
    before = session.base_probs.argmax(dim=-1)
    after = session.on(stripped).base_probs.argmax(dim=-1)
    labels = np.array([e.label for e in examples])
    row = {"accuracy": dict(session.prepared.accuracy),
           "scored_accuracy": float((before.numpy() == labels).mean()),
           "flip_when_deleted": float((before != after).float().mean()),
           "n": len(examples)}
    mass = getattr(session.prepared.model, "attention_mass", None)
    if mass is not None:
        model_eval(session.prepared.model)
        row["attention_mass"] = float(torch.cat([mass(b, ref).cpu() for b, _, ref
                                                 in session.batches(examples)]).mean())
    return row


def _kept(items: Sequence, reference: Sequence[bool]) -> tuple:
    """The items at the positions ``reference`` does not mark (a pair's segment ids
    go with their tokens)."""
    return tuple(x for x, r in zip(items, reference) if not r)


def _kept_words(e) -> tuple[int, ...]:
    """Word indices of the pieces left once the reference pieces are deleted,
    renumbered from 0 (a reference marks whole words: all pieces of a word)."""
    kept = [w for w, r in zip(e.words, e.reference) if not r]
    renumber = {w: i for i, w in enumerate(dict.fromkeys(kept))}
    return tuple(renumber[w] for w in kept)


def evaluate(config) -> tuple[Path, list]:
    """Score every explainer (and the two oracles) with every metric (``config.metrics``,
    default ``default_metrics``) on each ground-truth model of ``config`` (tasks x
    seeds), appending each (model, explainer,
    metric)'s per-example values to ``<out>/meta_eval/values.jsonl``; rows already
    there are not computed again. A model that does not follow its ground truth (its
    reliance row below ``RELIANCE_MIN``) is not scored: its values would be left out
    of every table. Returns (that path, plugin failures)."""
    from faithbench import metrics as registry
    from faithbench import submissions
    from faithbench.benchmark.runner import check_explainer, load_explainers, serviceable
    from faithbench.benchmark.session import open_session
    from faithbench.leaderboard.suite import selection_label

    for ref in config.explainers:  # a typo stops here, before any model is prepared
        check_explainer(ref)
    asked = [registry.resolve(m) for m in config.metrics]
    for m in asked:
        if (m.spec.needs_training or m.spec.needs_explainer) and m.spec.name not in SCORES_ONLY:
            raise InputError(f"meta-eval: {m.spec.name} runs the explainer again on other "
                             "data or models, which the ground-truth oracles cannot do; "
                             "use it in `faithbench run`")
    for name in config.tasks:
        if not planted(name, config):
            raise InputError(f"meta-eval needs a task whose references are planted ground "
                             f"truth; {name}'s are not (human rationales say what people "
                             "find plausible, not what the model used): use "
                             f"{', '.join(ground_truth_tasks())}, or your own data "
                             "(text, text_pair) with --rationale-column and "
                             "--rationale-kind planted")
    out = Path(config.out)
    path = out / "meta_eval" / VALUES
    path.parent.mkdir(parents=True, exist_ok=True)
    loaded, _, failures = load_explainers(config)  # once: a plugin loads in a worker
    for f in failures:
        append_jsonl(out / "failures.jsonl", f.as_dict())
    written = read_jsonl(path) if path.exists() else []  # read once: a run resumes here
    done = {row["key"] for row in written}
    relied = {row["key"]: row for row in written if row["kind"] == "reliance"}
    truth = [registry.get_metric(m) for m in TRUTH_MEASURES]
    bilstm = not (config.model_path or config.model not in (None, "bilstm"))
    for name in config.tasks:
        for seed in config.seeds:
            session = open_session(name, config, seed)
            examples = with_truth(session.examples)
            if not examples:
                raise InputError(f"meta-eval: no example of {session.spec.id} "
                                 f"{session.split} has a ground truth (reference)")
            if len(examples) < len(session.examples):
                session = session.on(examples)
            model = Model(session.spec.id, seed, session.prepared.checkpoint,
                          selection_label(config.as_dict()))
            key = row_key(model, "-", "reliance")
            if key not in relied:
                relied[key] = {**model.key, **reliance(session)}
                write_reliance(path, model, relied[key])
            if not relies(relied[key]):  # its values would be left out
                log.warning("%s seed %d does not follow its ground truth (accuracy %.3f on "
                            "the scored examples, below %.2f): left out, not scored",
                            session.spec.id, seed, relied[key]["scored_accuracy"],
                            RELIANCE_MIN)
                continue
            metrics = session.applicable(
                truth + (asked or default_metrics(session.spec.kind, retrains=bilstm)))
            explainers = (loaded if config.explainers else
                          serviceable(loaded, session.prepared.model, session.spec.id))
            failures += _score_model(path, session, model, explainers, metrics, done,
                                     submissions.get_explainer("random"))
    return path, failures


def _score_model(path: Path, session, model: Model, explainers: list, metrics: list,
                 done: set[str], base) -> list:
    """Every (explainer or oracle, metric) of one model not yet in the values file; the
    oracles are built on ``base``'s (``random``'s) scores, explained once. Returns the
    plugin failures (recorded in ``failures.jsonl``)."""
    from faithbench.benchmark.core.errors import PluginError
    from faithbench.benchmark.runner import record_failure

    references = [e.reference for e in session.examples]
    failures, random_scores = [], None
    for explainer in [*explainers, *ORACLES]:
        oracle = isinstance(explainer, str)
        label = explainer if oracle else explainer.spec.id
        todo = [m for m in metrics if row_key(model, label, m.spec.id) not in done]
        if not todo:
            continue
        try:
            if oracle:
                random_scores = random_scores or session.explain(base).scores
                scores = oracle_scores(explainer, references, random_scores)
            else:
                scores = session.explain(explainer).scores
        except PluginError as exc:
            failures.append(record_failure(Path(session.config.out), exc, session.spec.id,
                                           label, session.seed))
            continue
        if label == base.spec.id:
            random_scores = scores
        for metric in todo:  # an oracle's scores-only retraining metric: base stands in
            scored = session.score(metric, scores, explainer=base if oracle else explainer)
            write_values(path, model, label, metric.spec.id, metric.spec.direction,
                         scored.ids, scored.values.tolist())
    return failures


# -- rendering ---------------------------------------------------------------------------


def _num(v, fmt=".3f") -> str:
    return "n/a" if v is None else format(v, fmt)


def _ci(e: dict | None, fmt=".3f") -> str:
    if not e or e.get("mean") is None:
        return "n/a"
    return f"{_num(e['mean'], fmt)} [{_num(e['ci_low'], fmt)}, {_num(e['ci_high'], fmt)}]"


def short(explainer_or_metric: str) -> str:
    """A name without its version and default-looking parameters, for table cells:
    the metric's eraser stays (it is what the table compares).

    >>> short("aopc_morf[eraser=mask;k_max=10]@1"), short("gradient[norm=l2]@1")
    ('aopc_morf (mask)', 'gradient')
    """
    name = base_name(explainer_or_metric)
    for eraser in ("mask", "pad", "retokenize"):
        if f"eraser={eraser}" in explainer_or_metric and "[" in explainer_or_metric:
            return f"{name} ({eraser})"
    return name


TABLES = ("explainers", "reliance", "metrics", "deception", "verdicts")
CAPTIONS = {
    "explainers": "Explainers against the ground truth (mean [95 % CI over seeds and "
                  "examples])",
    "reliance": "Reliance on the ground truth (accuracy per split; flips = share of scored "
                "predictions that change when the reference tokens are deleted; attention "
                "mass = the model's mean attention on them; relies = "
                "accuracy on the scored examples, whose labels the ground truth decides, at "
                f"least {RELIANCE_MIN:.0%}: a model below is left out of the other tables)",
    "metrics": "Metrics against the ground truth, per model: τ = Kendall τ-b of the "
               "metric's explainer ranking with the precision@k ranking [range over seeds]; "
               "1st / last = is ground_truth ranked first / inverted_ground_truth last, "
               "against every other explainer (yes: every 95 % interval over seeds and "
               "examples of the per-example gap above 0; no: one Bonferroni interval below "
               "0; else tie; in brackets the mean gap to the closest one); flips = share of "
               "explainer pairs the delete and mask erasers order opposite ways",
    "deception": "Explainers on models trained to hide the shortcut from attention (Pruthi "
                 "et al. 2020), per λ of the penalty (0: the task's own model): "
                 "precision@k and mean rank, mean [95 % CI over seeds and examples]",
    "verdicts": "Do the metrics notice that attention hides the shortcut? yes: the metric "
                "ranks raw attention below every explainer whose precision@k beats "
                "attention's (each 95 % interval of the per-example gap above 0); no: a "
                "Bonferroni interval says the opposite of one; else tie. In brackets the "
                "mean gap to the closest finder; n = the number of finders",
}


def render(values: Values, tablefmt: str = "github", tables: Sequence[str] = TABLES,
           captions: bool = True) -> str:
    """The three tables (explainers, reliance, metrics) as text (those of ``tables``)."""
    from faithbench.leaderboard.render import safe_table

    parts = []
    for name, rows, headers in table_rows(values, tables):
        table = safe_table(rows, headers, tablefmt=tablefmt, disable_numparse=True)
        parts.append(f"{CAPTIONS[name]}\n\n{table}" if captions else table)
    return "\n\n".join(parts)


def table_rows(values: Values, tables: Sequence[str] = TABLES) -> list[tuple[str, list, list]]:
    """(name, rows, headers) of each of ``tables`` that has rows."""
    build = {"explainers": _explainer_rows, "reliance": _reliance_rows,
             "metrics": _metric_rows, "deception": _deception_rows,
             "verdicts": _verdict_rows}
    out = []
    for name in tables:
        rows, headers = build[name](values)
        if rows:
            out.append((name, rows, headers))
    return out


def _explainer_rows(values: Values) -> tuple[list, list]:
    ex = explainer_table(values)
    tasks = values.tasks()
    names = list(dict.fromkeys(r["explainer"] for r in ex))
    cell = {(r["task"], r["explainer"]): r for r in ex}
    def first_precision(name):  # best first on the first task; n/a last
        mean = (cell.get((tasks[0], name), {}).get("r_precision") or {}).get("mean")
        return -1.0 if mean is None else mean

    rows = []
    for name in sorted(names, key=first_precision, reverse=True):
        row = [short(name) if sum(short(n) == short(name) for n in names) == 1 else name]
        for task in tasks:
            r = cell.get((task, name), {})
            row += [_ci(r.get("r_precision")), _ci(r.get("mean_rank"), ".2f")]
        rows.append(row)
    return rows, ["explainer"] + [h for t in tasks for h in (f"{t} precision@k ↑",
                                                            f"{t} mean rank ↓")]


def _reliance_rows(values: Values) -> tuple[list, list]:
    rel = reliance_table(values)
    splits = list(dict.fromkeys(s for r in rel for s in r["accuracy"]))
    return ([[r["task"], r["seed"], *(_num(r["accuracy"].get(s)) for s in splits),
              _num(r["flip_when_deleted"]), _num(r.get("attention_mass")), r["n"],
              "yes" if r["relies"] else "no: left out"]
             for r in rel],
            ["task", "seed", *(f"accuracy {s}" for s in splits), "flips", "attention mass",
             "n", "relies"])


def _metric_rows(values: Values) -> tuple[list, list]:
    """One row per metric, one cell per ground-truth model: "τ 0.83 [0.80, 0.86] · 1st
    no (-0.115) · last yes (+0.120) · flips 0.07"."""
    mt = metric_table(values)
    tasks = list(dict.fromkeys(r["task"] for r in mt))
    by = {(r["task"], r["metric"]): r for r in mt}
    rows = []
    for metric in dict.fromkeys(r["metric"] for r in mt):
        row = [short(metric)]
        for task in tasks:
            r = by.get((task, metric))
            if r is None:
                row.append("n/a")
                continue
            cell = (f"τ {_tau(r)} · 1st {_verdict(r['ground_truth_first'])} · last "
                    f"{_verdict(r['inverted_last'])}")
            if r.get("eraser_flips") is not None:
                cell += f" · flips {r['eraser_flips']:.2f}"
            row.append(cell)
        rows.append(row)
    return rows, ["metric", *tasks]


def _deception_rows(values: Values) -> tuple[list, list]:
    """One row per (task and family, explainer), one column per λ for precision@k and
    one per λ for mean rank."""
    groups = deception_groups(values)
    lams = sorted({lam for members in groups.values() for lam, _ in members})
    cells = {(r["task"], r["explainer"]): r for r in explainer_table(values)}
    rows = []
    for base, members in groups.items():
        by_lam = dict(members)
        names = list(dict.fromkeys(e for _, t in members for (task, e) in cells if task == t))

        def precision(name, task):
            return (cells.get((task, name), {}).get("r_precision") or {}).get("mean")

        top = by_lam[max(by_lam)]  # the most deceptive model orders the rows
        for name in sorted(names, key=lambda n: -(precision(n, top) or -1.0)):
            rows.append([base, short(name), *(
                _ci(cells.get((by_lam[lam], name), {}).get(measure), fmt) if lam in by_lam
                else "" for measure, fmt in (("r_precision", ".3f"), ("mean_rank", ".2f"))
                for lam in lams)])
    return rows, ["task", "explainer", *(f"{head} λ = {lam:g}" for head in
                                         ("precision@k ↑", "mean rank ↓") for lam in lams)]


def _verdict_rows(values: Values) -> tuple[list, list]:
    """One row per (task and family, metric), one column per λ: attention last?"""
    found = attention_verdicts(values)
    lams = sorted({r["lambda"] for r in found})
    cell = {(deceived(r["task"])[0], r["metric"], r["lambda"]): r for r in found}
    rows = []
    for base, metric in dict.fromkeys((deceived(r["task"])[0], r["metric"]) for r in found):
        rows.append([base, short(metric), *(
            f"{_verdict(c['attention_last'])} n={c['finders']}"
            if (c := cell.get((base, metric, lam))) else "" for lam in lams)])
    return rows, ["task", "metric", *(f"λ = {lam:g}" for lam in lams)]


def _verdict(gap: dict) -> str:
    return f"{gap['verdict']} ({_num(gap['mean'], '+.3f')})"


def _tau(row: dict) -> str:
    seeds = row["tau_seeds"]
    spread = f" [{min(seeds):.2f}, {max(seeds):.2f}]" if len(seeds) > 1 else ""
    return _num(row["tau"], ".2f") + spread
