"""ROAR, RemOve And Retrain (Hooker et al. 2019): mask each example's top-k% tokens by
the explainer (on every split, with the original model's explanations), train a fresh
model on the masked training split (same configuration, early stopping on the masked
validation split), and score its correctness on the masked evaluation examples. An
explainer that found the evidence leaves less of it: lower accuracy is more faithful.
``mask=random`` masks k% at random instead, the baseline every curve is read against.

One record per (explainer, ratio, model seed); its mean is the retrained model's
accuracy. The retrained model is cached under the transform's content key, so the
random baseline (whose key does not name the explainer) trains once per ratio and
seed, whichever explainer asks.
"""

from __future__ import annotations

import dataclasses

import torch

from faithbench.benchmark.core.api import (
    CLASSIFICATION,
    PAIR_CLASSIFICATION,
    MetricOutput,
    MetricSpec,
    TrainingInput,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.retrain import point
from faithbench.metrics.masking import RandomMask, TopKMask

CITATION = ("Hooker, Erhan, Kindermans & Kim (2019). A benchmark for interpretability "
            "methods in deep neural networks. NeurIPS.")
MASKS = ("explainer", "random")


@dataclasses.dataclass(frozen=True)
class Roar:
    spec: MetricSpec

    def evaluate(self, inp: TrainingInput) -> MetricOutput:
        params = dict(self.spec.params)
        ratio, mask = float(params["ratio"]), params["mask"]
        if mask not in MASKS:
            raise InputError(f"roar: mask must be one of {', '.join(MASKS)}, got {mask!r}")
        session = inp.session
        if mask == "random":
            transform = RandomMask(ratio, seed=inp.options.seed)
        else:
            scores = {}  # every split, whole: the session's explanation cache serves repeats
            for split in session.prepared.splits:
                whole = session.on_split(split)
                scores.update(zip((e.id for e in whole.examples),
                                  whole.explain(inp.explainer).scores))
            transform = TopKMask(scores, ratio, inp.explainer.spec.id)
        # trained on the executor, its file shipped back and loaded here: trained once
        retrained = inp.retrain(transform, inp.options.seed)
        _, _, correct = point(retrained, session.split, session.examples)
        return MetricOutput(torch.as_tensor(correct, dtype=torch.float64))


ROAR = Roar(MetricSpec(name="roar", version="1", direction="lower",
                       kinds=frozenset({CLASSIFICATION, PAIR_CLASSIFICATION}),
                       params=(("ratio", 0.5), ("mask", "explainer")), family="faithfulness",
                       citation=CITATION, needs_training=True))
