"""Explaining and scoring a list of examples: the two loops every verb shares.

Both go batch by batch; every forward pass of a metric goes through one
``Perturber`` (the engine), and base predictions are computed once per model and
handed to every metric.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from benchmark.core.api import Explainer, MetricInput
from benchmark.core.isolation import plugin_caller
from benchmark.core.perturb import Perturber
from benchmark.core.validation import model_eval


@dataclass
class Explained:
    """Per-example scores (one float per token) and the target they explain."""

    scores: list[list[float]]
    targets: list[int]
    seconds: float


@dataclass
class Scored:
    ids: list[str]  # the examples scored, in order (a subset for plausibility metrics)
    values: np.ndarray  # (E,) per-example metric values, in example order
    flags: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: float = 0.0
    rows_forwarded: int = 0


@torch.no_grad()
def base_probs(ready, examples: Sequence, perturber: Perturber, batch_size: int) -> torch.Tensor:
    """(E, C) p(·|x) of every example, once per model (in eval mode)."""
    model_eval(ready.model)
    out = [perturber.probs(batch) for batch, _, _ in ready.batches(examples, batch_size)]
    return torch.cat(out) if out else torch.empty(0, len(ready.spec.labels))


def explain(explainer: Explainer, ready, examples: Sequence, targets: torch.Tensor, *,
            batch_size: int, seed: int, time_budget_s: float | None, progress: bool,
            isolation: str = "auto") -> Explained:
    """Run the plugin over ``examples``; raises PluginError on the first bad batch.

    Each call is guarded (``benchmark.core.isolation``): in a worker process for an
    outside plugin under ``isolation="auto"``, in this process for the reference ones.
    """
    scores, start = [], time.perf_counter()
    bar = tqdm(total=len(examples), desc=f"explain {explainer.spec.name}", leave=False,
               disable=not progress)
    with plugin_caller(explainer, ready.model, time_budget_s=time_budget_s,
                       isolation=isolation) as caller:
        for i, (batch, _, _) in enumerate(ready.batches(examples, batch_size)):
            t = targets[i * batch_size : i * batch_size + len(batch)]
            s = caller.explain(batch, t, seed=seed)
            scores += [s[r, : int(n)].tolist() for r, n in enumerate(batch.lengths)]
            bar.update(len(batch))
    bar.close()
    return Explained(scores, targets.tolist(), time.perf_counter() - start)


def with_reference(examples: Sequence) -> list[int]:
    """Positions of the examples that have a non-empty reference rationale."""
    return [i for i, e in enumerate(examples) if e.reference is not None and any(e.reference)]


def reference_rate(examples: Sequence) -> float | None:
    """Mean over the examples with a reference of |reference| / n (None if none has one)."""
    rates = [sum(e.reference) / len(e.reference) for e in examples
             if e.reference is not None and len(e.reference)]
    return sum(rates) / len(rates) if rates else None


def score(metric, ready, examples: Sequence, scores: Sequence[Sequence[float]],
          targets: torch.Tensor, probs: torch.Tensor, perturber: Perturber, *,
          batch_size: int, progress: bool) -> Scored:
    """Per-example values of one metric; ``probs`` are the shared base predictions.

    A plausibility metric sees only the examples that have a reference rationale.
    """
    if metric.spec.needs_reference:
        keep = with_reference(examples)
        examples = [examples[i] for i in keep]
        scores = [scores[i] for i in keep]
        index = torch.tensor(keep, dtype=torch.long)
        targets, probs = targets.index_select(0, index), probs.index_select(0, index)
    rate = reference_rate(examples) if metric.spec.needs_reference else None
    values, flags = [], {}
    start, rows0 = time.perf_counter(), perturber.rows_forwarded
    bar = tqdm(total=len(examples), desc=f"score {metric.spec.name}", leave=False,
               disable=not progress)
    model_eval(ready.model)  # whatever ran before, metrics see the model without dropout
    for i, (batch, _, reference) in enumerate(ready.batches(examples, batch_size)):
        sl = slice(i * batch_size, i * batch_size + len(batch))
        padded = torch.zeros(batch.ids.shape, dtype=torch.float32)
        for r, row in enumerate(scores[sl]):
            padded[r, : len(row)] = torch.tensor(row, dtype=torch.float32)
        out = metric.compute(MetricInput(batch=batch, scores=padded, target=targets[sl],
                                         base_probs=probs[sl], perturber=perturber,
                                         reference=reference, reference_rate=rate))
        values.append(out.values.cpu().numpy())
        for name, flag in out.flags.items():
            flags.setdefault(name, []).append(flag.cpu().numpy())
        bar.update(len(batch))
    bar.close()
    return Scored(
        ids=[e.id for e in examples],
        values=np.concatenate(values) if values else np.empty(0),
        flags={k: np.concatenate(v) for k, v in flags.items()},
        seconds=time.perf_counter() - start,
        rows_forwarded=perturber.rows_forwarded - rows0,
    )
