"""Hostile plugin: returns a tensor subclass whose unpickling runs code (it writes
the file named by FAITHBENCH_HOSTILE_MARKER, tagged with the pid that ran it)."""

import os
from pathlib import Path

import torch

from faithbench.api import ExplainerSpec


def _run_payload(marker):
    Path(marker).write_text(str(os.getpid()))
    return torch.zeros(1)


class Payload(torch.Tensor):
    def __reduce_ex__(self, protocol):
        return _run_payload, (os.environ.get("FAITHBENCH_HOSTILE_MARKER", "/dev/null"),)


class SendsPayload:
    spec = ExplainerSpec(name="hostile_payload", version="1")

    def explain(self, model, batch, target, *, rng):
        return batch.mask.float().as_subclass(Payload)


EXPLAINER = SendsPayload()
