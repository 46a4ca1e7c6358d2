"""Sanity checks (Adebayo, Gilmer, Muelly, Goodfellow, Hardt & Kim 2018): does an
explanation change when the model it explains is destroyed? Family "sanity", never
ranked with faithfulness.

Metric card
-----------
Formula. For an example x with n real tokens, s = the explainer's scores of x on the
trained model f, s' = its scores of x on a destroyed model f', both for the same target
(the trained model's predicted class ŷ; the gold next word of an alignment row)::

    randomization_*(x) = Spearman ρ( |s_1| … |s_n| , |s'_1| … |s'_n| )

(the Pearson correlation of the ranks, ties averaged: scipy's ``spearmanr`` up to
rounding, and exactly 1 for the same ranking; ``absolute=False``: the signed scores).
The explainer runs with the run's explainer seed on both models. f' is a deep copy of
f with layer groups re-initialized from the initializer, as Adebayo et al. do, or a
model trained on permuted labels:

- ``randomization_cascading[depth=k]``: the first k layer groups from the output
  (``out``) down, ``depth=all`` every group, the input embeddings included (Adebayo's
  cascading randomization; its last stage, a wholly re-initialized network, is the
  default). ``depth=1``, ``depth=2``, ... asked together draw the curve, one column
  each: a group gets the same fresh weights at every depth.
- ``randomization_independent[layer=g]``: group g alone, every other group trained.
- ``randomization_data``: a model of the same configuration and seed trained on the
  task's training and validation splits with their labels permuted (``PermutedLabels``,
  seeded by the model seed: the label multiset kept), cached under the permutation's
  key. ``extra.retrained_correct`` counts the examples it classifies correctly (near
  chance when it learned nothing).

A model lists its groups output first (``layer_groups()``): the BiLSTM classifier
``out, attention, encoder, embedding``; NLI ``out, hidden, attention, encoder,
embedding``; alignment ``out, readout, attention, decoder, encoder, embedding``; a
Transformer ``out, pooler, layer_{L-1}, ..., layer_0, embedding``. Each group is
re-initialized by its modules' own ``reset_parameters()`` (BERT's initializer on a
Transformer) from a generator seeded by the model seed and the group's name
(``faithbench.benchmark.core.randomize``); the evaluated model is never modified.
``extra.prediction_changed`` counts the examples whose argmax the destroyed model
changes.

Direction. Lower is better: an explanation that depends on what the model learned
changes when it is destroyed. ρ = 1 = the explanation is the same ranking whatever
the model (an explainer that ignores the model, e.g. scores that are a fixed function
of position, or ``random`` with the same seed). This is a necessary condition, not
faithfulness: noise also scores low.

Range. [−1, 1]. Undefined (NaN, left out of n and the mean, counted) where n < 2 or
both score vectors are constant. Where only one is (e.g. LIME's sparse fit selects no
token on a destroyed model), the ranking is gone: ρ = 0 by convention, and
``extra.one_side_constant`` counts those examples (leaving them out would drop exactly
the explanations that randomization erased). The mean and its CI are the run's usual
per-example percentile bootstrap (no new interval).

Where we differ from Adebayo et al. (their code: github.com/adebayoj/sanity_checks_saliency).
(a) Target: we explain the trained model's predicted class on both models (the
session's targets); their released scripts take the argmax of the randomized model.
(b) Similarity: their code computes Spearman ρ of every map both after absolute-value
normalization ("ABS", their grayscale maps, plotted first) and signed ("No ABS"), and
the paper adds SSIM and HOG similarity, which need images; we keep ρ, ABS by default.
(c) Units: the explainer's own tokens (pieces on a subword model), no normalization (ρ
is invariant to it). (d) Data randomization:
they train until the network fits the permuted labels; we train with the task's
configuration, early stopping on the permuted validation split, so the model may stop
before it memorizes. (e) Groups are the model's blocks (a BiLSTM is one group, BERT a
layer per group), re-initialized whole.

Citation. Adebayo, Gilmer, Muelly, Goodfellow, Hardt & Kim (2018), "Sanity Checks for
Saliency Maps", NeurIPS.

Hand-worked case. s = (0.9, −0.1, 0.5), s' = (0.2, 0.8, −0.4). ABS: ranks (3, 1, 2) and
(1, 3, 2), Σd² = 8, ρ = 1 − 6·8/(3·8) = −1. Signed: ranks (3, 1, 2) and (2, 3, 1),
Σd² = 6, ρ = 1 − 36/24 = −0.5.

>>> round(similarity([0.9, -0.1, 0.5], [0.2, 0.8, -0.4], absolute=True), 12)
-1.0
>>> round(similarity([0.9, -0.1, 0.5], [0.2, 0.8, -0.4], absolute=False), 12)
-0.5
>>> similarity([1.0, 1.0], [0.0, 2.0], absolute=True)  # one side constant: ranking lost
0.0
>>> similarity([1.0, 1.0], [3.0, 3.0], absolute=True)  # neither side ranks: undefined
nan
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

import numpy as np
import torch

from faithbench.benchmark.core import randomize
from faithbench.benchmark.core.api import (
    ALIGNMENT,
    CLASSIFICATION,
    PAIR_CLASSIFICATION,
    Example,
    MetricOutput,
    MetricSpec,
    PreparedTask,
    TrainingInput,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.params import Param

CITATION = ("Adebayo, Gilmer, Muelly, Goodfellow, Hardt & Kim (2018). Sanity Checks for "
            "Saliency Maps. NeurIPS.")
ALL = "all"


@dataclasses.dataclass(frozen=True)
class DepthParam(Param):
    """``depth``: ``all`` or an int >= 1 (how many groups, from the output)."""

    def _one(self, value) -> bool:
        return value == ALL or (type(value) is int and value >= 1)


DEPTH = DepthParam(int, low=1, text="all | int >= 1 (layer groups re-initialized, from the "
                                    "output down)")


def similarity(a: Sequence[float], b: Sequence[float], *, absolute: bool) -> float:
    """Spearman ρ of two score vectors (of their absolute values if ``absolute``);
    NaN where fewer than 2 tokens or both sides are constant, 0 where one side is."""
    from scipy.stats import rankdata

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if absolute:
        x, y = np.abs(x), np.abs(y)
    flat = int(len(x) < 2 or np.ptp(x) == 0) + int(len(y) < 2 or np.ptp(y) == 0)
    if len(x) < 2 or flat == 2:
        return float("nan")
    if flat == 1:
        return 0.0
    rx, ry = rankdata(x) - (len(x) + 1) / 2, rankdata(y) - (len(y) + 1) / 2  # centred ranks
    # ranks are multiples of 1/2, so each sum is exact: the same ranking gives exactly 1
    return float(np.sum(rx * ry) / np.sqrt(np.sum(rx * rx) * np.sum(ry * ry)))


def _output(before: Sequence[Sequence[float]], after: Sequence[Sequence[float]],
            absolute: bool, **flags: torch.Tensor) -> MetricOutput:
    """Per-example ρ, with ``one_side_constant`` among the flags."""
    if len(before) != len(after) or any(len(a) != len(b) for a, b in zip(before, after)):
        raise ValueError("the two explanations do not cover the same tokens")
    ranks = [len(set(np.abs(s) if absolute else s)) > 1 for pair in zip(before, after)
             for s in pair]
    one = torch.tensor([a != b for a, b in zip(ranks[::2], ranks[1::2])], dtype=torch.bool)
    values = [similarity(a, b, absolute=absolute) for a, b in zip(before, after)]
    return MetricOutput(torch.tensor(values, dtype=torch.float64),
                        flags={**flags, "one_side_constant": one})


@torch.no_grad()
def _argmax(model, prepared: PreparedTask, examples: Sequence[Example]) -> torch.Tensor:
    """(E,) argmax of ``model``'s logits (eval mode) on ``prepared``'s batches."""
    model.eval()
    size = min(256, getattr(model, "max_rows_per_pass", 256))
    out = [model.logits(b).argmax(-1) for b, _, _ in prepared.batches(examples, size)]
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.long)


def stages(model, depth) -> list[str]:
    """The groups ``depth`` re-initializes: the first ``depth`` from the output."""
    names = [n for n, _ in randomize.layer_groups(model)]
    if depth == ALL:
        return names
    if depth > len(names):
        raise InputError(f"randomization_cascading: depth={depth}, but model "
                         f"{type(model).__name__} has {len(names)} layer groups "
                         f"({', '.join(names)}); depth=all re-initializes every one")
    return names[:depth]


@dataclasses.dataclass(frozen=True)
class ParameterRandomization:
    """Cascading (``depth``) or independent (``layer``) re-initialization."""

    spec: MetricSpec

    def groups(self, model) -> list[str]:
        params = dict(self.spec.params)
        if "layer" in params:
            return [n for n, _ in randomize.pick(model, [params["layer"]])]
        return stages(model, params["depth"])

    def evaluate(self, inp: TrainingInput) -> MetricOutput:
        session, absolute = inp.session, bool(self.spec.param("absolute"))
        model = session.prepared.model
        twin = randomize.randomized(model, self.groups(model), seed=inp.options.seed)
        after = session.explain_on(inp.explainer, twin)
        examples = session.examples
        changed = (_argmax(twin, session.prepared, examples)
                   != _argmax(model, session.prepared, examples))
        return _output(inp.scores, after, absolute, prediction_changed=changed)


@dataclasses.dataclass(frozen=True)
class PermutedLabels:
    """The labels of ``splits`` permuted among their examples (a seeded shuffle per
    split: the label multiset and every token kept); other splits as they are."""

    seed: int
    splits: tuple[str, ...] = ("train", "validation")

    @property
    def key(self) -> str:
        return content_hash({"transform": "permuted_labels", "seed": self.seed,
                             "splits": list(self.splits)})

    def apply(self, split: str, examples: list[Example]) -> list[Example]:
        if split not in self.splits:
            return list(examples)
        labels = [e.label for e in examples]
        random.Random(content_hash({"seed": self.seed, "split": split})).shuffle(labels)
        return [dataclasses.replace(e, label=y) for e, y in zip(examples, labels)]


@dataclasses.dataclass(frozen=True)
class DataRandomization:
    """The explainer on a model trained on permuted labels."""

    spec: MetricSpec

    def evaluate(self, inp: TrainingInput) -> MetricOutput:
        session, seed = inp.session, inp.options.seed
        splits = (getattr(inp.task, "train_split", "train"),
                  getattr(inp.task, "val_split", "validation"))
        retrained = inp.retrain(PermutedLabels(seed, splits), seed)
        after = session.explain_on(inp.explainer, prepared=retrained)
        examples = session.examples
        labels = torch.tensor([e.label for e in examples], dtype=torch.long)
        predicted = _argmax(retrained.model, retrained, examples)
        changed = predicted != _argmax(session.prepared.model, session.prepared, examples)
        return _output(inp.scores, after, bool(self.spec.param("absolute")),
                       retrained_correct=predicted == labels, prediction_changed=changed)


EVERY_KIND = frozenset({CLASSIFICATION, PAIR_CLASSIFICATION, ALIGNMENT})
RANDOMIZATION_CASCADING = ParameterRandomization(MetricSpec(
    name="randomization_cascading", version="1", direction="lower", kinds=EVERY_KIND,
    params=(("depth", ALL), ("absolute", True)), family="sanity", citation=CITATION,
    needs_explainer=True))
RANDOMIZATION_INDEPENDENT = ParameterRandomization(MetricSpec(
    name="randomization_independent", version="1", direction="lower", kinds=EVERY_KIND,
    params=(("layer", "out"), ("absolute", True)), family="sanity", citation=CITATION,
    needs_explainer=True))
RANDOMIZATION_DATA = DataRandomization(MetricSpec(
    name="randomization_data", version="1", direction="lower",
    kinds=frozenset({CLASSIFICATION, PAIR_CLASSIFICATION}), params=(("absolute", True),),
    family="sanity", citation=CITATION, needs_training=True))
