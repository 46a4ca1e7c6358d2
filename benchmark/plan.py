"""What a run will do, as data: the configuration, and the frozen units it implies.

A unit is one (task, model seed, explainer, metric) on one split and example limit.
Its key hashes everything that changes its result — the model by its weights, so
units are listed once a model is prepared (``units``) — and "done" is read off the
results file by key. The key formula is that of schema 1: old result folders resume.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

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
    split: str | None = None  # None = the task's eval split (TaskSpec.split)
    limit: int | None = None  # examples scored per task; None = the whole split
    variant: str | None = None  # task-specific data variant (e.g. SST-2 training split)
    gold_out_of_range: str = "error"  # alignment gold links outside a sentence: error or drop
    train_limit: int | None = None
    epochs: int | None = None
    masked_training: bool = False  # task models trained with random masking (Madsen et al.)
    model: str | None = None  # classification model family: None/bilstm, transformer
    model_path: str | None = None  # a Hugging Face classifier directory, evaluated as is
    model_layers: int | None = None  # transformer family: the first N encoder layers only
    executor: str = "in-process"  # where retraining jobs run: in-process, pool or ray
    workers: int | None = None  # pool size / local Ray CPUs (None: all cores)
    address: str | None = None  # a Ray cluster's address (None: start a local one)
    batch_size: int = 32  # examples per explain call and per metric call
    chunk_size: int = 512  # rows per forward pass in the perturbation engine
    time_budget_s: float = 5.0  # per example, per explainer call
    isolation: str = "auto"  # where plugins run: auto (worker for outside plugins), process, none
    progress: bool = True
    write_leaderboard: bool = True
    notes: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Unit:
    """One result to compute: ``key`` names it in ``results.jsonl``."""

    task: str  # task name
    seed: int  # model seed
    explainer: str  # canonical explainer id
    metric: str  # canonical metric id
    split: str
    limit: int | None
    key: str


def models(config: RunConfig) -> list[tuple[str, int]]:
    """(task, model seed) of every model the run evaluates, in run order."""
    return [(task, seed) for task in config.tasks for seed in config.seeds]


def units(config: RunConfig, task: str, seed: int, checkpoint: str, split: str,
          explainers: list[str], metrics: list[str]) -> list[Unit]:
    """Every unit of one model, explainer by explainer (each explainer's metrics share
    its explanations), metrics in the given order."""
    return [Unit(task, seed, e, m, split, config.limit,
                 unit_key(checkpoint, e, m, split, config.limit))
            for e in explainers for m in metrics]


def unit_key(checkpoint: str, explainer_id: str, metric_id: str, split: str,
             limit: int | None) -> str:
    """Content key of one unit. ``checkpoint`` already hashes task, data, model
    config and seed, so same inputs give the same key and any change a new unit."""
    return content_hash({"checkpoint": checkpoint, "explainer": explainer_id,
                         "metric": metric_id, "split": split, "limit": limit})
