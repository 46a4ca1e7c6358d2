"""``faithbench run``: train or load the task models, explain, score, write results
and leaderboard entries, resuming what an earlier run into ``--out`` finished
(``--fresh``: recomputing the units it selects, keeping the rest of ``--out``)."""

from __future__ import annotations

from faithbench.benchmark.cli import options, output

NAME = "run"
HELP = "train/load models, explain, score, write results and leaderboard entries"
EPILOG = """examples:
  faithbench run                                   # offline default: synthetic task, all explainers
  faithbench run --tasks sentiment --data-dir ../shared/data
  faithbench run --explainers gradient my_plugin.py --metrics comprehensiveness sufficiency
  faithbench run --tasks sentiment --data-dir ../shared/data --sample 300   # 300 at random, seeded
  faithbench run --fresh --explainers gradient     # recompute gradient's units; keep the rest"""

def add_arguments(p) -> None:
    p.add_argument("--tasks", nargs="+", default=["synthetic"],
                   help="task names, by spaces or commas (default synthetic; `faithbench "
                   "list` shows them)")
    p.add_argument("--explainers", nargs="+", default=[],
                   help="default: every reference explainer the model serves (spaces or "
                   "commas; `faithbench list` shows them)")
    p.add_argument("--metrics", nargs="+", default=[],
                   help="default: every metric for the task (spaces or commas)")
    p.add_argument("--fresh", action="store_true",
                   help="recompute the units this command selects (their explanations too, "
                   "not read from the cache); other results in --out are kept")
    options.data(p)
    options.model(p, seeds=True)
    options.examples(p)
    options.explainers(p)
    options.engine(p)
    options.executor(p)
    options.progress(p)
    options.display(p)
    options.results(p)


def main(args) -> int:
    from faithbench.benchmark.runner import run

    config = options.checked(args)
    if output.has_plugin(config.explainers):
        output.containment(config)
    summary = run(config)
    output.summary(summary, short=not args.full_ids)
    return summary.exit_code
