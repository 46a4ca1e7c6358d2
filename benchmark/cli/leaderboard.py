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
    p.add_argument("--short-names", action="store_true",
                   help="explainers by name (lime) instead of their full ids with every "
                   "parameter, where the name is unique in its suite (table, markdown, "
                   "latex; csv and json keep the ids)")
    p.add_argument("--published", nargs="?", const="", default=None, metavar="RELEASE",
                   help="the published reference results shipped with faithbench (or a "
                   "release folder), with your --entries beside them where the folder "
                   "exists, each in its own suite")


def main(args) -> int:
    from faithbench.leaderboard.cost import explain_costs
    from faithbench.leaderboard.entry import read_entries
    from faithbench.leaderboard.rank import matches, rank
    from faithbench.leaderboard.render import render_leaderboard

    if args.published is not None:
        return _published(args)
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
        rows = rank(entries, task=args.task, metric=args.metric, family=args.family)
        print(render_leaderboard(_named(rows, args), args.format, cost=cost))
        return 0
    columns = _metric_ids(options.split_list(args.metrics))
    prefer = "comprehensiveness" if args.family in (None, "faithfulness") else None
    for task in [args.task] if args.task else sorted({t for e in entries for t in e.suite}):
        print(output.matrices(entries, task, args.format, family=args.family,
                              sort_by=_sort_key(args.metric), metrics=columns, prefer=prefer,
                              cost=cost, short=_short(args)) + "\n")
    return 0


def _short(args) -> bool:
    """Short names only in tables people read; CSV and JSON keep the ids."""
    return args.short_names and args.format not in ("csv", "json")


def _named(rows, args):
    from faithbench.leaderboard.render import with_short_names

    return with_short_names(rows) if _short(args) else rows


def _published(args) -> int:
    """The release's rows (their suites marked as published) and, beside them, the
    user's entries (marked as theirs: their own models), then the commands that rerun
    each suite's references on the user's models."""
    from faithbench.leaderboard.rank import matches
    from faithbench.leaderboard.release import beside, read_release
    from faithbench.leaderboard.render import render_leaderboard, render_matrix

    release = read_release(args.published or None)
    rows, cost, _, _ = beside(release, [args.entries])
    metric = None if args.wide else args.metric
    rows = [r for r in rows if matches(r.task, args.task) and matches(r.metric, metric)
            and (args.family is None or r.family == args.family)]
    if not rows:
        raise InputError(f"release {release.version} has no rows for task={args.task!r}, "
                         f"metric={args.metric!r}")
    costs = cost if args.cost else None
    if args.format == "json" or not args.wide:
        print(render_leaderboard(_named(rows, args), args.format, cost=costs),
              end="" if args.format == "json" else "\n")
    else:
        columns = _metric_ids(options.split_list(args.metrics))
        for task in sorted({r.task for r in rows}):
            print(render_matrix([], task, args.format, sort_by=_sort_key(args.metric),
                                metrics=columns, prefer="comprehensiveness", cost=costs,
                                rows=rows, short=_short(args)) + "\n")
    if args.format in ("table", "markdown"):
        print(f"Published release {release.version} ran on the release machine's models; "
              "your runs train your own (weights differ across machines and thread counts), "
              "so your entries are other suites. To compare yours with a reference on one "
              "suite, rerun the references on your models, submit yours into the same "
              "folder, then `faithbench compare`:")
        for suite in release.manifest["suites"]:
            if matches(suite["task"], args.task):
                print(f"  {suite['task']} ({suite['suite']}):\n    {suite['rerun']}")
    return 0


def _sort_key(metric: str | None) -> str | None:
    """The column ``--metric`` sorts a wide table by: a registered name is its default
    parameters (``aer`` is ``aer@1``, not also ``aer[links=threshold;...]``)."""
    return None if metric is None else _metric_ids([metric])[0]


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
