"""``faithbench debate``: the experiments of the attention debate (Jain & Wallace,
Serrano & Smith, Wiegreffe & Pinter, Vashishth et al., Mohankumar et al.) on
faithbench's own models, and the papers' claims beside ours with a verdict."""

from __future__ import annotations

from faithbench.benchmark.cli import options
from faithbench.benchmark.debate import EXPERIMENTS  # no torch: the registry alone

NAME = "debate"
HELP = "the attention debate's experiments on these models, claim by claim"
EPILOG = """examples:
  faithbench debate --limit 100                    # offline: the synthetic task's BiLSTM
  faithbench debate --tasks sentiment nli --data-dir ../shared/data --seeds 0 1 2 \\
      --out runs/debate
  faithbench debate --tables-only --out runs/debate --table claims
  faithbench debate --tasks alignment --data-dir ../shared/data --seeds 0 \
      --experiments vashishth_mt --out runs/alignment     # translation: BLEU and AER
  faithbench debate --tasks sentiment --bilstm diversity --experiments mohankumar \
      --data-dir ../shared/data --out runs/sentiment       # Mohankumar's Diversity LSTM
(every experiment's per-example values go to <out>/debate/values.jsonl as each is done:
a run stopped part-way resumes there, and the tables are always made from that file)"""


def add_arguments(p) -> None:
    p.add_argument("--tasks", nargs="+", default=["synthetic"],
                   help="tasks with a BiLSTM: synthetic (default, offline), sentiment, nli, "
                   "shortcut_single, shortcut_pair, text, text_pair; alignment (its "
                   "encoder-decoder: vashishth, vashishth_mt)")
    p.add_argument("--experiments", nargs="+", default=[],
                   help="default: all that apply to the task (an experiment that does not "
                   "is skipped): " + " ".join(EXPERIMENTS))
    p.add_argument("--permutations", type=int, default=100,
                   help="jw_permutation: shuffles per example (default 100, the paper's)")
    p.add_argument("--adversary-steps", type=int, default=500,
                   help="jw_adversarial: optimisation steps (default 500, the paper's)")
    p.add_argument("--tables-only", action="store_true",
                   help="compute nothing: print the tables of <out>/debate/values.jsonl")
    p.add_argument("--table", choices=("claims", "quantities", "bins", "frontier", "costs"),
                   help="print this table alone, without its caption (default: both)")
    p.add_argument("--wide", action="store_true",
                   help="claims: paper, claim and their number in every row (the docs' "
                   "form), not the claim's key and a legend below")
    options.data(p)
    options.model(p, seeds=True)
    options.examples(p)
    options.progress(p)
    options.results(p)


def main(args) -> int:
    from pathlib import Path

    from faithbench.benchmark import debate
    from faithbench.benchmark.core.errors import InputError
    from faithbench.benchmark.debate import tables

    for name, value in (("--permutations", args.permutations),
                        ("--adversary-steps", args.adversary_steps)):
        if value < 1:
            raise InputError(f"{name} must be at least 1, got {value}")
    config = options.checked(args)
    path = Path(config.out) / "debate" / debate.VALUES
    if not args.tables_only:
        path = debate.run(config, args.experiments,
                          debate.Options(args.permutations, args.adversary_steps))
    elif not path.exists():
        raise InputError(f"--tables-only: no values file at {path}; run `faithbench debate "
                         f"--out {config.out}` first")
    rows = tables.Rows.read(path)
    if args.table:
        render = {"claims": lambda: tables.render_claims(rows, wide=args.wide),
                  "quantities": lambda: tables.render_quantities(rows),
                  "bins": lambda: tables.render_bins(rows),
                  "frontier": lambda: tables.render_frontier(rows),
                  "costs": lambda: tables.render_costs(rows)}
        print(render[args.table]())
        return 0
    print("claims of the papers, ours beside theirs (95 % CI over examples and model seeds)\n")
    print(tables.render_claims(rows, wide=args.wide))
    print("\nevery quantity\n")
    print(tables.render_quantities(rows))
    print(f"\nvalues: {path}")
    return 0
