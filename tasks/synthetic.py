"""A generated sentiment-like task with planted rationales, needing no download.

Each sentence mixes neutral filler and distractor words (equally frequent in
both classes, so carrying no label information) with 1-3 planted polar words of
the label's polarity. The label is a function of the planted words alone, so
they are the rationale by construction, and a model that learns the task must
rely on them. Everything is deterministic from ``seed``.
"""

from __future__ import annotations

import random

from faithbench.benchmark.core.api import CLASSIFICATION, Example, TaskOptions, TaskSpec
from faithbench.benchmark.core.models.training import TrainConfig
from faithbench.tasks.classification import ClassificationTask

POSITIVE = ("good", "great", "superb", "lovely", "brilliant", "moving", "witty", "charming",
            "gripping", "fresh", "delightful", "stunning")
NEGATIVE = ("bad", "awful", "dull", "boring", "clumsy", "tedious", "bland", "messy",
            "lifeless", "stale", "annoying", "weak")
# distractors: frequent, sentiment-sounding to a human, but independent of the label
DISTRACTORS = ("really", "very", "quite", "not", "so", "too", "just", "ever")
FILLER = tuple(f"w{i:02d}" for i in range(60)) + (
    "the", "a", "film", "movie", "plot", "story", "cast", "director", "scene", "it", "is", "was",
    "and", "of", "with", "this", "that", "its", "an", "at")

SIZES = {"train": 3000, "validation": 500, "test": 500}

SPEC = TaskSpec(
    name="synthetic",
    version="1",
    kind=CLASSIFICATION,
    dataset="generated",
    eval_split="test",
    labels=("negative", "positive"),
    citation="faithbench synthetic task with planted rationales",
    has_reference=True,
    params=(("seed", 0),),
    ground_truth=True,  # the planted words decide the label
)


def polar(tokens: tuple[str, ...]) -> tuple[bool, ...]:
    """Which tokens are planted polar words: the task's impermissible tokens, which a
    deceptive model (``--deceive``) learns to keep its attention off while it still
    reads them (the offline stand-in of the shortcut tasks' deception experiment).

    >>> polar(("the", "good", "w01", "dull"))
    (False, True, False, True)
    """
    return tuple(t in POSITIVE or t in NEGATIVE for t in tokens)


def generate(split: str, n: int, seed: int) -> list[Example]:
    """``n`` examples of one split; the same (split, seed) always gives the same list."""
    rng = random.Random(f"{seed}-{split}")
    out = []
    for i in range(n):
        label = rng.randrange(2)
        length = rng.randint(8, 20)
        tokens = [rng.choice(FILLER) for _ in range(length)]
        for _ in range(rng.randint(1, 3)):
            tokens[rng.randrange(length)] = rng.choice(DISTRACTORS)
        polar = POSITIVE if label == 1 else NEGATIVE
        planted = rng.sample(range(length), rng.randint(1, 3))
        for pos in planted:
            tokens[pos] = rng.choice(polar)
        reference = tuple(t in polar for t in tokens)
        out.append(Example(f"{split}-{i}", tuple(tokens), label, reference))
    return out


def read(options: TaskOptions) -> dict[str, list[Example]]:
    data_seed = dict(SPEC.params)["seed"]  # the data is fixed; options.seed seeds the model
    return {split: generate(split, n, data_seed) for split, n in SIZES.items()}


TASK = ClassificationTask(
    spec=SPEC,
    read=read,
    model_config={"embed_dim": 32, "hidden": 32, "attn_dim": 32, "dropout": 0.1},
    train_config=TrainConfig(epochs=6, patience=2, lr=3e-3, batch_size=32, word_dropout=0.05),
    impermissible=polar,
)
