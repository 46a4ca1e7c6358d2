"""``faithbench release``: summary files of reference results, to ship as a release."""

from __future__ import annotations

NAME = "release"
HELP = "write a published release (ranked rows, entries, commands) from entry folders"
EPILOG = """examples:
  faithbench release --entries runs/alignment/leaderboard --version v1 \\
      --commands-file docs/release-commands.txt   # into faithbench's releases/v1
  faithbench leaderboard --published               # read it back"""


def add_arguments(p) -> None:
    p.add_argument("--entries", nargs="+", required=True, help="entry folders; required")
    p.add_argument("--version", required=True, help="the release's name, e.g. v4; required")
    p.add_argument("--out", help="release folder (default: the package's releases/VERSION)")
    p.add_argument("--agreement", nargs="+", default=[], metavar="RECORDS",
                   help="agreement records to ship (agreement.jsonl files or the folders "
                   "holding them), drawn by `faithbench site --published`; default: none")
    p.add_argument("--roar", nargs="+", default=[], metavar="ROWS",
                   help="a ROAR sweep to ship as its curves and report (rows.jsonl files or "
                   "the folders holding them), drawn by `faithbench site --published`; "
                   "default: none")
    p.add_argument("--models", action="store_true",
                   help="ship the entries' models (from this machine's cache; float16 where "
                   "trained with --half-weights) and their entries in full, so `faithbench "
                   "submit --published` scores a plugin on them; default: summaries only")
    p.add_argument("--carry", metavar="RELEASE",
                   help="an earlier release (a shipped version such as v3, or a folder) "
                   "whose suites of tasks these entries do not have are copied as they are, "
                   "each marked with the release it comes from; default: none")
    p.add_argument("--commands-file", help="a text file of the commands that produced the "
                   "entries, one per line, kept in the manifest; default: none")


def main(args) -> int:
    from pathlib import Path

    from faithbench.benchmark.cli.site import agreement_records, roar_rows
    from faithbench.benchmark.site import roar_summary
    from faithbench.leaderboard.entry import read_entry_folders
    from faithbench.leaderboard.release import RELEASES, read_release, write_release

    entries = read_entry_folders(args.entries)
    commands = []
    if args.commands_file:
        commands = [line.rstrip() for line in Path(args.commands_file).read_text().splitlines()
                    if line.strip()]
    out = Path(args.out) if args.out else RELEASES / args.version
    rows = roar_rows(args.roar)
    models = None
    if args.models:
        from faithbench.benchmark.published import pack_models

        models = pack_models(entries, out)
    carry = read_release(args.carry) if args.carry else None
    files = write_release(entries, out, args.version, commands=commands,
                          agreement=agreement_records(args.agreement),
                          roar=roar_summary(rows) if rows else None, models=models,
                          carry=carry)
    size = sum(f.stat().st_size for f in files)
    print(f"release {args.version}: {len(entries)} entries, {size / 1024:.0f} KiB in "
          f"{len(files)} summary files, in {out}")
    if models:
        weights = sum(m["bytes"] for m in models.values())
        full = sum(f.stat().st_size for f in (out / "reference").rglob("*") if f.is_file())
        print(f"  {len(models)} models ({weights / 2**20:.1f} MiB) in {out / 'models'}; "
              f"reference entries in full ({full / 2**20:.1f} MiB) in {out / 'reference'}")
    return 0
