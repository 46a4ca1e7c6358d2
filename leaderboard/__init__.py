"""The faithbench leaderboard: entries on disk, and the code that ranks, compares and
renders them. It reads files and never runs a model; it imports only the records,
stats, files, names and errors modules of ``faithbench.benchmark.core``, and no torch
(tests/test_layout.py checks both)."""

from faithbench.leaderboard.compare import compare
from faithbench.leaderboard.entry import Entry, find_entry, read_entries, read_entry, write_entry
from faithbench.leaderboard.rank import rank
from faithbench.leaderboard.render import render_comparison, render_leaderboard, render_matrix

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
