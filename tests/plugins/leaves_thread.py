"""Broken plugin: starts a (non-daemon) thread that outlives the call by an hour.

``STOP`` lets an in-process test end the thread; in a worker process it dies with it.
"""

import threading

from faithbench.api import ExplainerSpec

STOP = threading.Event()


class LeavesThread:
    spec = ExplainerSpec(name="broken_thread", version="1")

    def explain(self, model, batch, target, *, rng):
        threading.Thread(target=STOP.wait, args=(3600,), name="plugin-leftover").start()
        return batch.mask.float()


EXPLAINER = LeavesThread()
