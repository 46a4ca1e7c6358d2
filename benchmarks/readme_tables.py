"""Regenerate the leaderboard tables of README.md and of the results pages
(docs/results/*.md) from result files.

Each measured table in the README sits under the command that prints it, on a line of
its own in backticks (`` `faithbench leaderboard --entries runs/... --format markdown
...` ``, `` `faithbench meta-eval --tables-only --out runs/meta --table metrics` ``, or
`` `python benchmarks/workers_budget.py runs/...` ``). This script runs
every such command whose ``--entries`` folder (the budget's folders) exists under
``--runs-root`` (the folder the README's ``run`` commands were started in) and puts its
table in place of the one below the command; tables whose entries are absent are left
as they are and listed, so a partial rerun updates only what it recomputed.

    python benchmarks/readme_tables.py --runs-root /path/where/runs/live          # write
    python benchmarks/readme_tables.py --runs-root /path/where/runs/live --check  # diff only
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import os
import shlex
import sys
from pathlib import Path

from faithbench.benchmark.cli import main as faithbench

ROOT = Path(__file__).resolve().parent.parent
# the README's headline table, every table of the results pages (one page per group)
# and the guides' worked examples
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs" / "results").glob("*.md")),
         *sorted((ROOT / "docs" / "guides").glob("*.md")))
PREFIXES = ("`faithbench leaderboard ", "`faithbench compare ", "`faithbench meta-eval ",
            "`faithbench debate ", "`python benchmarks/workers_budget.py ")


def command_of(line: str) -> list[str] | None:
    """The argv of a README line that is exactly one backticked leaderboard or compare
    command (or ``python benchmarks/workers_budget.py``'s), program name included."""
    line = line.strip()
    if not (line.startswith(PREFIXES) and line.endswith("`") and line.count("`") == 2):
        return None
    return shlex.split(line[1:-1])


def inputs_of(argv: list[str]) -> list[str]:
    """The folders (under the runs root) the command reads."""
    if argv[0] != "faithbench":  # the budget script: its arguments are result folders
        return argv[2:]
    if argv[1] == "debate":  # --tables-only --out DIR
        return [argv[argv.index("--out") + 1]]
    if argv[1] == "meta-eval":  # --tables-only --out DIR, or --metric-agreement RUN...
        if "--metric-agreement" in argv:
            rest = argv[argv.index("--metric-agreement") + 1:]
            return [a for a in itertools.takewhile(lambda a: not a.startswith("--"), rest)]
        return [argv[argv.index("--out") + 1]]
    return [argv[argv.index("--entries") + 1] if "--entries" in argv
            else "faithbench-results/leaderboard"]


def table_of(argv: list[str], root: Path) -> list[str]:
    """The markdown table lines the command prints, run in ``root``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("workers_budget",
                                                  ROOT / "benchmarks" / "workers_budget.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("workers_budget", module)  # its dataclasses look themselves up
    spec.loader.exec_module(module)
    budget = module.main
    out, here = io.StringIO(), Path.cwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(out):
            code = faithbench(argv[1:]) if argv[0] == "faithbench" else budget(argv[2:])
    finally:
        os.chdir(here)
    if code != 0:
        raise SystemExit(f"{shlex.join(argv)} exited {code}")
    return [line for line in out.getvalue().splitlines() if line.startswith("|")]


def regenerate(lines: list[str], root: Path) -> tuple[list[str], list[str], list[str]]:
    """(new README lines, commands rerun, commands skipped for want of entries)."""
    out, done, skipped, i = [], [], [], 0
    while i < len(lines):
        out.append(lines[i])
        argv = command_of(lines[i])
        i += 1
        if argv is None:
            continue
        if not all((root / folder).is_dir() for folder in inputs_of(argv)):
            skipped.append(shlex.join(argv))
            continue
        while i < len(lines) and not lines[i].strip():  # blank lines before it
            out.append(lines[i])
            i += 1
        while i < len(lines) and lines[i].startswith("|"):  # the old table, if any
            i += 1
        out.extend(table_of(argv, root))
        if i < len(lines) and lines[i].strip():  # a table ends at a blank line
            out.append("")
        done.append(shlex.join(argv))
    return out, done, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-root", type=Path, default=Path.cwd(),
                        help="folder the README's run commands were started in (default: .)")
    parser.add_argument("--check", action="store_true",
                        help="only say which tables would change; exit 1 if any would")
    args = parser.parse_args(argv)
    any_change = False
    for page in PAGES:
        old = page.read_text().splitlines()
        new, done, skipped = regenerate(old, args.runs_root)
        for cmd in skipped:
            print(f"skipped (no entries under {args.runs_root}): {cmd}",
                  file=sys.stderr)
        changed = new != old
        any_change |= changed
        print(f"{page.relative_to(ROOT)}: {len(done)} tables regenerated, {len(skipped)} "
              f"skipped; {'changes' if changed else 'unchanged'}")
        if changed and not args.check:
            page.write_text("\n".join(new) + "\n")
    return 1 if args.check and any_change else 0


if __name__ == "__main__":
    sys.exit(main())
