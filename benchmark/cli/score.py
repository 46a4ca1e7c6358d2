"""``faithbench score``: metrics of explanations computed anywhere (a JSON Lines
file per explainer), or AER / precision / recall of word alignments against the gold."""

from __future__ import annotations

from faithbench.benchmark.cli import options
from faithbench.benchmark.core.errors import InputError

NAME = "score"
HELP = "score explanations computed anywhere with the task's model"
EPILOG = """examples:
  faithbench score --task synthetic --explanations grads.jsonl
  faithbench score --task alignment --data-dir ../shared/data --alignments A.jsonl   # AER, P, R
  faithbench score --task alignment --data-dir ../shared/data --alignments E.jsonl \\
      --submit-as eflomal --entries runs/alignment/leaderboard     # a reference row, no model
  faithbench score --task sentiment --data-dir ../shared/data --explanations mine.jsonl \\
      --metrics comprehensiveness --per-example per_example.jsonl
  faithbench score --task generation --model-path DIR --inseq inseq_out.json   # Inseq's file"""

def add_arguments(p) -> None:
    p.add_argument("--task", required=True, help="the task (`faithbench list` shows them); "
                   "required")
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--explanations", nargs="+", help=".jsonl of explanations (faithbench "
                       "explain's schema); several files share one model and engine, and "
                       "their rows say which file they score (this, --inseq or --alignments is "
                       "required)")
    given.add_argument("--inseq", nargs="+", metavar="FILE", help="task generation: "
                       "attributions saved by Inseq (FeatureAttributionOutput.save: JSON, "
                       "gzipped or not, one file or one per sequence), scored step by step; "
                       "this, --explanations or --alignments is required")
    given.add_argument("--alignments", help='alignment task: .jsonl of {"id", "links": [[i, j], '
                       '...]} per gold sentence pair, scored against the gold (AER, precision, '
                       "recall); this or --explanations is required")
    p.add_argument("--metrics", nargs="+", default=[], help="metric names or ids (spaces or "
                   "commas); default: every metric of the task that needs no reference")
    p.add_argument("--per-example", help="write one object per (id, metric) with its value "
                   "to this file; default: none written")
    p.add_argument("--summary", help="write the summary rows (estimate, n, seconds, rows "
                   "forwarded) as JSON Lines to this file; default: printed only")
    p.add_argument("--submit-as", help="with --alignments: add them to the leaderboard under "
                   "this name (a row no model produced: a reference aligner, fast_align, "
                   "...); default: not added")
    p.add_argument("--entries", help="with --submit-as: the leaderboard folder (default "
                   "faithbench-results/leaderboard)")
    options.data(p)
    options.model(p)
    options.examples(p)
    options.engine(p)
    options.progress(p)


def main(args) -> int:
    from pathlib import Path

    from faithbench.benchmark.core.records import write_jsonl_atomic
    from faithbench.leaderboard.render import safe_table

    config = options.checked(args)
    if args.alignments:
        from faithbench.benchmark.alignments import score_alignments

        if config.sample is not None:
            raise InputError("--sample is not supported by score --alignments, which reads "
                             "gold pairs in file order; use --limit N (the first N pairs)")
        rows = score_alignments(args.task, args.alignments, config, submit_as=args.submit_as,
                                entries=args.entries)
    else:
        from faithbench.benchmark.verbs import score_file

        rows = score_file(args.task, args.explanations or args.inseq, config, args.per_example,
                          inseq=bool(args.inseq))
    if args.summary:
        write_jsonl_atomic(Path(args.summary), rows)
    files = [(r["explanations"],) if "explanations" in r else () for r in rows]
    print(safe_table([(*f, r["metric"], r["direction"], f"{r['mean']:.4f}",
                       f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]", _n_defined(r))
                      for f, r in zip(files, rows)],
                     headers=[*(["explanations"] if any(files) else []), "metric", "better",
                              "mean", "95% CI", "n"]))
    return 0


def _n_defined(row: dict) -> str:
    """n, and how many more examples the metric leaves undefined (e.g. ``60 (+2 undefined)``)."""
    k = row.get("undefined", 0)
    return f"{row['n']} (+{k} undefined)" if k else str(row["n"])
