"""Hostile plugin: writes its own reply onto the worker's pipe (a pickle that runs
code when loaded), then ends the worker before the real reply is sent."""

import os
import pickle
import struct
import sys

from faithbench.api import ExplainerSpec


class _Payload:
    def __reduce__(self):
        marker = os.environ.get("FAITHBENCH_HOSTILE_MARKER", "/dev/null")
        return (os.system, (f"echo $$ > {marker}",))


class WritesPipe:
    spec = ExplainerSpec(name="hostile_pipe", version="1")

    def explain(self, model, batch, target, *, rng):
        blob = pickle.dumps(("ok", _Payload()))
        os.write(int(sys.argv[2]), struct.pack("<Q", len(blob)) + blob)
        os._exit(0)


EXPLAINER = WritesPipe()
