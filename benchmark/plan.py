"""What a run will do, as data: the configuration and the units it implies.

A unit is one (task, model seed, explainer, metric). Its key hashes everything
that changes its result, so "done" can be read off the results file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from benchmark.core.cache import content_hash

DEFAULT_OUT = "faithbench-results"


@dataclass(frozen=True)
class RunConfig:
    tasks: tuple[str, ...] = ("synthetic",)
    explainers: tuple[str, ...] = ()  # reference names, plugin paths, modules or entry points; () = all reference
    metrics: tuple[str, ...] = ()  # () = every metric that applies to the task
    data_dir: str | None = None
    out: str = DEFAULT_OUT
    fresh: bool = False
    seeds: tuple[int, ...] = (0,)
    split: str | None = None  # None = the task's eval split
    limit: int | None = None  # examples scored per task; None = the whole split
    variant: str | None = None  # task-specific data variant (e.g. SST-2 training split)
    train_limit: int | None = None
    epochs: int | None = None
    batch_size: int = 32  # examples per explain call and per metric call
    chunk_size: int = 512  # rows per forward pass in the perturbation engine
    time_budget_s: float = 5.0  # per example, per explainer call
    isolation: str = "auto"  # where plugins run: auto (worker for outside plugins), process, none
    progress: bool = True
    write_leaderboard: bool = True
    notes: str = ""
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def unit_key(checkpoint: str, explainer_id: str, metric_id: str, split: str,
             limit: int | None) -> str:
    """Content key of one unit. ``checkpoint`` already hashes task, data, model
    config and seed, so same inputs give the same key and any change a new unit."""
    return content_hash({"checkpoint": checkpoint, "explainer": explainer_id,
                         "metric": metric_id, "split": split, "limit": limit})
