"""Retraining on transformed data, written once for the ROAR metric and the ROAR sweep.

A job trains (or loads) one model wherever the executor runs it and ships the model
file back; the driver writes it into its own cache and loads it from there, so a Ray
cluster needs no shared disk and no model is trained twice (before, the metric
trained on a worker and then again on the driver). A ROAR point is then the
retrained model's probabilities on the masked versions of the evaluated examples.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from faithbench.benchmark.core.api import DataTransform, Example, PreparedTask, Task, TaskOptions
from faithbench.benchmark.core.cache import cache_dir
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.executor import Executor
from faithbench.benchmark.core.files import atomic_write


@dataclass(frozen=True)
class TrainJob:
    """One model to train: the task (pickled by value: it holds no data) and options."""

    task: Task
    options: TaskOptions


@dataclass(frozen=True)
class Trained:
    """What a job sends back: the model file (relative to the cache folder) and its
    bytes, the seconds it took, its epochs, and whether it was in the worker's cache."""

    file: str
    blob: bytes
    seconds: float
    epochs: int
    loaded_from_cache: bool


def train_job(job: TrainJob) -> Trained:
    """Train (or load) one model on the worker; its file comes back."""
    start = time.perf_counter()
    prepared = job.task.prepare(job.options, progress=False)
    path = prepared.checkpoint_file
    if path is None:
        raise InputError(f"{job.task.spec.id}: this model has no file to retrain into "
                         "(a --model-path checkpoint is evaluated as is)")
    return Trained(str(path.relative_to(cache_dir())), path.read_bytes(),
                   time.perf_counter() - start, len(prepared.history), prepared.loaded_from_cache)


def keep(trained: Trained) -> Path:
    """Write a shipped model into this machine's cache (unless it is there already)."""
    path = cache_dir() / trained.file
    if not path.exists():
        atomic_write(path, lambda tmp: Path(tmp).write_bytes(trained.blob))
    return path


class Retrainer:
    """Models of one task, trained on transformed data through ``executor``."""

    def __init__(self, task: Task, options: TaskOptions, executor: Executor, *,
                 progress: bool = False):
        self.task, self.base, self.executor, self.progress = task, options, executor, progress

    def options(self, transform: DataTransform | None, seed: int | None = None, *,
                masked_training: bool | None = None) -> TaskOptions:
        """The evaluated model's options with ``transform`` and ``seed``; and with
        ``masked_training`` where it is not None (F-Fidelity's surrogate: the same
        data, trained with random masking)."""
        options = replace(self.base, transform=transform,
                          seed=self.base.seed if seed is None else seed)
        if masked_training is None:
            return options
        return replace(options, masked_training=masked_training)

    def train(self, options: Sequence[TaskOptions],
              on_done: Callable[[int, Trained], None] | None = None) -> None:
        """Train every model this machine's cache lacks, on the executor; as each file
        arrives it is kept, then ``on_done(i, trained)`` (i indexes ``options``)."""
        todo = [i for i, o in enumerate(options) if not self.task.model_file(o).exists()]

        def arrived(j: int, trained: Trained) -> None:
            keep(trained)
            if on_done is not None:
                on_done(todo[j], trained)

        self.executor.map(train_job, [TrainJob(self.task, options[i]) for i in todo],
                          on_done=arrived)

    def __call__(self, transform: DataTransform | None, seed: int | None = None, *,
                 masked_training: bool | None = None) -> PreparedTask:
        """The model trained on ``transform``-ed data (with random masking if
        ``masked_training``): trained on the executor if no cache has it, then loaded
        here from the file it sent back."""
        options = self.options(transform, seed, masked_training=masked_training)
        self.train([options])
        return self.task.prepare(options, progress=self.progress)


def masked(prepared: PreparedTask, split: str, clean: Sequence[Example]) -> list[Example]:
    """The retrained model's (masked) versions of ``clean``, in the same order."""
    by_id = {e.id: e for e in prepared.examples(split)}
    return [by_id[e.id] for e in clean]


@torch.no_grad()
def probabilities(prepared: PreparedTask, examples: Sequence[Example]) -> np.ndarray:
    """(E, C) class probabilities of ``prepared``'s model, in eval mode."""
    prepared.model.eval()
    out = [torch.softmax(prepared.model.logits(b), -1)
           for b, _, _ in prepared.batches(examples, 256)]
    return torch.cat(out).double().numpy() if out else np.empty((0, prepared.n_outputs))


def point(prepared: PreparedTask, split: str, clean: Sequence[Example]
          ) -> tuple[list[Example], np.ndarray, np.ndarray]:
    """A ROAR point: the masked examples, the retrained model's probabilities on them,
    and (E,) 1 where it predicts the gold label."""
    rows = masked(prepared, split, clean)
    probs = probabilities(prepared, rows)
    labels = np.array([e.label for e in clean])
    return rows, probs, (probs.argmax(1) == labels).astype(int)
