"""``faithbench explain``: one explanation per example of a split, to a JSON Lines
file (the schema ``score --explanations`` reads)."""

from __future__ import annotations

from faithbench.benchmark.cli import options

NAME = "explain"
HELP = "write one explanation per example to a JSON Lines file"
EPILOG = """examples:
  faithbench explain --task synthetic --explainer gradient --limit 5 --out grads.jsonl
  faithbench explain --task sentiment --data-dir ../shared/data --explainer attention --out att.jsonl"""

def add_arguments(p) -> None:
    p.add_argument("--task", required=True, help="the task (`faithbench list` shows them); "
                   "required")
    p.add_argument("--explainer", required=True, help="a reference explainer's name (with "
                   "parameters: 'attention[layer=0]'), a plugin file, module or entry point; "
                   "required")
    p.add_argument("--out", required=True, help="the explanations file to write (.jsonl); "
                   "required")
    options.data(p)
    options.model(p)
    options.examples(p)
    options.explainers(p)
    options.engine(p)
    options.progress(p)


def main(args) -> int:
    from faithbench.benchmark.verbs import explain_to_file
    from faithbench.leaderboard.suite import selection_label

    config = options.checked(args)
    n = explain_to_file(args.task, args.explainer, args.out, config)
    print(f"wrote {n} explanations ({selection_label(config.as_dict())} of the split) "
          f"to {args.out}")
    return 0
