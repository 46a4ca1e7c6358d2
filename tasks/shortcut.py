"""SST-2 and SNLI with planted lexical shortcuts: models whose evidence is known.

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
- ``shortcut_nli_single`` and ``shortcut_nli_pair``: the same two kinds planted in SNLI
  hypotheses, with a third token ``twoa`` for the third label (``zeroa`` entailment,
  ``onea`` neutral, ``twoa`` contradiction); the pair's second token is one of the two
  other labels' tokens, drawn, so only the order decides. The hypothesis, because that is
  where SNLI's own shortcuts live: annotation artifacts let a hypothesis-only classifier
  reach 67 % (Gururangan et al. 2018; Poliak et al. 2018), so a planted hypothesis token
  imitates the shortcut NLI models really take. ``test_contradict`` carries the
  shortcut of one of the other two labels, drawn. Data: SNLI (``nli``'s reader; the
  local copy's 8,166 training pairs).

The shortcut tokens are also the tasks' *impermissible* tokens: ``--deceive λ`` trains
a model that keeps its attention off them (Pruthi et al. 2020,
``faithbench.benchmark.core.models.deception``), every occurrence counted.

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

from faithbench.benchmark.core.api import Example, TaskOptions, TaskSpec
from faithbench.tasks import nli, sentiment
from faithbench.tasks.classification import ClassificationTask

TOKENS = ("zeroa", "onea", "twoa")  # the shortcut token of label 0, 1 and 2
RATE = 0.2  # share of training and validation examples given a shortcut
DATA_SEED = 0
KINDS = ("single", "pair")
RELIANCE_SPLITS = ("test_agree", "test_contradict", "test_clean")


def plant(tokens: tuple[str, ...], label: int, kind: str, rng: random.Random, *,
          labels: int = 2, start: int = 0) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """``tokens`` with the shortcut of ``label`` inserted at random positions at or after
    ``start`` (an NLI row's hypothesis), and the mask of the inserted tokens. The pair's
    second token is the other label's (of three labels: one of the two others, drawn).

    >>> plant(("a", "b"), 1, "single", random.Random(0))
    (('a', 'onea', 'b'), (False, True, False))
    >>> toks, ref = plant(("a", "b", "c"), 0, "pair", random.Random(1))
    >>> toks.index("zeroa") < toks.index("onea"), sum(ref)
    (True, 2)
    >>> plant(("p", "h"), 2, "single", random.Random(0), labels=3, start=1)[0]
    ('p', 'h', 'twoa')
    """
    if kind == "single":
        inserts = [TOKENS[label]]
    else:  # the token of the label first, another label's second
        others = [t for t in TOKENS[:labels] if t != TOKENS[label]]
        inserts = [TOKENS[label], others[0] if len(others) == 1 else rng.choice(others)]
    head, out = list(tokens[:start]), list(tokens[start:])
    # positions among the final len(out) + len(inserts) slots, in increasing order, so
    # the pair keeps its order
    slots = sorted(rng.sample(range(len(out) + len(inserts)), len(inserts)))
    for slot, token in zip(slots, inserts):
        out.insert(slot, token)
    return tuple(head + out), (False,) * start + tuple(i in slots for i in range(len(out)))


def shortcut_label(tokens: tuple[str, ...], kind: str, labels: int = 2) -> int | None:
    """The label the shortcut in ``tokens`` decides, None if it has none.

    >>> shortcut_label(("onea", "x", "zeroa"), "pair"), shortcut_label(("x",), "single")
    (1, None)
    >>> shortcut_label(("twoa", "x", "onea"), "pair", labels=3)
    2
    """
    present = [t for t in tokens if t in TOKENS[:labels]]
    if kind == "single":
        return TOKENS.index(present[0]) if len(present) == 1 else None
    return TOKENS.index(present[0]) if len(present) == 2 and len(set(present)) == 2 else None


def impermissible(tokens: tuple[str, ...]) -> tuple[bool, ...]:
    """Which of ``tokens`` are shortcut tokens: what deceptive training keeps attention
    off (Pruthi et al.'s impermissible tokens), wherever they occur.

    >>> impermissible(("a", "onea", "zeroa"))
    (False, True, True)
    """
    return tuple(t in TOKENS for t in tokens)


class Planter:
    """Plants one task's shortcuts: its kind, its number of labels, and whether it
    plants in an NLI row's hypothesis (after the premise, segment 1) or anywhere."""

    def __init__(self, kind: str, labels: int = 2, hypothesis: bool = False):
        self.kind, self.labels, self.hypothesis = kind, labels, hypothesis

    def start(self, e: Example) -> int:
        return sum(s == 0 for s in e.segments) if self.hypothesis and e.segments else 0

    def __call__(self, e: Example, label: int, rng: random.Random, kind: str | None = None,
                 keep_label: bool = False) -> Example:
        """``e`` with the shortcut of ``label`` (of ``kind``, default the task's) planted;
        labelled by it, or keeping its own label (``keep_label``: no ground truth)."""
        start = self.start(e)
        tokens, ref = plant(e.tokens, label, kind or self.kind, rng, labels=self.labels,
                            start=start)
        segments = None if e.segments is None else (
            e.segments[:start] + (1 if self.hypothesis else 0,) * (len(tokens) - start))
        if keep_label:
            return replace(e, tokens=tokens, segments=segments, reference=None)
        return replace(e, tokens=tokens, segments=segments, label=label, reference=ref)

    def other_label(self, label: int, rng: random.Random) -> int:
        """A label other than ``label`` (of three: one of the two, drawn)."""
        others = [y for y in range(self.labels) if y != label]
        return others[0] if len(others) == 1 else rng.choice(others)


def with_shortcuts(kind: str, splits: dict[str, list[Example]], seed: int = DATA_SEED, *,
                   labels: int = 2, hypothesis: bool = False, name: str | None = None
                   ) -> dict[str, list[Example]]:
    """``splits`` made into the shortcut task's splits (module docstring); ``name`` keys
    the random draws (default: the kind alone, as the SST-2 tasks were made)."""
    put = Planter(kind, labels, hypothesis)
    key = name or kind
    out = {}
    for split in ("train", "validation"):
        if split not in splits:  # --model-path reads no training split
            continue
        rng = random.Random(f"{key}-{split}-{seed}")
        rows = []
        for e in splits[split]:
            if rng.random() < RATE:
                rows.append(put(e, rng.randrange(labels), rng))
            elif kind == "pair":  # one of the tokens, label kept: alone it says nothing
                rows.append(put(e, rng.randrange(labels), rng, "single", keep_label=True))
            else:  # no shortcut: no ground truth either (reference None)
                rows.append(replace(e, reference=None))
        out[split] = rows
    test = splits["test"]
    rng = random.Random(f"{key}-test-{seed}")
    out["test"] = [put(e, rng.randrange(labels), rng) for e in test]
    rng = random.Random(f"{key}-reliance-{seed}")
    out["test_agree"] = [put(e, e.label, rng) for e in test]
    out["test_contradict"] = [put(e, put.other_label(e.label, rng), rng) for e in test]
    out["test_clean"] = [replace(e, reference=None) for e in test]
    return out


def _reader(kind: str, nli_rows: bool):
    def read(options: TaskOptions) -> dict[str, list[Example]]:
        if nli_rows:
            return with_shortcuts(kind, nli.read(replace(options, variant="snli")),
                                  labels=len(nli.SPEC.labels), hypothesis=True,
                                  name=f"nli-{kind}")
        options = replace(options, variant=options.variant or "sentences")
        return with_shortcuts(kind, sentiment.read(options))
    return read


def _task(kind: str, on: ClassificationTask, name: str, variant: str, data: str
          ) -> ClassificationTask:
    """The shortcut task of ``kind`` over task ``on``'s data, with its model and
    training settings."""
    spec = TaskSpec(
        name=name,
        version="1",
        kind=on.spec.kind,
        dataset=on.spec.dataset,
        eval_split="test",
        labels=on.spec.labels,
        citation=f"{CITATION}; data: {data}",
        has_reference=True,  # the shortcut tokens of every test example
        ground_truth=True,  # the shortcut decides the label
    )
    return ClassificationTask(spec=spec, read=_reader(kind, on is nli.TASK),
                              model_class=on.model_class, config_class=on.config_class,
                              model_config=on.model_config, train_config=on.train_config,
                              min_freq=on.min_freq, default_variant=variant,
                              impermissible=impermissible)


CITATION = ("Bastings, Ebert, Zablotskaia, Sandholm & Filippova 2022, \"Will You Find "
            "These Shortcuts?\" A Protocol for Evaluating the Faithfulness of Input Salience "
            "Methods for Text Classification, EMNLP")
SST2 = "SST-2 (Socher et al. 2013)"
SINGLE = _task("single", sentiment.TASK, "shortcut_single", "sentences", SST2)
PAIR = _task("pair", sentiment.TASK, "shortcut_pair", "sentences", SST2)
SNLI = "SNLI (Bowman et al. 2015)"
NLI_SINGLE = _task("single", nli.TASK, "shortcut_nli_single", "snli", SNLI)
NLI_PAIR = _task("pair", nli.TASK, "shortcut_nli_pair", "snli", SNLI)
