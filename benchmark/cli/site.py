"""``faithbench site``: the leaderboard as a static site that opens from the file system."""

from __future__ import annotations

import shlex
import sys

from faithbench.benchmark.cli.options import read_given
from faithbench.benchmark.plan import DEFAULT_OUT

NAME = "site"
HELP = "the leaderboard as a static site (no server, no CDN)"
EPILOG = """examples:
  faithbench site --out site                   # from faithbench-results/leaderboard
  faithbench site --entries runs/sst2/leaderboard runs/snli/leaderboard --out site
  faithbench site --published --debate runs/sentiment runs/nli --out site   # with the debate"""


def add_arguments(p) -> None:
    p.add_argument("--entries", nargs="+", default=None,
                   help="entry folders (several are merged; an entry in two is shown once; "
                   f"default: {DEFAULT_OUT}/leaderboard where it exists)")
    p.add_argument("--out", required=True, help="folder to write the site into; required")
    p.add_argument("--examples", type=int, default=20,
                   help="test examples each suite page's explorer offers (a menu shows one "
                   "at a time) with every explainer's token scores and the human rationale "
                   "(read from the run folders' explanations; 0: none; default 20)")
    p.add_argument("--roar", nargs="+", default=[], metavar="ROWS",
                   help="ROAR sweeps to draw: rows.jsonl files, or the folders holding "
                   "them (`faithbench roar --out DIR` writes DIR/roar/rows.jsonl); default: none")
    p.add_argument("--agreement", nargs="+", default=[], metavar="RECORDS",
                   help="agreement records to draw as heatmaps: agreement.jsonl files, or "
                   "the folders holding them (`faithbench agreement --out DIR` writes "
                   "DIR/agreement.jsonl); default: none")
    p.add_argument("--meta-eval", nargs="+", default=[], metavar="VALUES",
                   help="meta-evaluation values to draw as tables: values.jsonl files, or "
                   "the folders holding them (`faithbench meta-eval --out DIR` writes "
                   "DIR/meta_eval/values.jsonl); default: none")
    p.add_argument("--debate", nargs="+", default=[], metavar="VALUES",
                   help="attention-debate values to draw as the claims table: values.jsonl "
                   "files, or the folders holding them (`faithbench debate --out DIR` writes "
                   "DIR/debate/values.jsonl); default: none")
    p.add_argument("--published", nargs="?", const="", default=None, metavar="RELEASE",
                   help="the site of the published reference results (or a release "
                   "folder), with your --entries beside them where given; default: your "
                   "entries only")


def main(args) -> int:
    from pathlib import Path

    from faithbench.benchmark.core.errors import InputError
    from faithbench.benchmark.site import build_site
    from faithbench.leaderboard.entry import read_entry_folders

    command = "faithbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if args.entries is None:
        default = Path(f"{DEFAULT_OUT}/leaderboard")
        extras = args.roar or args.meta_eval or args.debate
        args.entries = [str(default)] if default.is_dir() or not extras else []
    if args.published is not None:
        return _published(args, command)
    entries = read_entry_folders(args.entries)
    if not (entries or args.roar or args.agreement or args.meta_eval or args.debate):
        raise InputError(f"no leaderboard entries under {', '.join(args.entries) or '-'}; "
                         "`faithbench run` or `faithbench submit` writes them")
    pages = build_site(entries, Path(args.out), sources=args.entries,
                       command=command, examples=args.examples, roar=roar_rows(args.roar),
                       agreement=agreement_records(args.agreement),
                       meta_eval=meta_eval_values(args.meta_eval),
                       debate=debate_rows(args.debate))
    print(f"wrote {len(pages)} pages ({len(entries)} entries) to {args.out}; "
          f"open {Path(args.out) / 'index.html'}")
    return 0


def _published(args, command: str) -> int:
    """The release's site; the user's entries beside it (their suites marked as theirs)
    where ``--entries`` names folders that exist."""
    from pathlib import Path

    from faithbench.benchmark.site import build_site_of_rows, roar_summary
    from faithbench.leaderboard.release import beside, read_release

    release = read_release(args.published or None)
    rows, costs, described, curves = beside(release, args.entries)
    mine = roar_rows(args.roar)  # the user's own sweep, else the release's
    pages = build_site_of_rows(rows, described, costs, Path(args.out), command=command,
                               sources=[str(release.path)], published=release.version,
                               curves=curves,
                               agreement=release.agreement + agreement_records(args.agreement),
                               roar=roar_summary(mine) if mine else release.roar,
                               commands=release.manifest.get("commands", []),
                               meta_eval=meta_eval_values(args.meta_eval),
                               debate=debate_rows(args.debate))
    print(f"wrote {len(pages)} pages (release {release.version}) to {args.out}; "
          f"open {Path(args.out) / 'index.html'}")
    return 0


def meta_eval_values(paths: list[str]):
    """The meta-evaluation values of files or folders (DIR/meta_eval/values.jsonl), as
    one ``meta_eval.Values``; None when no path is given."""
    if not paths:
        return None
    from faithbench.benchmark import meta_eval
    from faithbench.benchmark.core.records import read_jsonl

    rows = read_given(paths, "--meta-eval", ("values.jsonl", "meta_eval/values.jsonl"),
                       read_jsonl)
    return meta_eval.Values.of_rows(rows)


def debate_rows(paths: list[str]):
    """The debate values of files or folders (DIR/debate/values.jsonl), merged as one
    ``debate.tables.Rows``; None when no path is given."""
    if not paths:
        return None
    from faithbench.benchmark.core.records import read_jsonl
    from faithbench.benchmark.debate.tables import Rows

    return Rows.of_rows(read_given(paths, "--debate", ("values.jsonl", "debate/values.jsonl"),
                                   read_jsonl))


def agreement_records(paths: list[str]) -> list:
    """The agreement records of files or folders (DIR/agreement.jsonl)."""
    from faithbench.benchmark.core.records import read_agreements

    return read_given(paths, "--agreement", ("agreement.jsonl",), read_agreements)


def roar_rows(paths: list[str]) -> list:
    """The ROAR rows of files or folders (DIR/rows.jsonl or DIR/roar/rows.jsonl)."""
    from faithbench.benchmark.core.records import read_roar_rows

    return read_given(paths, "--roar", ("rows.jsonl", "roar/rows.jsonl"), read_roar_rows)
