"""SST-2 binary sentiment, sentence level (Socher et al. 2013; GLUE).

Data: hub ``stanfordnlp/sst2`` by default, or ``DIR/sst2/{train,validation,test}.jsonl``
with the same columns (``idx``, ``sentence``, ``label``); a local line whose sentence
has no token is an error naming file and line (the hub copy's are left out, counted),
and so is an ``idx`` a file already had (it names the example: ``test-<idx>``), a
control, bidi or zero-width character, and a sentence of more than ``MAX_TOKENS``
tokens (SST-2's longest has 56).
The training split is an option (``variant``): ``phrases`` (default) trains on every
labelled phrase of the training trees — ``DIR/sst2_phrases/train.jsonl`` locally,
the hub's own train split (67k phrases) otherwise — and ``sentences`` on the 6,920
full training sentences (local copy only; the hub has no sentence-level train split).
Scored split: test (validation drives early stopping, so it is not held out). The
hub's test labels are hidden: the metrics need none (they explain the prediction),
but test accuracy is then not reported. Tokens are the lower-cased,
whitespace-split PTB tokens of the treebank.

Human rationales: when the data directory also has ``sst_phrase_annotations/``, the
validation and test examples get ``reference`` = the minimal phrases polar in the
sentence label's direction (``faithbench.tasks.rationales.sst_phrase_rationale``; all-False
when there is none, and the runner skips those for plausibility). The hub copy has
no phrase labels: its references stay None and plausibility metrics are skipped.
"""

from __future__ import annotations

from faithbench.benchmark.core.api import CLASSIFICATION, Example, TaskOptions, TaskSpec
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.models.training import TrainConfig
from faithbench.tasks.classification import ClassificationTask
from faithbench.tasks.data import (
    load_hub,
    load_local,
    require_files,
    resolve_data_dir,
    without_empty,
)
from faithbench.tasks.rationales import load_sst_rationales

HUB_ID = "stanfordnlp/sst2"
COLUMNS = {"idx": int, "sentence": str, "label": int}
VARIANTS = ("phrases", "sentences")
MAX_TOKENS = 256  # per sentence: the length cap (docs/reference/tasks.md)

SPEC = TaskSpec(
    name="sentiment",
    version="1",
    kind=CLASSIFICATION,
    dataset=HUB_ID,
    eval_split="test",  # validation drives early stopping: it is the model-selection split
    labels=("negative", "positive"),
    citation="Socher et al. 2013, Recursive Deep Models for Semantic Compositionality "
    "Over a Sentiment Treebank, EMNLP",
    has_reference=True,  # local copies with sst_phrase_annotations/ (validation, test)
)
ANNOTATIONS = "sst_phrase_annotations"
ANNOTATED_SPLITS = ("validation", "test")


def tokenize(sentence: str) -> tuple[str, ...]:
    return tuple(sentence.lower().split())


def read(options: TaskOptions) -> dict[str, list[Example]]:
    variant = options.variant or "phrases"
    if variant not in VARIANTS:
        raise InputError(f"sentiment: unknown training split {variant!r}; choose {' or '.join(VARIANTS)}")
    data_dir = resolve_data_dir(options.data_dir)
    train = options.reads_training_split
    if data_dir is None:
        if variant == "sentences" and train:
            raise InputError("sentiment: the hub copy has no sentence-level train split; "
                             "use --data-dir with a local sst2/ folder or the phrases variant")
        raw = load_hub(HUB_ID, ["validation", "test"] + (["train"] if train else []))
    else:
        wanted = {"sst2": ["validation", "test"] + (["train"] if variant == "sentences" and train
                                                    else [])}
        if variant == "phrases" and train:
            wanted["sst2_phrases"] = ["train"]
        require_files(data_dir, wanted, "sentiment", COLUMNS)
        checks = {"texts": ("sentence",), "unique": "idx", "max_tokens": MAX_TOKENS}
        raw = load_local(data_dir / "sst2", ["validation", "test"]
                         + (["train"] if variant == "sentences" and train else []), COLUMNS,
                         {0, 1}, **checks)
        if variant == "phrases" and train:
            raw["train"] = load_local(data_dir / "sst2_phrases", ["train"], COLUMNS, {0, 1},
                                      **checks)["train"]
    splits = {}
    for split, rows in raw.items():
        rows = [r for r in rows if r["label"] >= 0 or split != "train"]
        if data_dir is None:  # a local file with an empty sentence was refused above
            rows = [r for _, r in without_empty(list(enumerate(rows)), ("sentence",),
                                                f"{HUB_ID} {split}")]
        tokens = [tokenize(r["sentence"]) for r in rows]
        references = {}  # idx -> mask; validation/test of a local copy with phrase labels
        if data_dir is not None and split in ANNOTATED_SPLITS and (data_dir / ANNOTATIONS).is_dir():
            references = load_sst_rationales(
                data_dir, split, {r["idx"]: t for r, t in zip(rows, tokens)})
        splits[split] = [Example(f"{split}-{r['idx']}", t, r["label"], references.get(r["idx"]))
                         for r, t in zip(rows, tokens)]
    return splits


TASK = ClassificationTask(
    spec=SPEC,
    read=read,
    model_config={"embed_dim": 128, "hidden": 128, "attn_dim": 128, "dropout": 0.4},
    train_config=TrainConfig(epochs=8, patience=2, lr=1e-3, batch_size=64, word_dropout=0.05),
    min_freq=1,
    default_variant="phrases",
)
