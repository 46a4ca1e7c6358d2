"""The explanation cache of one model on one split, under ``<out>/explanations``.

A file per (model, explainer, split, examples) holds one line per example (id, tokens,
scores, target, the human rationale or gold grades where the data has them
(``reference``, for the site's example explorer), and the whole explanation's seconds
and cost: ``forward_rows``, ``backward_rows``, ``peak_mib``, ``peak_method``, each where
known), sealed by its
sha256 beside it; while an explainer runs, a partial file beside it holds the
finished batches (each with its own seconds and cost), so a run stopped at batch k starts
again at batch k. The file is named like a unit (``unit_key`` of the weights, seeds,
data fingerprint, split and limit), so a resumed run, or another verb on the same
``--out``, does not explain again; ``run --fresh`` drops it and explains again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from faithbench.benchmark.core.api import Example, Explainer, PreparedTask
from faithbench.benchmark.core.cost import UNKNOWN, Cost
from faithbench.benchmark.core.errors import IntegrityError
from faithbench.benchmark.core.files import atomic_write, file_hash
from faithbench.benchmark.core.records import append_jsonl, read_jsonl, write_jsonl_atomic
from faithbench.benchmark.plan import unit_key

log = logging.getLogger(__name__)


@dataclass
class Explained:
    """Per-example scores (one float per token), the target they explain, and what
    explaining them all cost: seconds, and rows and peak memory (``core.cost``; unknown
    fields None, e.g. in a cache file written before faithbench counted)."""

    scores: list[list[float]]
    targets: list[int]
    seconds: float
    cost: Cost = UNKNOWN


@dataclass(frozen=True)
class ExplanationCache:
    """Where one model's explanations of one split's examples live."""

    out: Path
    prepared: PreparedTask
    model_seed: int
    explainer_seed: int | None  # None: the model seed (``plan.Seeds``)
    split: str
    limit: int | dict | None  # ``RunConfig.selection``
    precision: str = "fp32"

    def path(self, explainer: Explainer) -> Path:
        key = unit_key(self.prepared.checkpoint, explainer.spec.id, "explanations", self.split,
                       self.limit, seed=self.model_seed, data=self.prepared.data_fingerprint,
                       explainer_seed=self.explainer_seed, precision=self.precision)
        return (Path(self.out) / "explanations"
                / f"{self.prepared.spec.name}-{explainer.spec.name}-{key}.jsonl")

    def partial(self, explainer: Explainer) -> Path:
        """The finished batches of an explanation under way (``finished_batches``)."""
        return self.path(explainer).with_suffix(".partial.jsonl")

    def drop(self, explainer: Explainer) -> None:
        """Forget the explainer's cached explanations and finished batches (``run
        --fresh`` explains again): a run stopped before the new ones are stored then
        resumes them, never takes the old ones."""
        path = self.path(explainer)
        for stale in (path, path.with_suffix(".sha256"), self.partial(explainer)):
            stale.unlink(missing_ok=True)

    def get(self, explainer: Explainer, examples: Sequence[Example]) -> Explained | None:
        """The cached explanations of ``examples``, or None (also when the file's ids or
        tokens are not these examples, one by one: its explanations would belong to
        other sentences, so they are computed again). The file's sha256 must be the one
        written beside it: a changed file is an IntegrityError."""
        path = self.path(explainer)
        if not path.exists():
            return None
        seal = path.with_suffix(".sha256")
        if not seal.exists():
            log.warning("%s: no content hash beside it (written before faithbench kept one, "
                        "or interrupted); explaining again", path)
            return None
        if seal.read_text().strip() != file_hash(path):
            raise IntegrityError(path, "its content hash is not the one written beside it "
                                 f"({seal.name})", f"delete {path} and {seal} to explain "
                                 "again")
        rows = read_jsonl(path)
        if not rows:
            return None
        same = len(rows) == len(examples) and all(
            r.get("id") == e.id and r.get("tokens") == list(e.tokens)
            and len(r.get("scores", ())) == len(e.tokens) for r, e in zip(rows, examples))
        if not same:
            log.warning("%s: cached explanations are not of this session's examples; "
                        "explaining again", path)
            return None
        return Explained([r["scores"] for r in rows], [r["target"] for r in rows],
                         rows[0].get("seconds", 0.0), Cost.from_dict(rows[0]))

    def put(self, explainer: Explainer, examples: Sequence[Example],
            explained: Explained) -> None:
        path = self.path(explainer)
        seal = path.with_suffix(".sha256")
        # the old hash goes first: a run killed between the two writes leaves a file
        # without one (explained again), never new rows beside the old rows' hash (refused)
        seal.unlink(missing_ok=True)
        write_jsonl_atomic(path, [
            {"id": e.id, "tokens": list(e.tokens), "scores": s, "target": t,
             "reference": None if e.reference is None else list(e.reference),
             "seconds": explained.seconds, **explained.cost.as_dict()}
            for e, s, t in zip(examples, explained.scores, explained.targets)])
        digest = file_hash(path)  # checked on every hit (``get``)
        atomic_write(seal, lambda tmp: Path(tmp).write_text(digest + "\n"))


def append_batch(path: Path, i: int, batch, targets: torch.Tensor, rows: list, took: float,
                 cost: Cost = UNKNOWN) -> None:
    """Batch ``i``'s explanations (and its seconds and cost), appended to a partial file
    as it finishes."""
    append_jsonl(path, {"batch": i, "ids": list(batch.example_ids), "targets": targets.tolist(),
                        "scores": rows, "seconds": took, **cost.as_dict()})


def finished_batches(path: Path, batches: list, targets: torch.Tensor, size: int
                     ) -> list[dict]:
    """The lines of a partial explanation file that are this session's batches 0, 1, ...
    in order (same example ids, targets and lengths); anything after the first line that
    is not is cut off the file (e.g. written with another ``--batch-size``)."""
    lines = read_jsonl(path)
    good = 0
    for i, line in enumerate(lines[: len(batches)]):
        batch = batches[i][0]
        if (line.get("batch") != i or line.get("ids") != list(batch.example_ids)
                or line.get("targets") != targets[i * size : i * size + len(batch)].tolist()
                or [len(r) for r in line.get("scores", ())] != batch.lengths.tolist()):
            break
        good = i + 1
    if good < len(lines):
        log.warning("%s: %d of %d finished batches match this session; explaining the rest",
                    path, good, len(lines))
        write_jsonl_atomic(path, lines[:good])
    elif good:
        log.info("%s: resuming after %d finished batches", path, good)
    return lines[:good]
