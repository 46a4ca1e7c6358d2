"""The faithbench leaderboard: entries on disk, and the code that ranks, compares and
renders them. It reads files and never runs a model; it imports only the records,
stats, cache and errors modules of ``benchmark.core``."""

from leaderboard.compare import compare
from leaderboard.entry import Entry, find_entry, read_entries, read_entry, write_entry
from leaderboard.rank import rank
from leaderboard.render import render_comparison, render_leaderboard, render_matrix

__all__ = [
    "Entry",
    "compare",
    "find_entry",
    "rank",
    "read_entries",
    "read_entry",
    "render_comparison",
    "render_leaderboard",
    "render_matrix",
    "write_entry",
]
