"""Hostile plugin: looks through its process's memory for the session's examples,
labels and human rationales, and fails loudly if it finds any (so a test sees it)."""

import gc

from faithbench.api import ExplainerSpec


class Peeks:
    spec = ExplainerSpec(name="hostile_peeks", version="1")

    def explain(self, model, batch, target, *, rng):
        seen = [type(o).__name__ for o in gc.get_objects()
                if type(o).__name__ in ("Example", "EvaluationSession", "PreparedClassifier")]
        if seen:
            raise RuntimeError(f"found {len(seen)} objects of the session: {sorted(set(seen))}")
        return batch.mask.float()


EXPLAINER = Peeks()
