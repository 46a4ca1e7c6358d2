"""``faithbench leaderboard``: rank entries per task and metric, with CIs."""

from __future__ import annotations

from faithbench.benchmark.cli import options, output
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.names import FAMILIES
from faithbench.benchmark.plan import DEFAULT_OUT

NAME = "leaderboard"
HELP = "rank entries per task and metric, with CIs"
EPILOG = """examples:
  faithbench leaderboard
  faithbench leaderboard --task sentiment --metric comprehensiveness --format markdown
  faithbench leaderboard --wide --format markdown  # explainers x metrics, per task
  faithbench leaderboard --wide --family sanity --metrics "randomization_cascading[depth=1]" \
      "randomization_cascading[depth=2]" randomization_cascading  # the cascade, stage by stage
  faithbench leaderboard --wide --cost  # and seconds, forward-equivalents per example
  faithbench leaderboard --wide --metrics comprehensiveness sufficiency \
      "comprehensiveness[eraser=mask]" "sufficiency[eraser=mask]" """

def add_arguments(p) -> None:
    p.add_argument("--entries", default=f"{DEFAULT_OUT}/leaderboard")
    p.add_argument("--task")
    p.add_argument("--metric")
    p.add_argument("--format", choices=["table", "markdown", "csv", "latex", "json"],
                   default="table", help="latex: booktabs, best in bold, suite in the "
                   "caption; json: every field at full precision")
    p.add_argument("--family", choices=FAMILIES,
                   help="only metrics of this family (never mixed in one ranking)")
    p.add_argument("--wide", action="store_true",
                   help="one table per task: explainers x metrics, each cell mean [CI] "
                   "(the sanity checks in a table of their own)")
    p.add_argument("--cost", action="store_true",
                   help="add each explainer's cost per example from its records: seconds "
                   "explaining and forward-equivalents (forward rows + 2 x backward rows)")
    p.add_argument("--metrics", nargs="+", default=[],
                   help="with --wide: these metric columns, in this order (names or ids, "
                   "e.g. 'comprehensiveness[eraser=mask]')")


def main(args) -> int:
    from faithbench.leaderboard.cost import explain_costs
    from faithbench.leaderboard.entry import read_entries
    from faithbench.leaderboard.rank import matches, rank
    from faithbench.leaderboard.render import render_leaderboard

    entries = read_entries(args.entries)
    if not entries:
        raise InputError(f"no leaderboard entries under {args.entries}; "
                         "`faithbench run` or `faithbench submit` writes them")
    cost = explain_costs(entries) if args.cost else None
    if args.format == "json":  # one document: the ranked rows, whatever the layout
        rows = rank(entries, task=args.task, metric=None if args.wide else args.metric,
                    family=args.family)
        columns = _metric_ids(options.split_list(args.metrics))
        if args.wide and columns:
            rows = [r for r in rows if any(matches(r.metric, c) for c in columns)]
        print(render_leaderboard(rows, "json", cost=cost), end="")
        return 0
    if not args.wide:
        print(render_leaderboard(rank(entries, task=args.task, metric=args.metric,
                                      family=args.family), args.format, cost=cost))
        return 0
    columns = _metric_ids(options.split_list(args.metrics))
    prefer = "comprehensiveness" if args.family in (None, "faithfulness") else None
    for task in [args.task] if args.task else sorted({t for e in entries for t in e.suite}):
        print(output.matrices(entries, task, args.format, family=args.family,
                              sort_by=args.metric, metrics=columns, prefer=prefer,
                              cost=cost) + "\n")
    return 0


def _metric_ids(names) -> list[str]:
    """Canonical ids of registered metric names (``comprehensiveness`` is its default
    parameters, ``comprehensiveness[eraser=mask]`` the mask variant), so a column is
    one metric; a name the registry does not know is kept and matched as given."""
    from faithbench import metrics as metric_registry

    out = []
    for name in names:
        try:
            out.append(metric_registry.resolve(name).spec.id)
        except InputError:
            out.append(name)
    return out
