"""Hostile plugin: double-forks a daemon in a new session (``sleep 613.25``) that
would outlive the worker, then explains honestly."""

import os

from faithbench.api import ExplainerSpec


class ForksDaemon:
    spec = ExplainerSpec(name="hostile_daemon", version="1")

    def explain(self, model, batch, target, *, rng):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp("sleep", ["sleep", "613.25"])
            os._exit(0)
        os.wait()
        return batch.mask.float()


EXPLAINER = ForksDaemon()
