"""The ROAR sweep's report, read from its rows alone: the curves with RACU (Madsen et al.
2022), the shift diagnostics, and the leakage check (a paired test per cell, Holm
across cells)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from faithbench.benchmark.core.records import RoarRow
from faithbench.benchmark.core.stats import (
    ALPHA,
    N_RESAMPLES,
    PairedDifference,
    holm,
    racu,
    racu_estimate,
    seed_estimate,
    sign_flip_test,
)
from faithbench.leaderboard.render import safe_table

RANDOM, CLEAN, ALL, LENGTH = "random", "none", "all", "length"



def report(rows: list[RoarRow], *, fmt: str = "github") -> str:
    """The curves with RACU, the shift diagnostics and the leakage check, per task."""
    parts = []
    for task in dict.fromkeys(r.task for r in rows):
        mine = [r for r in rows if r.task == task]
        parts.append(f"## ROAR on {task}\n")
        for kind, title in (("roar", "ROAR"), ("recursive", "Recursive ROAR")):
            table = _curve_table(mine, kind, fmt)
            if table:
                parts += [(f"{title}: accuracy of the retrained model on the masked test split, "
                          "mean [95% CI over seeds and examples]; RACU [95% CI]\n"), table, ""]
        for field, title in (
                ("fixed_accuracy", "Original model (no retraining) on the same masked inputs: accuracy"),
                ("fixed_drop", ("Original model: mean drop of p(predicted class) — erasure on a "
                 "fixed model (the random row is diagnostic 1: shift alone)")),
                ("auroc_original", "Mahalanobis AUROC, clean vs masked test inputs, original model"),
                ("auroc_retrained", ("Mahalanobis AUROC, clean vs masked test inputs, retrained "
                 "model (detector fitted on clean validation inputs, which this model never "
                 "saw: how differently it represents clean and masked inputs)"))):
            table = _field_table(mine, field, fmt)
            if table:
                parts += [f"{title} (mean over seeds)\n", table, ""]
        leak = _leakage_table(mine, fmt)
        if leak:
            parts += leak
    return "\n".join(parts)


def _ratios(rows) -> list[float]:
    return sorted({r.ratio for r in rows if 0 < r.ratio < 1})


def _matrix(rows: list[RoarRow]) -> np.ndarray:
    """(seeds, examples) correctness, seeds in order."""
    return np.array([r.correct for r in sorted(rows, key=lambda r: r.seed)], dtype=float)


def curve_matrices(rows: list[RoarRow], kind: str
                   ) -> tuple[list[float], list[int], dict[str, list[np.ndarray | None]]]:
    """(ratios with 0 and 1, seeds, mask -> per ratio the (seeds, examples) correctness
    or None where a seed is missing) of the ``kind`` curves, the random mask first
    (taken from the "roar" rows: random masking has no explainer to recur on); the 0 %
    and 100 % points are the clean and the all-masked models, shared by every curve."""
    own = {(r.mask, r.ratio, r.seed): r for r in rows if r.kind == kind}
    if not own:
        return [], [], {}
    roar = {(r.mask, r.ratio, r.seed): r for r in rows if r.kind == "roar"}
    ratios = _ratios(own.values())
    seeds = sorted({s for _, _, s in own})
    masks = [RANDOM] + [m for m in dict.fromkeys(m for m, _, _ in own)
                        if m not in (RANDOM, CLEAN, ALL)]

    def curve(source: dict, mask: str) -> list[np.ndarray | None]:
        out = []
        for k in [0.0, *ratios, 1.0]:
            mask_k = CLEAN if k == 0 else ALL if k == 1 else mask
            got = [source.get((mask_k, k, s)) or roar.get((mask_k, k, s)) for s in seeds]
            found = [r for r in got if r is not None]
            out.append(_matrix(found) if len(found) == len(got) else None)
        return out

    return ([0.0, *ratios, 1.0], seeds,
            {mask: curve(roar if mask == RANDOM else own, mask) for mask in masks})


def _curve_table(rows: list[RoarRow], kind: str, fmt: str) -> str | None:
    """One row per mask: accuracy at each ratio, and RACU against the random curve
    (random masking is the same for both kinds: it has no explainer to recur on)."""
    x, seeds, curves = curve_matrices(rows, kind)
    if not curves:
        return None
    own = [r for r in rows if r.kind == kind]
    ratios = x[1:-1]

    def cell(e) -> str:
        return f"{e.mean:.3f} [{e.ci_low:.3f}, {e.ci_high:.3f}]"

    random_curve = curves[RANDOM]
    table = []
    for mask, points in curves.items():
        cells = ["" if m is None else cell(seed_estimate(m)) for m in points[1:-1]]
        area = ""
        if mask != RANDOM and all(m is not None for m in points + random_curve):
            r, e = np.asarray(random_curve), np.asarray(points)  # (P, S, N)
            defined = all(np.isfinite(racu(x, r[:, s].mean(1), e[:, s].mean(1)))
                          for s in range(r.shape[1]))
            area = cell(racu_estimate(x, r, e)) if defined else "n/a"
        table.append([mask, *cells, area])
    footer = [f"{label}: {cell(seed_estimate(m))}" for label, m in
              (("0% (original models)", random_curve[0]), ("100% (all masked)", random_curve[-1]))
              if m is not None]
    footer.append(f"seeds {', '.join(map(str, seeds))}; n = {own[0].n} test examples")
    footer.append("RACU: Madsen et al.'s relative area between curves of each seed "
                  "(on accuracy, unclipped), mean over seeds [95% CI: t over seeds + "
                  "example variance]")
    headers = ["mask", *(f"{k:.0%}" for k in ratios), "RACU ↑"]
    return safe_table(table, headers, tablefmt=fmt) + "\n\n" + "; ".join(footer)


def _field_table(rows: list[RoarRow], field: str, fmt: str) -> str | None:
    rows = [r for r in rows if r.kind == "roar" and getattr(r, field) is not None
            and 0 < r.ratio < 1]
    if not rows:
        return None
    ratios = _ratios(rows)
    masks = list(dict.fromkeys(r.mask for r in sorted(rows, key=lambda r: r.mask != RANDOM)))
    table = []
    for mask in masks:
        cells = []
        for k in ratios:
            got = [getattr(r, field) for r in rows if r.mask == mask and r.ratio == k]
            cells.append(f"{np.mean(got):.3f}" if got else "")
        table.append([mask, *cells])
    return safe_table(table, ["mask", *(f"{k:.0%}" for k in ratios)], tablefmt=fmt)


@dataclass(frozen=True)
class LeakCell:
    """One (mask, ratio) cell of the leakage check: the pattern model against the
    length-only model and against the random-pattern model of the same ratio."""

    mask: str
    ratio: float
    accuracy: float  # mean over the seeds
    seeds: tuple[int, ...]
    vs_length: PairedDifference
    vs_random: PairedDifference
    p_value: float  # the larger of the two p-values; 1 unless both differences are > 0
    p_holm: float
    leaks: bool


def _paired(a: np.ndarray, b: np.ndarray, n_resamples: int) -> PairedDifference:
    """Sign-flip test of two models' (S, N) correctness averaged over the S seeds, per
    example. Not the seed-aware t (``paired_seed_test``): with 3 seeds its 2 degrees of
    freedom leave no power after Holm (a 15-point leak flagged in 20 % of simulated
    datasets); averaging the seeds keeps training noise of sd 0.01 within alpha
    (``tests/test_leakage.py``)."""
    return sign_flip_test(a.mean(axis=0), b.mean(axis=0), n_resamples=n_resamples)


def leakage_cells(rows: list[RoarRow], *, alpha: float = ALPHA,
                  n_resamples: int = N_RESAMPLES) -> list[LeakCell]:
    """The leakage check on the ``leakage`` rows: per (mask, ratio) of an explainer, a
    paired test of the pattern model's correctness against the length-only model's and
    against the random-pattern model's at that ratio, on the same examples and seeds.
    A cell leaks when it beats both (the larger p: an intersection-union test) after
    Holm's adjustment across all cells, so with no leakage anywhere the chance of any
    flag stays at most alpha while retraining moves a model's accuracy by sd <= 0.01
    (simulated: 2.7 %; at sd 0.02, 16 %; ``tests/test_leakage.py``)."""
    leak = [r for r in rows if r.kind == "leakage"]
    by_key = {(r.mask, r.ratio, r.seed): r for r in leak}
    length = {s: r for (m, _, s), r in by_key.items() if m == LENGTH}
    out = []
    for mask, ratio in dict.fromkeys((m, k) for m, k, _ in by_key if m not in (LENGTH, RANDOM)):
        seeds = tuple(sorted(s for m, k, s in by_key if (m, k) == (mask, ratio)
                             and s in length and (RANDOM, ratio, s) in by_key))
        if not seeds:
            continue
        mine = _matrix([by_key[(mask, ratio, s)] for s in seeds])
        vs_length = _paired(mine, _matrix([length[s] for s in seeds]), n_resamples)
        vs_random = _paired(mine, _matrix([by_key[(RANDOM, ratio, s)] for s in seeds]),
                            n_resamples)
        p = (max(vs_length.p_value, vs_random.p_value)
             if vs_length.diff > 0 and vs_random.diff > 0 else 1.0)
        out.append(LeakCell(mask, ratio, float(mine.mean()), seeds, vs_length, vs_random,
                            p, p, False))
    adjusted = holm([c.p_value for c in out])
    return [replace(c, p_holm=q, leaks=q < alpha) for c, q in zip(out, adjusted)]


def _leakage_table(rows: list[RoarRow], fmt: str) -> list[str]:
    cells = leakage_cells(rows)
    leak = [r for r in rows if r.kind == "leakage"]
    length = [r for r in leak if r.mask == LENGTH]
    if not cells:
        return []
    ratios = sorted({c.ratio for c in cells})
    table = []
    randoms = [r for r in leak if r.mask == RANDOM]
    if randoms:
        table.append([RANDOM, *(f"{np.mean([r.accuracy for r in randoms if r.ratio == k]):.3f}"
                                if any(r.ratio == k for r in randoms) else "" for k in ratios)])
    at = {(c.mask, c.ratio): c for c in cells}
    for mask in dict.fromkeys(c.mask for c in cells):
        row = [mask]
        for k in ratios:
            c = at.get((mask, k))
            row.append("" if c is None else
                       f"{c.accuracy:.3f} ({c.vs_length.diff:+.3f}, {c.vs_random.diff:+.3f}; "
                       f"p {c.p_holm:.2g}){' LEAKS' if c.leaks else ''}")
        table.append(row)
    leaking = [f"{c.mask} at {c.ratio:.0%}" for c in cells if c.leaks]
    verdict = ("The mask pattern alone predicts the label better than both the length-only "
               "and the random-pattern models for: " + ", ".join(leaking) + ". Their ROAR "
               "accuracy partly measures the mask, not the missing evidence." if leaking else
               "No mask pattern predicts the label better than both the length-only and the "
               "random-pattern models.")
    seeds = sorted({s for c in cells for s in c.seeds})
    return [(f"Leakage: accuracy of a model trained on the mask pattern only (which positions "
             f"were masked, no words; seeds {', '.join(map(str, seeds))}), mean over seeds "
             f"(difference from the length-only model, from the random-pattern model at the "
             f"same ratio; sign-flip test per cell on the examples, correctness averaged over "
             f"seeds; Holm-adjusted p across the "
             f"{len(cells)} cells; LEAKS: p < {ALPHA} with both differences > 0); majority "
             f"class {length[0].majority if length else float('nan'):.3f}, length-only "
             f"model {np.mean([r.accuracy for r in length]):.3f}\n"),
            safe_table(table, ["mask", *(f"{k:.0%}" for k in ratios)], tablefmt=fmt),
            "", verdict, ""]
