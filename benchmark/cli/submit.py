"""``faithbench submit``: validate a plugin, run it on the tasks, add its entry."""

from __future__ import annotations

from faithbench.benchmark.cli import options, output
from faithbench.benchmark.core.errors import InputError

NAME = "submit"
HELP = "validate a plugin, run it on the tasks, add a leaderboard entry"
EPILOG = """examples:
  faithbench submit my_explainer.py
  faithbench submit my_explainer.py --tasks synthetic sentiment --data-dir ../shared/data"""

def add_arguments(p) -> None:
    p.add_argument("submission", help="the plugin: a .py file, a module name or an entry "
                   "point")
    p.add_argument("--tasks", nargs="+", default=None,
                   help="tasks to score it on, by spaces or commas (default synthetic; with "
                   "--published: every task the release ships models for)")
    p.add_argument("--published", nargs="?", const="", default=None, metavar="RELEASE",
                   help="score it on the published release's own models and examples "
                   "(nothing trained) and rank it among the release's reference entries, "
                   "with paired tests against its neighbours; with --sample N on N examples "
                   "drawn at random; RELEASE: a release folder (default: the newest "
                   "shipped); default: train the tasks' models here")
    p.add_argument("--notes", default="", help="free text kept in the entry's header "
                   "(default: none)")
    options.data(p)
    options.model(p, seeds=True)
    options.examples(p)
    options.explainers(p)
    options.engine(p)
    options.progress(p)
    options.display(p)
    options.results(p)


def main(args) -> int:
    import sys

    from faithbench.benchmark.verbs import submit

    if args.published is not None:
        return _published(args)
    args.tasks = args.tasks or ["synthetic"]
    config = options.checked(args)
    output.containment(config)
    checks, summary = submit(args.submission, config)
    if not output.checks(checks) or summary is None:
        print("validation failed: not submitted", file=sys.stderr)
        return 1
    output.summary(summary, short=not args.full_ids)
    return summary.exit_code


def _published(args) -> int:
    import sys

    from faithbench.benchmark.published import submit_published
    from faithbench.leaderboard.release import read_release

    given = [flag for flag, value in (
        ("--seeds", args.seeds), ("--seed", args.seed), ("--train-limit", args.train_limit),
        ("--epochs", args.epochs), ("--variant", args.variant), ("--model", args.model),
        ("--model-path", args.model_path), ("--layers", args.layers),
        ("--masked-training", args.masked_training), ("--half-weights", args.half_weights),
        ("--split", args.split), ("--limit", args.limit), ("--dataset", args.dataset))
        if value not in (None, False, [])]
    if given:
        raise InputError(f"{given[0]}: --published scores the plugin on the release's own "
                         "models, seeds and examples; options that would make or choose "
                         "others do not apply (--sample N draws N of its examples)")
    tasks = options.split_list(args.tasks) if args.tasks else None
    args.tasks = None
    config = options.checked(args)
    output.containment(config)
    checks, placed = submit_published(args.submission, config, release=args.published or None,
                                      tasks=tasks)
    if not output.checks(checks):
        print("validation failed: not submitted", file=sys.stderr)
        return 1
    output.placed(placed, read_release(args.published or None).version,
                  short=not args.full_ids)
    failures = [f for p in placed for f in p.summary.failures]
    output.failures(failures)
    return 1 if failures else 0
