"""SST-2 binary sentiment, sentence level (Socher et al. 2013; GLUE).

Data: hub ``stanfordnlp/sst2`` by default, or ``DIR/sst2/{train,validation,test}.jsonl``
with the same columns (``idx``, ``sentence``, ``label``). The training split is an
option (``variant``): ``phrases`` (default) trains on every labelled phrase of the
training trees — ``DIR/sst2_phrases/train.jsonl`` locally, the hub's own train
split (67k phrases) otherwise — and ``sentences`` on the 6,920 full training
sentences (local copy only; the hub has no sentence-level train split).
Scored split: validation (the hub's test labels are hidden). Tokens are the
lower-cased, whitespace-split PTB tokens of the treebank.
"""

from __future__ import annotations

from benchmark.core.api import CLASSIFICATION, TaskSpec
from benchmark.core.errors import InputError
from benchmark.core.models.training import TrainConfig
from tasks.classification import ClassificationTask, Example, TaskOptions
from tasks.data import load_hub, load_local, resolve_data_dir

HUB_ID = "stanfordnlp/sst2"
COLUMNS = {"idx": int, "sentence": str, "label": int}
VARIANTS = ("phrases", "sentences")

SPEC = TaskSpec(
    name="sentiment",
    version="1",
    kind=CLASSIFICATION,
    dataset=HUB_ID,
    eval_split="validation",
    labels=("negative", "positive"),
    citation="Socher et al. 2013, Recursive Deep Models for Semantic Compositionality "
    "Over a Sentiment Treebank, EMNLP",
)


def tokenize(sentence: str) -> tuple[str, ...]:
    return tuple(sentence.lower().split())


def read(options: TaskOptions) -> dict[str, list[Example]]:
    variant = options.variant or "phrases"
    if variant not in VARIANTS:
        raise InputError(f"sentiment: unknown training split {variant!r}; choose {' or '.join(VARIANTS)}")
    data_dir = resolve_data_dir(options.data_dir)
    if data_dir is None:
        if variant == "sentences":
            raise InputError("sentiment: the hub copy has no sentence-level train split; "
                             "use --data-dir with a local sst2/ folder or the phrases variant")
        raw = load_hub(HUB_ID, ["train", "validation", "test"])
    else:
        raw = load_local(data_dir / "sst2", ["validation", "test"]
                         + (["train"] if variant == "sentences" else []), COLUMNS, {0, 1})
        if variant == "phrases":
            raw["train"] = load_local(data_dir / "sst2_phrases", ["train"], COLUMNS, {0, 1})["train"]
    splits = {}
    for split, rows in raw.items():
        splits[split] = [Example(f"{split}-{r['idx']}", tokenize(r["sentence"]), r["label"])
                         for r in rows if r["label"] >= 0 or split != "train"]
    return splits


TASK = ClassificationTask(
    spec=SPEC,
    read=read,
    model_config={"embed_dim": 128, "hidden": 128, "attn_dim": 128, "dropout": 0.4},
    train_config=TrainConfig(epochs=8, patience=2, lr=1e-3, batch_size=64),
    min_freq=1,
)
