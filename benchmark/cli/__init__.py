"""``faithbench``: a thin argparse layer; each verb is one module here (its arguments,
epilog and ``main(args) -> int``) that calls one public function.

Exit status: 0 ok; 1 an explainer plugin failed (the rest of the run completed);
2 bad input (data file, explanations file, unknown name, bad option).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from faithbench.benchmark.cli import (
    agreement,
    align,
    compare,
    explain,
    leaderboard,
    list_verb,
    meta_eval,
    predict,
    release,
    roar,
    run,
    score,
    site,
    submit,
    validate,
)
from faithbench.benchmark.core.errors import FaithbenchError

VERBS = (run, explain, score, align, predict, validate, submit, leaderboard, compare, site,
         release, roar, agreement, meta_eval, list_verb)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="faithbench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's); on a "
                        "machine shared with other jobs, 1 avoids thread oversubscription")
    sub = parser.add_subparsers(dest="verb", required=True)
    for verb in VERBS:
        p = sub.add_parser(verb.NAME, help=verb.HELP, epilog=verb.EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        verb.add_arguments(p)
        p.set_defaults(main=verb.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        return args.main(args)
    except FaithbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # finished units and explained batches are on disk
        print(f"\ninterrupted: faithbench {args.verb} stopped; what it finished is kept on "
              "disk, and the same command again resumes from there", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `faithbench leaderboard | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
