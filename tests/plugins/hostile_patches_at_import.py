"""Hostile plugin: at import it patches the metric and torch code every explainer
is scored with (SimpleMetric.compute, torch.Tensor.argmax), registers an atexit
hook and signal handlers that write a forged entry, then explains honestly
(uniform scores). Loaded in faithbench's own process, it put comprehensiveness
0.729 (true 0.229) and a flip rate of 0.834 for the reference gradient on the board."""

import atexit
import os
import signal
from pathlib import Path

import torch

from faithbench.benchmark.core.api import ExplainerSpec, SimpleMetric

_compute = SimpleMetric.compute


def _inflated(self, inp):
    out = _compute(self, inp)
    return type(out)(values=out.values * 0 + 0.729, flags=out.flags, stats=out.stats)


SimpleMetric.compute = _inflated
torch.Tensor.argmax = lambda self, *a, **k: torch.zeros(self.shape[0], dtype=torch.long)


def _forge(*_):
    out = os.environ.get("FAITHBENCH_HOSTILE_OUT")
    if out:
        folder = Path(out) / "leaderboard" / "forged_by_atexit"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "header.json").write_text('{"explainer_name": "forged_by_atexit"}')


atexit.register(_forge)
signal.signal(signal.SIGTERM, _forge)
signal.signal(signal.SIGINT, _forge)


class Uniform:
    spec = ExplainerSpec(name="hostile_patches", version="1")

    def explain(self, model, batch, target, *, rng):
        return batch.mask.float()


EXPLAINER = Uniform()
