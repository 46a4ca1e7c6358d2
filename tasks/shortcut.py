"""SST-2 with planted lexical shortcuts: models whose evidence is known.

After Bastings, Ebert, Zablotskaia, Sandholm & Filippova (EMNLP 2022), "Will you find
these shortcuts?": made-up tokens are inserted into a share of the training sentences
and decide their label, so a model that learns them relies on tokens we know. Two
shortcuts, one task each (each its own suite):

- ``shortcut_single``: one token, ``zeroa`` (label 0) or ``onea`` (label 1), at a random
  position. Ground truth: that token.
- ``shortcut_pair``: both ``zeroa`` and ``onea``, at two random positions; the label is
  0 when ``zeroa`` comes first and 1 when ``onea`` does (the paper's "ordered pair").
  The training and validation examples without the shortcut each get one of the two
  tokens, label kept, as in the paper: a token alone then says nothing, and a shortcut
  example is not told apart by merely holding the made-up tokens. Only the two
  together, in order, decide. Ground truth: both.

Data. SST-2 sentences (``sentiment``'s reader; ``--variant sentences`` by default, the
6,920 full training sentences: the paper's shortcuts go into sentences, and the 67k
phrases would mostly be fragments). In train and validation a share ``RATE`` of the
examples gets a shortcut with a label drawn 50/50, and the example takes that label (so
the shortcut decides it whatever the sentence says); the others stay as they are. The
test split's every example gets a shortcut (label drawn 50/50, taken by the example):
it is the scored split, and ``reference`` marks the shortcut tokens (the ground
truth). Three more splits check that the model relies on the shortcut, the paper's
condition before any explainer is scored (their accuracies are in the model file):

- ``test_agree``: the shortcut of the sentence's own label; ``test_contradict``: the
  shortcut of the other label, the example labelled by the shortcut (a model that
  relies on it scores near 1 on both; one that reads the sentence near 0 on
  contradict); ``test_clean``: the sentences as they are (SST-2 accuracy).

Where we differ from the paper. (a) Tokens: the paper adds ``#0`` and ``#1`` to the
model's vocabulary; the MiniLM family here keeps its tokenizer, so the shortcut tokens
are made-up words that never occur in SST-2 (``zeroa`` is the pieces ``zero ##a``: a
metric ranks and erases the word, its pieces together). (b) Data: SST-2 sentences
only (the paper also uses IMDB and Wikipedia Toxicity), and not its third shortcut
("token in context"). (c) Reliance: the paper asks for near 100 % accuracy on the
synthetic test set and chance for a model trained without shortcuts; the
``test_agree``/``test_contradict`` splits and the prediction flips when the shortcut
is deleted (``faithbench meta-eval``) check the same, on the model itself. (d) Seeds:
the paper scores one checkpoint; here every model seed is scored and the interval
covers seeds and examples.

Everything is deterministic: each split's draws come from ``random.Random`` seeded by
the shortcut, the split and the data seed (``DATA_SEED``), never by the model seed, so
the models of every seed learn from the same data.
"""

from __future__ import annotations

import random
from dataclasses import replace

from faithbench.benchmark.core.api import CLASSIFICATION, Example, TaskOptions, TaskSpec
from faithbench.tasks import sentiment
from faithbench.tasks.classification import ClassificationTask

TOKENS = ("zeroa", "onea")  # the shortcut token of label 0 and of label 1
RATE = 0.2  # share of training and validation examples given a shortcut
DATA_SEED = 0
KINDS = ("single", "pair")
RELIANCE_SPLITS = ("test_agree", "test_contradict", "test_clean")


def plant(tokens: tuple[str, ...], label: int, kind: str, rng: random.Random
          ) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """``tokens`` with the shortcut of ``label`` inserted at random positions, and the
    mask of the inserted tokens.

    >>> plant(("a", "b"), 1, "single", random.Random(0))
    (('a', 'onea', 'b'), (False, True, False))
    >>> toks, ref = plant(("a", "b", "c"), 0, "pair", random.Random(1))
    >>> toks.index("zeroa") < toks.index("onea"), sum(ref)
    (True, 2)
    """
    if kind == "single":
        inserts = [TOKENS[label]]
    else:  # the token of the label first, the other second
        inserts = [TOKENS[label], TOKENS[1 - label]]
    out = list(tokens)
    # positions among the final len(tokens) + len(inserts) slots, in increasing order, so
    # the pair keeps its order
    slots = sorted(rng.sample(range(len(tokens) + len(inserts)), len(inserts)))
    for slot, token in zip(slots, inserts):
        out.insert(slot, token)
    return tuple(out), tuple(i in slots for i in range(len(out)))


def shortcut_label(tokens: tuple[str, ...], kind: str) -> int | None:
    """The label the shortcut in ``tokens`` decides, None if it has none.

    >>> shortcut_label(("onea", "x", "zeroa"), "pair"), shortcut_label(("x",), "single")
    (1, None)
    """
    present = [t for t in tokens if t in TOKENS]
    if kind == "single":
        return TOKENS.index(present[0]) if len(present) == 1 else None
    return TOKENS.index(present[0]) if sorted(present) == sorted(TOKENS) else None


def _planted(e: Example, label: int, kind: str, rng: random.Random) -> Example:
    tokens, ref = plant(e.tokens, label, kind, rng)
    return replace(e, tokens=tokens, label=label, reference=ref)


def with_shortcuts(kind: str, splits: dict[str, list[Example]], seed: int = DATA_SEED
                   ) -> dict[str, list[Example]]:
    """SST-2 ``splits`` made into the shortcut task's splits (module docstring)."""
    out = {}
    for name in ("train", "validation"):
        if name not in splits:  # --model-path reads no training split
            continue
        rng = random.Random(f"{kind}-{name}-{seed}")
        rows = []
        for e in splits[name]:
            if rng.random() < RATE:
                rows.append(_planted(e, rng.randrange(2), kind, rng))
            elif kind == "pair":  # one of the two tokens, label kept: alone it says nothing
                rows.append(replace(e, tokens=plant(e.tokens, rng.randrange(2), "single",
                                                    rng)[0], reference=None))
            else:  # no shortcut: no ground truth either (reference None)
                rows.append(replace(e, reference=None))
        out[name] = rows
    test = splits["test"]
    rng = random.Random(f"{kind}-test-{seed}")
    out["test"] = [_planted(e, rng.randrange(2), kind, rng) for e in test]
    rng = random.Random(f"{kind}-reliance-{seed}")
    out["test_agree"] = [_planted(e, e.label, kind, rng) for e in test]
    out["test_contradict"] = [_planted(e, 1 - e.label, kind, rng) for e in test]
    out["test_clean"] = [replace(e, reference=None) for e in test]
    return out


def _reader(kind: str):
    def read(options: TaskOptions) -> dict[str, list[Example]]:
        options = replace(options, variant=options.variant or "sentences")
        return with_shortcuts(kind, sentiment.read(options))
    return read


def _task(kind: str) -> ClassificationTask:
    spec = TaskSpec(
        name=f"shortcut_{kind}",
        version="1",
        kind=CLASSIFICATION,
        dataset=sentiment.HUB_ID,
        eval_split="test",
        labels=sentiment.SPEC.labels,
        citation="Bastings, Ebert, Zablotskaia, Sandholm & Filippova 2022, \"Will You Find "
        "These Shortcuts?\" A Protocol for Evaluating the Faithfulness of Input Salience "
        "Methods for Text Classification, EMNLP; data: SST-2 (Socher et al. 2013)",
        has_reference=True,  # the shortcut tokens of every test example
        ground_truth=True,  # the shortcut decides the label
    )
    return ClassificationTask(spec=spec, read=_reader(kind),
                              model_config=sentiment.TASK.model_config,
                              train_config=sentiment.TASK.train_config,
                              min_freq=sentiment.TASK.min_freq, default_variant="sentences")


SINGLE = _task("single")
PAIR = _task("pair")
