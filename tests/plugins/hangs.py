"""Broken plugin: never returns (it would sleep for an hour)."""

import time

from faithbench.api import ExplainerSpec


class Hangs:
    spec = ExplainerSpec(name="broken_hangs", version="1")

    def explain(self, model, batch, target, *, rng):
        time.sleep(3600)
        return batch.mask.float()


EXPLAINER = Hangs()
