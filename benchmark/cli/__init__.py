"""``faithbench``: a thin argparse layer; each verb is one module here (its arguments,
epilog and ``main(args) -> int``) that calls one public function.

Exit status: 0 ok; 1 an explainer plugin failed (the rest of the run completed);
2 bad input (data file, explanations file, unknown name, bad option).
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
from pathlib import Path
from typing import Any

from faithbench.benchmark.cli import (
    agreement,
    align,
    compare,
    debate,
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
from faithbench.benchmark.core.progress import heartbeat

VERBS = (run, explain, score, align, predict, validate, submit, leaderboard, compare, site,
         release, roar, agreement, meta_eval, debate, list_verb)


DESCRIPTION = """\
faithbench scores explanation methods for faithfulness: does an explanation point at the
tokens the model actually relied on? Attention, gradients, LRP, occlusion, LIME/SHAP and
your own explainer, through the same tests on the same trained models, ranked with CIs.

the three things you do with it:
  submit an explainer   faithbench validate my_explainer.py
                        faithbench submit my_explainer.py --published --tasks sentiment \\
                            --data-dir DIR --sample 200    # ranked among the references
  run the benchmark     faithbench run                     # offline default, a generated task
                        faithbench run --tasks sentiment nli --data-dir DIR --seeds 0 1 2
  compare entries       faithbench leaderboard | compare A B | site --out site

your own data: faithbench run --tasks text --dataset reviews.csv --text-column review \\
                   --label-column stars
"""
EPILOG = """\
`faithbench VERB --help` lists a verb's options, each with its default; --threads and -v
go before or after the verb. Exit status: 0 ok; 1 an explainer plugin failed (the rest
of the run completed); 2 bad input (a data file, a name, an option)."""


def global_options(parser: argparse._ActionsContainer, *, defaults: bool) -> None:
    """``-v`` and ``--threads``, on the top-level parser (``defaults``) and again on
    every verb's, where an option given after the verb overrides the top level's."""
    keep: dict[str, Any] = {} if defaults else {"default": argparse.SUPPRESS}
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log what faithbench does (INFO); default: warnings only", **keep)
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's); "
                        "on a machine shared with other jobs, 1 avoids thread "
                        "oversubscription", **keep)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="faithbench", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    global_options(parser, defaults=True)
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb in VERBS:
        p = sub.add_parser(verb.NAME, help=verb.HELP, epilog=verb.EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        global_options(p.add_argument_group("global (also before the verb)"), defaults=False)
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
    line_buffered(sys.stdout)  # a log (nohup, tee, CI) has each line as it is printed
    try:
        with heartbeat(show=not getattr(args, "no_progress", False)):
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
    except OSError as exc:  # a full or read-only disk, no permission: one line, not a traceback
        if exc.errno not in DISK_ERRORS:
            raise
        print(f"error: {disk_error(exc, getattr(args, 'out', None))}", file=sys.stderr)
        return 2


# what a disk or a path can refuse a write with (the rest of OSError stays a traceback: a bug)
DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS, errno.EPERM,
                         errno.ENOTDIR, errno.EEXIST, errno.EISDIR})


def disk_error(exc: OSError, out: str | None) -> str:
    """One line for an OSError in ``DISK_ERRORS``: the file it names (else ``--out``) and
    the system's words; for a full disk, what to do. What was written is kept: a result
    file's partial last line is ignored and cut off by the next run, and every other
    file is written whole or not at all (``core.files.atomic_write``).

    >>> import errno
    >>> disk_error(OSError(errno.ENOSPC, "No space left on device", "o/results.jsonl"), "o")
    'cannot write o/results.jsonl: No space left on device; free space (or give another --out) and run the same command again: it resumes from what was written'
    >>> disk_error(OSError(errno.EACCES, "Permission denied"), "o")
    'cannot write under --out o: Permission denied'
    >>> disk_error(OSError(errno.EACCES, "Permission denied", "data/test.jsonl"), "o")
    'cannot open data/test.jsonl: Permission denied'
    """
    path = exc.filename if exc.filename is not None else (
        f"under --out {out}" if out else "a file")
    writing = exc.filename is None or exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) or (
        out is not None and Path(os.path.abspath(out)) in
        (Path(os.path.abspath(exc.filename)), *Path(os.path.abspath(exc.filename)).parents))
    line = f"cannot {'write' if writing else 'open'} {path}: {exc.strerror or exc}"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        line += ("; free space (or give another --out) and run the same command again: it "
                 "resumes from what was written")
    return line


def line_buffered(stream) -> None:
    """``stream`` flushed at every newline where it is not a terminal (a terminal is
    already): what was printed before a run is killed is in its log."""
    try:
        if not stream.isatty():
            stream.reconfigure(line_buffering=True)
    except (AttributeError, ValueError, OSError):  # replaced (pytest's capture) or closed
        pass
