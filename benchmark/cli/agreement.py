"""``faithbench agreement``: how alike explainers rank tokens (Kendall tau-b, top-k
overlap), with CIs."""

from __future__ import annotations

from faithbench.benchmark.cli import options, output

NAME = "agreement"
HELP = "how alike explainers rank tokens: Kendall tau-b and top-k overlap"
EPILOG = """examples:
  faithbench agreement --task synthetic --limit 100
  faithbench agreement --task sentiment --data-dir ../shared/data
  faithbench agreement --task sentiment --data-dir ../shared/data \\
      --explainers attention gradient occlusion --k-frac 0.1
  (reuses the explanations a `faithbench run` with the same --out already wrote)"""

def add_arguments(p) -> None:
    p.add_argument("--task", required=True, help="the task (`faithbench list` shows them); "
                   "required")
    p.add_argument("--explainers", nargs="+", default=[],
                   help="default: every reference explainer the model serves")
    p.add_argument("--k-frac", type=float, default=0.2,
                   help="top-k overlap with k = ceil(K_FRAC * n) tokens (default 0.2)")
    options.data(p)
    options.model(p)
    options.examples(p)
    options.explainers(p)
    options.engine(p)
    options.progress(p)
    options.results(p)


def main(args) -> int:
    from faithbench.benchmark.verbs import agreement
    from faithbench.leaderboard.suite import selection_label

    config = options.checked(args)
    rows, path, failures = agreement(args.task, config, k_frac=args.k_frac)
    _print(rows)
    print(f"\nexamples: {selection_label(config.as_dict())} of the split; "
          f"agreement record appended to {path}")
    output.failures(failures)
    return 1 if failures else 0


def _print(rows: list[dict]) -> None:
    """(a) explainer x explainer mean tau-b; (b) one line per pair with CIs."""
    from faithbench.leaderboard.render import safe_table

    if not rows:
        print("fewer than two explainers to compare: no pairs")
        return

    def num(v, fmt=".3f"):
        return "n/a" if v is None else format(v, fmt)

    def ci(r, mean, stem):
        return f"{num(r[mean])} [{num(r[stem + '_ci_low'])}, {num(r[stem + '_ci_high'])}]"

    names = list(dict.fromkeys([n for r in rows for n in (r["a"], r["b"])]))
    tau = {frozenset((r["a"], r["b"])): r["tau_mean"] for r in rows}
    print("mean Kendall tau-b (undefined examples left out)")
    print(safe_table([[a] + ["1" if a == b else num(tau[frozenset((a, b))]) for b in names]
                      for a in names], headers=[""] + names, disable_numparse=True))
    k = rows[0]["k_frac"]
    print()
    print(safe_table([(f"{r['a']} / {r['b']}", r["n"], ci(r, "tau_mean", "tau"), num(r["tau_sd"]),
                       ci(r, "share_p_le_0_05", "share_p_le_0_05"),
                       ci(r, "topk_overlap_mean", "topk_overlap"), r["n_undefined"])
                      for r in rows],
                     headers=["pair", "n", "tau-b mean [95% CI]", "sd", "share p<=.05 [CI]",
                              f"top-{k:.0%} overlap [CI]", "undefined"], disable_numparse=True))
