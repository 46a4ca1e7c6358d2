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
  faithbench leaderboard --wide --family sanity --metrics "randomization_cascading[depth=1]" \\
      "randomization_cascading[depth=2]" randomization_cascading  # the cascade, stage by stage
  faithbench leaderboard --cost  # one row per explainer: seconds, rows, share of the run
  faithbench leaderboard --published --task sentiment   # the release: one row per explainer
  faithbench leaderboard --wide --metrics comprehensiveness sufficiency \\
      "comprehensiveness[eraser=mask]" "sufficiency[eraser=mask]" """

def add_arguments(p) -> None:
    p.add_argument("--entries", default=f"{DEFAULT_OUT}/leaderboard",
                   help=f"the entries folder (default {DEFAULT_OUT}/leaderboard, where "
                   "`faithbench run` writes them)")
    p.add_argument("--task", help="only this task (a name such as sentiment, or a full task "
                   "id); default: every task")
    p.add_argument("--metric", help="only this metric (a name or an id); with --wide, the "
                   "column to sort by; default: every metric")
    p.add_argument("--format", choices=["table", "markdown", "csv", "latex", "json"],
                   default="table", help="default table (fits 120 columns); latex: "
                   "booktabs, best in bold, suite in the caption; csv and json: every "
                   "field at full precision")
    p.add_argument("--family", choices=FAMILIES,
                   help="only metrics of this family (never mixed in one ranking); "
                   "default: every family")
    p.add_argument("--wide", action="store_true",
                   help="one table per task: explainers x metrics, each cell mean [CI] "
                   "(the sanity checks in a table of their own); default with --published")
    p.add_argument("--cost", action="store_true",
                   help="instead of scores, what each explainer cost, one row per explainer "
                   "and task: seconds and rows asked of the model per example, explaining "
                   "and scoring, and its share of the run (every row an explainer asks for "
                   "is charged to it, also one answered from the shared engine's memory)")
    p.add_argument("--metrics", nargs="+", default=[],
                   help="with --wide: these metric columns, in this order (names or ids, "
                   "e.g. 'comprehensiveness[eraser=mask]'); default: every metric")
    p.add_argument("--full-ids", action="store_true",
                   help="explainers by their full ids with every parameter; default: by "
                   "name (lime), with the parameters that tell two settings apart "
                   "(csv and json always keep the ids)")
    p.add_argument("--short-names", action="store_true",
                   help="explainers by name: the default (kept for scripts that pass it)")
    p.add_argument("--published", nargs="?", const="", default=None, metavar="RELEASE",
                   help="the published reference results shipped with faithbench (or a "
                   "release folder), with your --entries beside them where the folder "
                   "exists, each in its own suite; one row per explainer (with --metric: "
                   "that metric's ranking); default: your entries only")


def main(args) -> int:
    from faithbench.leaderboard.cost import run_costs
    from faithbench.leaderboard.entry import read_entries
    from faithbench.leaderboard.rank import matches, rank
    from faithbench.leaderboard.render import render_costs, render_leaderboard

    if args.published is not None:
        return _published(args)
    entries = read_entries(args.entries)
    if not entries:
        raise InputError(f"no leaderboard entries under {args.entries}; "
                         "`faithbench run` or `faithbench submit` writes them")
    records = [r for e in entries for r in e.results]
    check_names(args, [r.task for r in records], [r.metric for r in records])
    if args.cost:
        found = [e for e in entries if any(matches(r.task, args.task) for r in e.results)]
        print(render_costs(run_costs(found, short=_short(args)), args.format), end="")
        return 0
    if args.format == "json":  # one document: the ranked rows, whatever the layout
        rows = rank(entries, task=args.task, metric=None if args.wide else args.metric,
                    family=args.family)
        columns = _metric_ids(options.split_list(args.metrics))
        if args.wide and columns:
            rows = [r for r in rows if any(matches(r.metric, c) for c in columns)]
        print(render_leaderboard(rows, "json"), end="")
        return 0
    if not args.wide:
        rows = rank(entries, task=args.task, metric=args.metric, family=args.family)
        print(render_leaderboard(_named(rows, args), args.format))
        return 0
    columns = _metric_ids(options.split_list(args.metrics))
    prefer = output.headline() if args.family in (None, "faithfulness") else None
    for task in [args.task] if args.task else sorted({t for e in entries for t in e.suite}):
        print(output.matrices(entries, task, args.format, family=args.family,
                              sort_by=_sort_key(args.metric), metrics=columns, prefer=prefer,
                              short=_short(args)) + "\n")
    return 0


def check_names(args, tasks, metrics) -> None:
    """A ``--task`` or ``--metric`` that names nothing here: "did you mean" among the
    tasks and metrics there are (ids and names), before anything is ranked."""
    from faithbench.benchmark.core.ids import short_name
    from faithbench.benchmark.core.registry import unknown
    from faithbench.leaderboard.rank import matches

    for kind, asked, known in (("task", args.task, tasks), ("metric", args.metric, metrics)):
        if asked is not None and not any(matches(k, asked) for k in known):
            names = {short_name(k) for k in known} | set(known)
            raise unknown(kind, asked, names)


def _short(args) -> bool:
    """Short names in tables people read (unless ``--full-ids``); CSV and JSON keep the
    ids."""
    return not args.full_ids and args.format not in ("csv", "json")


def _named(rows, args):
    from faithbench.leaderboard.render import with_short_names

    return with_short_names(rows) if _short(args) else rows


def _published(args) -> int:
    """The release's rows (their suites marked as published) and, beside them, the
    user's entries (marked as theirs: their own models), one row per explainer; then
    how to rank yours among them (``submit --published``) or rerun the references."""
    from faithbench.leaderboard.rank import matches
    from faithbench.leaderboard.release import beside, read_release
    from faithbench.leaderboard.render import render_costs, render_leaderboard, render_matrix

    release = read_release(args.published or None)
    rows, _, _, _ = beside(release, [args.entries])
    check_names(args, [r.task for r in rows], [r.metric for r in rows])
    if args.cost:
        costs = [c for c in release.run_costs if matches(c.task, args.task)]
        print(render_costs(costs, args.format), end="")
        return 0
    wide = args.wide or args.metric is None
    metric = None if wide else args.metric
    rows = [r for r in rows if matches(r.task, args.task) and matches(r.metric, metric)
            and (args.family is None or r.family == args.family)]
    if not rows:
        raise InputError(f"release {release.version} has no rows for task={args.task!r}, "
                         f"metric={args.metric!r}, family={args.family!r}")
    if args.format in ("json", "csv") or not wide:
        print(render_leaderboard(_named(rows, args), args.format),
              end="" if args.format == "json" else "\n")
    else:
        columns = _metric_ids(options.split_list(args.metrics))
        for task in sorted({r.task for r in rows}):
            print(render_matrix([], task, args.format, sort_by=_sort_key(args.metric),
                                metrics=columns, prefer=output.headline(), rows=rows,
                                short=_short(args)) + "\n")
    if args.format in ("table", "markdown"):
        output.published_note(release, args.task)
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
