"""JSON Schemas of what faithbench writes and returns, exported from the types that
write it, so the two cannot drift apart (``tests/test_golden.py`` checks the committed
copies in ``docs/schemas/`` against a fresh export, and a run's files against them).

- ``result``: a line of ``results.jsonl`` (and of a leaderboard entry's), with its
  ``estimate``, ``provenance`` and ``timing``;
- ``failure``: a line of ``failures.jsonl``; ``agreement``: of ``agreement.jsonl``;
- ``roar_row``: a line of ``roar/rows.jsonl``;
- ``ranked`` and ``compared``: ``as_dict()`` of the rows ``faithbench.leaderboard.rank``
  and ``compare`` return (the columns of their CSV).

Regenerate with ``python -m faithbench.schemas docs/schemas`` (needs pydantic, in the
``dev`` extra).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from faithbench.benchmark.core.records import (
    AgreementRecord,
    FailureRecord,
    ResultRecord,
    RoarRow,
)
from faithbench.leaderboard.rows import Compared, Ranked

TYPES: dict[str, type] = {"result": ResultRecord, "failure": FailureRecord,
                          "agreement": AgreementRecord, "roar_row": RoarRow,
                          "ranked": Ranked, "compared": Compared}
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schema(name: str) -> dict:
    """The JSON Schema of ``TYPES[name]``'s ``as_dict()``."""
    from pydantic import TypeAdapter

    cls = TYPES[name]
    out = TypeAdapter(cls).json_schema(mode="serialization")
    return {"$schema": DIALECT, "$id": f"{name}.schema.json", **out}


def write(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in TYPES:
        path = folder / f"{name}.schema.json"
        path.write_text(json.dumps(schema(name), indent=2, sort_keys=True) + "\n",
                        encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":  # pragma: no cover - a maintainer's command
    for p in write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")):
        print(p)
