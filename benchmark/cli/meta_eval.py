"""``faithbench meta-eval``: on models whose evidence is known, score the explainers
against the truth and ask each faithfulness metric whether it ranks them the way the
truth does."""

from __future__ import annotations

from faithbench.benchmark.cli import options, output

NAME = "meta-eval"
HELP = "explainers and metrics against ground truth (shortcut and synthetic models)"
EPILOG = """examples:
  faithbench meta-eval --limit 100                 # offline: the synthetic task's planted rationales
  faithbench meta-eval --tasks shortcut_single shortcut_pair --data-dir ../shared/data \\
      --seeds 0 1 2 --sample 500
  faithbench meta-eval --tables-only --out runs/meta   # print the tables of values already computed
(every value goes to <out>/meta_eval/values.jsonl as it is computed: a run stopped
part-way resumes there, and the tables are always made from that file)"""


def add_arguments(p) -> None:
    p.add_argument("--tasks", nargs="+", default=["synthetic"],
                   help="tasks with ground truth: synthetic (default), shortcut_single, "
                   "shortcut_pair")
    p.add_argument("--explainers", nargs="+", default=[],
                   help="default: every reference explainer the model serves; the oracles "
                   "ground_truth and inverted_ground_truth are always added")
    p.add_argument("--metrics", nargs="+", default=[],
                   help="default: every faithfulness metric that needs no retraining, the "
                   "erasure ones with the delete and the mask eraser")
    p.add_argument("--tables-only", action="store_true",
                   help="compute nothing: print the tables of <out>/meta_eval/values.jsonl")
    options.data(p)
    options.model(p, seeds=True)
    options.examples(p)
    options.explainers(p)
    options.engine(p)
    options.progress(p)
    options.results(p)


def main(args) -> int:
    from pathlib import Path

    from faithbench.benchmark import meta_eval

    config = options.checked(args)
    failures = []
    path = Path(config.out) / "meta_eval" / meta_eval.VALUES
    if not args.tables_only:
        path, failures = meta_eval.evaluate(config)
    print(meta_eval.render(meta_eval.Values.read(path)))
    print(f"\nvalues: {path}")
    output.failures(failures)
    return 1 if failures else 0
