"""``faithbench roar``: retrain on masked data (ROAR curves, RACU), with the shift
and leakage diagnostics."""

from __future__ import annotations

from faithbench.benchmark.cli import options

NAME = "roar"
HELP = "retrain on masked data (ROAR curves, RACU), shift and leakage diagnostics"
EPILOG = """examples:
  faithbench roar --limit 200                       # offline default: synthetic task, 1 seed
  faithbench --threads 1 roar --tasks sentiment --data-dir ../shared/data --variant sentences \\
      --seeds 0 1 2 --executor pool --workers 2 --out runs/roar
  faithbench roar --tasks sentiment --data-dir ../shared/data --variant sentences \\
      --explainers attention gradient --recursive --executor ray --address HOST:6379
  (resumes: a rerun trains only the jobs missing from <out>/roar/rows.jsonl and prints the tables)"""

def add_arguments(p) -> None:
    p.add_argument("--tasks", nargs="+", default=["synthetic"], help="classification tasks "
                   "(default synthetic)")
    p.add_argument("--explainers", nargs="+", default=[],
                   help="default: the six of the published ROAR table (attention, gradient, "
                   "gradient_x_input, integrated_gradients, occlusion, random; spaces or commas)")
    p.add_argument("--ratios", nargs="+", type=float, default=[0.1, 0.3, 0.5, 0.7, 0.9],
                   help="masked share of each example's tokens (default 0.1 0.3 0.5 0.7 0.9)")
    p.add_argument("--recursive", action="store_true", help="also recursive ROAR: each "
                   "ratio's explanation by the model retrained at the previous ratio")
    p.add_argument("--no-leakage", action="store_true",
                   help="skip the mask-pattern models of the leakage check")
    p.add_argument("--leakage-seeds", type=int, default=3,
                   help="leakage models for the first N seeds (default 3; the paired "
                   "test averages them per example)")
    p.add_argument("--leakage-ratios", nargs="+", type=float,
                   help="leakage models at these ratios only (default: every ratio)")
    p.add_argument("--format", choices=["table", "markdown"], default="table",
                   help="the report's tables (default table)")
    options.data(p)
    options.model(p, seeds=True)
    options.examples(p)
    options.explainers(p)
    options.engine(p)
    options.executor(p)
    options.progress(p)
    options.results(p)


def main(args) -> int:
    from faithbench.benchmark.roar import SweepConfig, report, sweep

    config = options.checked(args)
    rows = sweep(config, SweepConfig(ratios=tuple(args.ratios), recursive=args.recursive,
                                     leakage=not args.no_leakage,
                                     leakage_seeds=args.leakage_seeds,
                                     leakage_ratios=tuple(args.leakage_ratios or ()) or None))
    print(report(rows, fmt="github" if args.format == "markdown" else "simple"))
    print(f"rows: {config.out}/roar/rows.jsonl")
    return 0
