"""Broken plugin: correct output, but it sleeps on every call."""

import time

from faithbench.api import ExplainerSpec

DELAY_S = 0.05


class Slow:
    spec = ExplainerSpec(name="broken_slow", version="1")

    def explain(self, model, batch, target, *, rng):
        time.sleep(DELAY_S)
        return batch.mask.float()


EXPLAINER = Slow()
