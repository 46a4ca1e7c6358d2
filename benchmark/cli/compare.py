"""``faithbench compare``: the paired difference of two entries on the same examples."""

from __future__ import annotations

from faithbench.benchmark.plan import DEFAULT_OUT

NAME = "compare"
HELP = "paired difference of two entries on the same examples"
EPILOG = """examples:
  faithbench compare gradient attention
  faithbench compare 3f2a9c integrated_gradients --task sentiment"""

def add_arguments(p) -> None:
    p.add_argument("a", help="an entry: its id (a unique prefix is enough), explainer id or "
                   "explainer name")
    p.add_argument("b", help="the entry to compare it with, named the same ways")
    p.add_argument("--entries", default=f"{DEFAULT_OUT}/leaderboard",
                   help=f"the entries folder (default {DEFAULT_OUT}/leaderboard)")
    p.add_argument("--task", help="only this task (default: every task both have)")
    p.add_argument("--metric", help="only this metric (default: every metric both have)")
    p.add_argument("--format", choices=["table", "markdown", "csv", "latex", "json"],
                   default="table", help="default table (fits 120 columns); latex: "
                   "booktabs, best in bold, suite in the caption; json: every field at full "
                   "precision")


def main(args) -> int:
    from faithbench.benchmark.cli.leaderboard import check_names
    from faithbench.leaderboard.compare import compare, find_pair
    from faithbench.leaderboard.entry import read_entries
    from faithbench.leaderboard.render import render_comparison

    entries = read_entries(args.entries)
    records = [r for e in entries for r in e.results]
    check_names(args, [r.task for r in records], [r.metric for r in records])
    a, b = find_pair(entries, args.a, args.b, args.task, root=args.entries)
    print(render_comparison(compare(a, b, task=args.task, metric=args.metric), args.format))
    return 0
