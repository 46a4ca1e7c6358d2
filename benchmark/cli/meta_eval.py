"""``faithbench meta-eval``: on models whose evidence is known, score the explainers
against the truth and ask each faithfulness metric whether it ranks them the way the
truth does; and, from any run's results, how alike the metrics rank the explainers."""

from __future__ import annotations

from faithbench.benchmark.cli import options, output

NAME = "meta-eval"
HELP = "explainers and metrics against ground truth (shortcut, synthetic, your planted data)"
EPILOG = """examples:
  faithbench meta-eval --limit 100                 # offline: the synthetic task's planted rationales
  faithbench meta-eval --tasks shortcut_single shortcut_pair --data-dir ../shared/data \\
      --seeds 0 1 2 --sample 200 --out runs/meta
  faithbench meta-eval --tables-only --out runs/meta --table metrics   # from the values file
  faithbench meta-eval --tasks shortcut_single --deceive 1 --data-dir ../shared/data \
      --seeds 0 1 2 --sample 200 --out runs/meta   # attention trained off the shortcut
  faithbench meta-eval --metric-agreement runs/sentiment   # Kendall tau between metric rankings
(every value goes to <out>/meta_eval/values.jsonl as it is computed: a run stopped
part-way resumes there, and the tables are always made from that file)"""


def add_arguments(p) -> None:
    p.add_argument("--tasks", nargs="+", default=["synthetic"],
                   help="tasks with ground truth: synthetic (default), shortcut_single, "
                   "shortcut_pair, or your own (text, text_pair) with --rationale-kind planted")
    p.add_argument("--explainers", nargs="+", default=[],
                   help="default: every reference explainer the model serves; the oracles "
                   "ground_truth and inverted_ground_truth are always added")
    p.add_argument("--metrics", nargs="+", default=[],
                   help="default: every faithfulness metric that needs no retraining, the "
                   "erasure ones with the delete and the mask eraser")
    p.add_argument("--tables-only", action="store_true",
                   help="compute nothing: print the tables of <out>/meta_eval/values.jsonl")
    p.add_argument("--table", choices=("explainers", "reliance", "metrics", "deception",
                                        "verdicts", "pairs", "matrix"),
                   help="print this table alone, without its caption (default: every one "
                   "with rows; deception and verdicts: models trained with --deceive beside "
                   "their λ = 0 model; pairs and matrix: the two forms of --metric-agreement)")
    p.add_argument("--metric-agreement", nargs="+", metavar="RUN", default=[],
                   help="compute nothing: Kendall tau-b between the faithfulness metrics' "
                   "explainer rankings in these run folders' results.jsonl, per model seed, "
                   "with a 95%% t interval over seeds; default: compute")
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
    from faithbench.benchmark.core.errors import InputError
    from faithbench.benchmark.core.records import read_jsonl

    if args.metric_agreement:
        records = options.read_given(args.metric_agreement, "--metric-agreement",
                                     ("results.jsonl",), read_jsonl)
        rows = meta_eval.metric_agreement(records)
        if not rows:
            raise InputError("--metric-agreement: no two faithfulness metrics scored the same "
                             "explainers in these results")
        print(meta_eval.render_agreement(rows, args.table or "pairs"))
        return 0
    if args.table in ("pairs", "matrix"):
        raise InputError(f"--table {args.table} is a form of --metric-agreement RUN")
    config = options.checked(args)
    failures: list = []
    path = Path(config.out) / "meta_eval" / meta_eval.VALUES
    if not args.tables_only:
        path, failures = meta_eval.evaluate(config)
    values = meta_eval.Values.read(path)
    if args.table:
        print(meta_eval.render(values, tables=[args.table], captions=False))
        return 0
    print(meta_eval.render(values))
    print(f"\nvalues: {path}")
    output.failures(failures)
    return 1 if failures else 0
