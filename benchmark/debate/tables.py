"""The debate's tables, from ``<out>/debate/values.jsonl`` alone.

``quantities``: every (experiment, task, quantity) as a mean with its 95 % interval
over examples and model seeds (``core.stats.seed_estimate``: t over the seed means
plus the example variance, its coverage simulated in tests/test_stats.py). Each seed's
row holds the same examples; a quantity undefined for an example (τ of a constant
vector, a decision that never flips) leaves that example out of every seed's row and is
counted (``undefined``).

``claims``: one row per claim of the papers, with their number (their setting), ours,
and a verdict read off the interval against the claim's threshold: "holds" where the
whole interval is on the claim's side, "does not hold" where it is wholly on the other,
"holds only partly" where it straddles (``verdict``; the rate of a false "holds" at the
threshold is simulated in tests/test_debate.py). The thresholds are ours: the papers
state their claims in words, and each card says what number we read them as.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tabulate import tabulate

from faithbench.benchmark.core import stats
from faithbench.benchmark.core.records import read_jsonl

HOLDS, FAILS, PARTLY = "holds", "does not hold", "holds only partly"


@dataclasses.dataclass(frozen=True)
class Rows:
    """The values file: the last row of each (experiment, task, seed) wins."""

    rows: dict[tuple[str, str, int], dict]

    @classmethod
    def read(cls, path: Path) -> Rows:
        return cls.of_rows(read_jsonl(path))

    @classmethod
    def of_rows(cls, found: Sequence[dict]) -> Rows:
        """Rows of one or more values files, in order (several runs' files merge)."""
        return cls({(r["experiment"], r["model"]["task"], r["model"]["seed"]): r
                    for r in found})

    def has(self, experiment: str, task: str, quantities: Sequence[str | None]) -> bool:
        """Whether every seed's row of (experiment, task) holds all ``quantities``."""
        found = [r for (e, t, _), r in self.rows.items() if e == experiment and t == task]
        return bool(found) and all(q is None or q in r["values"]
                                   for r in found for q in quantities)

    def tasks(self, experiment: str) -> list[str]:
        return sorted({t for e, t, _ in self.rows if e == experiment})

    def matrix(self, experiment: str, task: str, quantity: str) -> tuple[np.ndarray, int]:
        """(S, N) one row per seed on the examples every seed shares, and the number of
        shared examples where some seed's value is undefined (left out)."""
        seeds = sorted(s for e, t, s in self.rows if e == experiment and t == task)
        per_seed = []
        for s in seeds:
            r = self.rows[(experiment, task, s)]
            per_seed.append(dict(zip(r["ids"], r["values"][quantity], strict=True)))
        shared = [i for i in per_seed[0] if all(i in p for p in per_seed)] if per_seed else []
        m = np.array([[p[i] for i in shared] for p in per_seed], dtype=float)  # null: NaN
        if m.size == 0:
            return m.reshape(len(per_seed), 0), 0
        finite = np.isfinite(m).all(axis=0)
        return m[:, finite], int((~finite).sum())


def estimate(matrix: np.ndarray) -> dict | None:
    """Mean and 95 % interval of an (S, N) matrix, or None when it has no column."""
    if matrix.size == 0:
        return None
    e = stats.seed_estimate(matrix)
    return {"mean": e.mean, "ci_low": e.ci_low, "ci_high": e.ci_high, "n": e.n,
            "n_seeds": e.n_seeds}


def quantities(rows: Rows) -> list[dict]:
    """Every (experiment, task, quantity) with its estimate and undefined count."""
    out = []
    for experiment in sorted({e for e, _, _ in rows.rows}):
        for task in rows.tasks(experiment):
            first = next(r for (e, t, _), r in rows.rows.items() if e == experiment and t == task)
            for quantity in first["values"]:
                m, undefined = rows.matrix(experiment, task, quantity)
                out.append({"experiment": experiment, "task": task, "quantity": quantity,
                            "estimate": estimate(m), "undefined": undefined})
    return out


def verdict(ci_low: float, ci_high: float, threshold: float, side: str) -> str:
    """Holds where the whole interval lies on ``side`` ("below" / "above") of
    ``threshold``; does not hold where it lies wholly on the other side; else partly.

    >>> verdict(0.1, 0.3, 0.5, "below"), verdict(0.6, 0.7, 0.5, "below"), verdict(0.4, 0.6, 0.5, "above")
    ('holds', 'does not hold', 'holds only partly')
    """
    below, above = ci_high < threshold, ci_low > threshold
    if side == "below":
        return HOLDS if below else FAILS if above else PARTLY
    return HOLDS if above else FAILS if below else PARTLY


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim read as: the mean of ``quantity`` (or of ``quantity`` minus ``minus``,
    paired by example) lies ``side`` of ``threshold`` on tasks of ``kinds``."""

    key: str  # a short label the terminal table uses (J&W-1, ...)
    paper: str
    claim: str
    theirs: str
    experiment: str
    quantity: str
    side: str
    threshold: float
    minus: str | None = None
    tasks: tuple[str, ...] = ()  # task names the claim is about (empty: every task)
    variant: str | None = None  # only the models of this ``--bilstm`` variant


CLAIMS = (
    Claim("JW-1", "Jain & Wallace 2019", "attention correlates weakly with gradient importance "
          "(mean Kendall τ below 0.5)", "τ 0.34–0.36 SST, 0.31 SNLI (BiLSTM)",
          "jw_correlation", "tau_gradient", "below", 0.5),
    Claim("JW-2", "Jain & Wallace 2019", "attention correlates weakly with leave-one-out "
          "importance (mean τ below 0.5)", "τ 0.27–0.32 SST, 0.29 SNLI",
          "jw_correlation", "tau_loo", "below", 0.5),
    Claim("JW-3", "Jain & Wallace 2019", "attention agrees with gradients less than gradients "
          "agree with leave-one-out (τ difference below 0)", "not tabulated",
          "jw_correlation", "tau_gradient", "below", 0.0, minus="tau_gradient_loo"),
    Claim("JW-4", "Jain & Wallace 2019", "permuting attention barely changes the output (median "
          "TVD below 0.05)", "most examples near 0 (plots only)",
          "jw_permutation", "median_tvd", "below", 0.05),
    Claim("JW-5", "Jain & Wallace 2019", "a very different attention gives the same output (JSD "
          "within TVD 0.05 above ln 2 / 2 ≈ 0.35 nats)", "JSD > 0.4 often (plots only)",
          "jw_adversarial", "jsd", "above", math.log(2) / 2),
    Claim("SS-1", "Serrano & Smith 2019", "zeroing the highest attention weight rarely flips the "
          "decision (flip rate below 0.1)", "rarely, also for HAN (text)",
          "ss_single", "flip_max", "below", 0.1),
    Claim("SS-2", "Serrano & Smith 2019", "zeroing the highest weight moves the output more than "
          "a random one (ΔJS above 0)", "ΔJS mostly > 0, small",
          "ss_single", "delta_js", "above", 0.0),
    Claim("SS-3", "Serrano & Smith 2019", "gradient orders flip the decision sooner than attention "
          "(fraction zeroed: attention minus gradient above 0)", "gradient sooner (text)",
          "ss_multiple", "fraction_attention", "above", 0.0, minus="fraction_gradient"),
    Claim("VA-1", "Vashishth et al. 2019", "single-sequence classification hardly needs attention "
          "(accuracy lost to uniform weights below 0.02)", "small drop on SST, IMDB, Yelp",
          "vashishth", "correct_learned", "below", 0.02, minus="correct_uniform",
          tasks=("sentiment", "synthetic")),
    Claim("VA-2", "Vashishth et al. 2019", "NLI needs its attention (accuracy lost to uniform "
          "weights above 0.02)", "large drop on SNLI, MultiNLI",
          "vashishth", "correct_learned", "above", 0.02, minus="correct_uniform",
          tasks=("nli",)),
    Claim("VA-3", "Vashishth et al. 2019", "translation needs its attention (sentence BLEU lost "
          "to uniform weights at every step above 5 points)",
          "BLEU falls sharply (Multi30k, News Commentary)",
          "vashishth_mt", "bleu_learned", "above", 5.0, minus="bleu_uniform",
          tasks=("alignment", "alignment_reverse")),
    Claim("VA-4", "Vashishth et al. 2019", "a translation model trained with uniform attention "
          "translates worse (sentence BLEU lost above 5 points)",
          "uniform training hurts NMT (their numbers not retrieved)",
          "vashishth_mt", "bleu_learned", "above", 5.0, minus="bleu_uniform_trained",
          tasks=("alignment", "alignment_reverse")),
    Claim("VA-5", "Vashishth et al. 2019", "in translation attention aligns words (sentence AER "
          "of its argmax links below that of its own weights permuted)",
          "attention agrees with alignment (manual evaluation)",
          "vashishth_mt", "aer_learned", "below", 0.0, minus="aer_permuted",
          tasks=("alignment", "alignment_reverse")),
    Claim("WP-1", "Wiegreffe & Pinter 2019", "a model trained with frozen uniform attention is about "
          "as accurate (accuracy lost below 0.02)", "small drop on SST; larger on IMDB",
          "wp_uniform", "correct_learned", "below", 0.02, minus="correct_uniform_trained"),
    Claim("WP-2", "Wiegreffe & Pinter 2019", "attention varies little between models of other seeds "
          "(JSD below ln 2 / 2, the 'very different' of the adversarial claim)",
          "small for most examples (plots only)",
          "wp_seeds", "jsd_to_base_seed", "below", math.log(2) / 2),
    Claim("WP-3", "Wiegreffe & Pinter 2019", "the base model's frozen attention guides a "
          "context-free MLP better than uniform weights (accuracy gained above 0)",
          "frozen LSTM attention best on every dataset (their Table 3)",
          "wp_diagnostic", "correct_base", "above", 0.0, minus="correct_uniform"),
    Claim("WP-4", "Wiegreffe & Pinter 2019", "a whole model trained to attend differently "
          "(λ = 1) reaches less JSD than 'very different' (below ln 2 / 2)",
          "adversaries' JSD well below the per-example ones, at a TVD cost",
          "wp_adversary", "jsd_lambda_1", "below", math.log(2) / 2),
    Claim("MH-1", "Mohankumar et al. 2020", "the Diversity LSTM's states are diverse (conicity "
          "below 0.35)", "conicity 0.20 diversity, 0.68 vanilla (SST)",
          "mohankumar", "conicity", "below", 0.35, variant="diversity"),
    Claim("MH-2", "Mohankumar et al. 2020", "the Orthogonal LSTM's states are diverse (conicity "
          "below 0.35)", "conicity 0.28 orthogonal (SST)",
          "mohankumar", "conicity", "below", 0.35, variant="orthogonal"),
    Claim("MH-3", "Mohankumar et al. 2020", "attention is about as comprehensive as integrated "
          "gradients (difference above −0.02), on the diverse LSTMs and not the vanilla one",
          "more faithful attention on diversity (flips, gradient agreement)",
          "mohankumar", "comp_attention", "above", -0.02, minus="comp_integrated_gradients"),
    Claim("MH-4", "Mohankumar et al. 2020", "on a model whose evidence is planted, attention "
          "finds it about as well as integrated gradients (precision@k difference above "
          "−0.05), on the diverse LSTMs and not the vanilla one",
          "not tested in the paper (no ground truth there)",
          "mohankumar", "precision_attention", "above", -0.05,
          minus="precision_integrated_gradients"),
)


def _task_name(task: str) -> str:
    return task.split("@")[0].split("[")[0]


def claims(rows: Rows, chosen: Sequence[Claim] = CLAIMS) -> list[dict]:
    """One row per (claim, task with values): a task whose rows lack the claim's
    quantities (another kind of task, or rows written before the quantity existed) has
    none."""
    out = []
    for c in chosen:
        for task in rows.tasks(c.experiment):
            if c.tasks and _task_name(task) not in c.tasks:
                continue
            if c.variant is not None and f"bilstm={c.variant}" not in task:
                continue
            if not rows.has(c.experiment, task, (c.quantity, c.minus)):
                continue
            m, undefined = rows.matrix(c.experiment, task, c.quantity)
            if c.minus is not None:
                a, b = _paired(rows, c.experiment, task, c.quantity, c.minus)
                m = a - b
            e = estimate(m)
            out.append({"claim": c, "task": task, "estimate": e, "undefined": undefined,
                        "verdict": None if e is None else verdict(e["ci_low"], e["ci_high"],
                                                                  c.threshold, c.side)})
    return out


def _paired(rows: Rows, experiment: str, task: str, a: str, b: str
            ) -> tuple[np.ndarray, np.ndarray]:
    """Two quantities' (S, N) matrices on the examples where both are defined."""
    seeds = sorted(s for e, t, s in rows.rows if e == experiment and t == task)
    xs, ys = [], []
    for s in seeds:
        r = rows.rows[(experiment, task, s)]
        xs.append(r["values"][a])
        ys.append(r["values"][b])
    x, y = np.array(xs, dtype=float), np.array(ys, dtype=float)
    keep = np.isfinite(x).all(axis=0) & np.isfinite(y).all(axis=0)
    return x[:, keep], y[:, keep]


def _ci(e: dict | None) -> str:
    if e is None:
        return "n/a"
    return f"{e['mean']:.3f} [{e['ci_low']:.3f}, {e['ci_high']:.3f}]"


def render_claims(rows: Rows, tablefmt: str = "github", wide: bool = False) -> str:
    """The claims table; ``wide`` (the docs page) puts paper, claim and their number in
    every row, else (a terminal) rows name the claim by its key and a legend follows."""
    found = claims(rows)
    body = []
    for r in found:
        c = r["claim"]
        ours = _ci(r["estimate"]) + (f" ({r['undefined']} undefined)" if r["undefined"] else "")
        head = [c.paper, c.claim, c.theirs] if wide else [c.key]
        body.append([*head, r["task"], ours, r["verdict"] or "n/a"])
    headers = ["paper", "claim", "theirs"] if wide else ["claim"]
    table = tabulate(body, headers=[*headers, "task", "ours (95 % CI)", "verdict"],
                     tablefmt=tablefmt)
    if wide:
        return table
    legend = [textwrap.fill(f"{c.key}  {c.paper}: {c.claim}; theirs: {c.theirs}", width=100,
                            subsequent_indent="      ")
              for c in dict.fromkeys(r["claim"] for r in found)]
    return table + ("\n\n" + "\n".join(legend) if legend else "")


BINS = (0.0, 0.25, 0.5, 0.75, 1.0 + 1e-9)  # Jain & Wallace's four bins of max attention
BINNED = (("jw_permutation", "median_tvd"), ("jw_adversarial", "jsd"))


def render_bins(rows: Rows, tablefmt: str = "github") -> str:
    """Jain & Wallace's figures as numbers: per task, the permutation's median output TVD
    and the adversary's JSD by the example's largest attention weight, in four bins;
    every (seed, example) pooled, the median and the share of examples in each bin
    (descriptive, as their plots are: no interval)."""
    body = []
    for experiment, quantity in BINNED:
        for task in rows.tasks(experiment):
            values, peaks = [], []
            for (e, t, _), r in rows.rows.items():
                if e == experiment and t == task:
                    values += r["values"][quantity]
                    peaks += r["values"]["max_attention"]
            v, m = np.array(values, dtype=float), np.array(peaks, dtype=float)
            cells = []
            for low, high in itertools.pairwise(BINS):
                inside = (m >= low) & (m < high) & np.isfinite(v)
                cells.append("–" if not inside.any() else
                             f"{np.median(v[inside]):.3f} ({inside.mean():.0%})")
            body.append([task, f"{experiment} {quantity}", *cells])
    return tabulate(body, headers=["task", "median of", "max att. < 0.25", "0.25–0.5",
                                   "0.5–0.75", "≥ 0.75"], tablefmt=tablefmt)


def frontier(rows: Rows) -> list[dict]:
    """Wiegreffe & Pinter's JSD–TVD frontier as rows: per task, each adversarially
    trained model (one per λ: how far its attention is from the base model's, JSD, and
    what that cost in output, TVD), then Jain & Wallace's per-example adversary for
    comparison; means with their intervals, as ``quantities`` has them."""
    def mean(experiment: str, task: str, quantity: str) -> dict | None:
        return estimate(rows.matrix(experiment, task, quantity)[0])

    out = []
    for task in rows.tasks("wp_adversary"):
        seeds = sorted(s for e, t, s in rows.rows if e == "wp_adversary" and t == task)
        lambdas = sorted({k.split("_lambda_")[1] for k in
                          rows.rows[("wp_adversary", task, seeds[0])]["values"]
                          if "_lambda_" in k}, key=float)
        for lam in lambdas:
            out.append({"task": task, "model": f"trained adversary, λ = {lam}",
                        "jsd": mean("wp_adversary", task, f"jsd_lambda_{lam}"),
                        "tvd": mean("wp_adversary", task, f"tvd_lambda_{lam}")})
        if task in rows.tasks("jw_adversarial"):
            out.append({"task": task, "model": "per-example adversary (Jain & Wallace)",
                        "jsd": mean("jw_adversarial", task, "jsd"),
                        "tvd": mean("jw_adversarial", task, "tvd")})
    return out


def render_frontier(rows: Rows, tablefmt: str = "github") -> str:
    return tabulate([[r["task"], r["model"], _ci(r["jsd"]), _ci(r["tvd"])]
                     for r in frontier(rows)],
                    headers=["task", "model", "attention JSD to the base (nats)",
                             "output TVD to the base"], tablefmt=tablefmt)


def render_costs(rows: Rows, tablefmt: str = "github") -> str:
    """What each experiment cost: seconds per model (the mean over seeds), examples,
    and seconds per example, one row per (task, experiment)."""
    body = []
    for task in sorted({t for _, t, _ in rows.rows}):
        for experiment in sorted({e for e, t, _ in rows.rows if t == task}):
            found = [r for (e, t, _), r in rows.rows.items() if e == experiment and t == task]
            seconds = float(np.mean([r["seconds"] for r in found]))
            n = len(found[0]["ids"])
            body.append([task, experiment, len(found), n, f"{seconds:.1f}",
                         f"{seconds / max(n, 1) * 1000:.1f}"])
    return tabulate(body, headers=["task", "experiment", "seeds", "examples", "s per model",
                                   "ms per example"], tablefmt=tablefmt)


def render_quantities(rows: Rows, tablefmt: str = "github") -> str:
    """One table per task (its id above it): every quantity with its interval."""
    every = quantities(rows)
    parts = []
    for task in dict.fromkeys(q["task"] for q in every):
        body = [[q["experiment"], q["quantity"], _ci(q["estimate"]),
                 q["estimate"]["n"] if q["estimate"] else 0,
                 q["estimate"]["n_seeds"] if q["estimate"] else 0, q["undefined"]]
                for q in every if q["task"] == task]
        parts.append(f"{task}\n\n" + tabulate(
            body, headers=["experiment", "quantity", "mean (95 % CI)", "n", "seeds",
                           "undefined"], tablefmt=tablefmt))
    return "\n\n".join(parts)
