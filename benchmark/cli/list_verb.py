"""``faithbench list``: tasks, model families (and what each offers explainers),
explainers and metrics, with their canonical ids."""

from __future__ import annotations

NAME = "list"
HELP = "tasks, models, explainers and metrics: canonical ids, what each model offers"
EPILOG = """examples:
  faithbench list"""

def add_arguments(p) -> None:
    """No options."""


def main(args) -> int:
    from faithbench.benchmark.catalog import catalog
    from faithbench.leaderboard.render import safe_table

    for title, rows, headers in catalog():
        table = safe_table(rows, headers=headers, width=120, whole=("name", "id"))
        print(f"{title}\n{table}\n")
    return 0
