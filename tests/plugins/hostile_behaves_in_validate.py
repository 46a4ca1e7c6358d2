"""Hostile plugin: behaves on the examples of its first call (all of ``validate``'s)
and returns unseeded noise for every other example, as a submitter gaming the
checks would."""

import os

import torch

from faithbench.api import ExplainerSpec


class Gamer:
    spec = ExplainerSpec(name="hostile_gamer", version="1")
    seen: set = set()  # noqa: RUF012 — state kept across calls, on purpose

    def explain(self, model, batch, target, *, rng):
        if not self.seen:
            self.seen.update(batch.example_ids)
        scores = batch.ids.float() / 100
        noise = torch.frombuffer(bytearray(os.urandom(4 * scores.numel())), dtype=torch.int32)
        known = torch.tensor([i in self.seen for i in batch.example_ids]).unsqueeze(1)
        return torch.where(known, scores, noise.view(scores.shape).float() / 2 ** 31)


EXPLAINER = Gamer()
