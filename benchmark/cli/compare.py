"""``faithbench compare``: the paired difference of two entries on the same examples."""

from __future__ import annotations

from faithbench.benchmark.plan import DEFAULT_OUT

NAME = "compare"
HELP = "paired difference of two entries on the same examples"
EPILOG = """examples:
  faithbench compare gradient attention
  faithbench compare 3f2a9c integrated_gradients --task sentiment"""

def add_arguments(p) -> None:
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--entries", default=f"{DEFAULT_OUT}/leaderboard")
    p.add_argument("--task")
    p.add_argument("--metric")
    p.add_argument("--format", choices=["table", "markdown", "csv", "latex", "json"],
                   default="table", help="latex: booktabs, best in bold, suite in the "
                   "caption; json: every field at full precision")


def main(args) -> int:
    from faithbench.leaderboard.compare import compare, find_pair
    from faithbench.leaderboard.entry import read_entries
    from faithbench.leaderboard.render import render_comparison

    a, b = find_pair(read_entries(args.entries), args.a, args.b, args.task, root=args.entries)
    print(render_comparison(compare(a, b, task=args.task, metric=args.metric), args.format))
    return 0
