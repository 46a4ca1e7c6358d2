"""``faithbench site``: the leaderboard as a static site that opens from the file system."""

from __future__ import annotations

import shlex
import sys

from faithbench.benchmark.plan import DEFAULT_OUT

NAME = "site"
HELP = "the leaderboard as a static site (no server, no CDN)"
EPILOG = """examples:
  faithbench site --out site                   # from faithbench-results/leaderboard
  faithbench site --entries runs/sst2/leaderboard runs/snli/leaderboard --out site"""


def add_arguments(p) -> None:
    p.add_argument("--entries", nargs="+", default=[f"{DEFAULT_OUT}/leaderboard"],
                   help="entry folders (several are merged; an entry in two is shown once)")
    p.add_argument("--out", required=True, help="folder to write the site into")


def main(args) -> int:
    from pathlib import Path

    from faithbench.benchmark.core.errors import InputError
    from faithbench.leaderboard.entry import Entry, read_entries
    from faithbench.benchmark.site import build_site

    entries: dict[str, Entry] = {}
    for folder in args.entries:
        if not Path(folder).is_dir():
            raise InputError(f"--entries {folder}: no such folder")
        for e in read_entries(folder):
            entries.setdefault(e.entry_id, e)
    if not entries:
        raise InputError(f"no leaderboard entries under {', '.join(args.entries)}; "
                         "`faithbench run` or `faithbench submit` writes them")
    command = "faithbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    pages = build_site(list(entries.values()), Path(args.out), sources=args.entries,
                       command=command)
    print(f"wrote {len(pages)} pages ({len(entries)} entries) to {args.out}; "
          f"open {Path(args.out) / 'index.html'}")
    return 0
