"""``faithbench submit``: validate a plugin, run it on the tasks, add its entry."""

from __future__ import annotations

from faithbench.benchmark.cli import options, output

NAME = "submit"
HELP = "validate a plugin, run it on the tasks, add a leaderboard entry"
EPILOG = """examples:
  faithbench submit my_explainer.py
  faithbench submit my_explainer.py --tasks synthetic sentiment --data-dir ../shared/data"""

def add_arguments(p) -> None:
    p.add_argument("submission")
    p.add_argument("--tasks", nargs="+", default=["synthetic"])
    p.add_argument("--notes", default="")
    options.data(p)
    options.model(p, seeds=True)
    options.examples(p)
    options.explainers(p)
    options.engine(p)
    options.progress(p)
    options.results(p)


def main(args) -> int:
    import sys

    from faithbench.benchmark.verbs import submit

    config = options.checked(args)
    checks, summary = submit(args.submission, config)
    if not output.checks(checks) or summary is None:
        print("validation failed: not submitted", file=sys.stderr)
        return 1
    output.summary(summary)
    return summary.exit_code
