"""What every classification task shares: examples, vocabulary, a cached trained
model, and batches. A task module supplies only its spec and how to read its data.

Trained models are cached under ``cache_dir()/models`` keyed by a hash of what
training reads, the fingerprint of the training and validation splits, with model
config, training config and seed (``cache_key``); a second run loads the file, also
when it evaluates another test file (the accuracy of a split whose data changed is
measured again and saved in the file). A ``--model-path`` checkpoint is never trained:
its key (of the accuracy kept beside it) hashes every split it is evaluated on.
Records and leaderboard suites name a model by ``checkpoint``, the hash of its
weights: two results pair only when they came from the same weights,
whichever run or machine trained them. The seed is set before the model is built,
so it decides the initial weights as well as the order of the training batches.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import torch

from faithbench.benchmark.core.api import PAIR_CLASSIFICATION, Batch, Example, TaskOptions, TaskSpec
from faithbench.benchmark.core.cache import model_path, sealed, verified_weights, weights_hash
from faithbench.benchmark.core.device import Placement, place
from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.benchmark.core.files import atomic_write, content_hash
from faithbench.benchmark.core.gate import Budget, ModelCheck, ModelReport, accuracy_check
from faithbench.benchmark.core.models.classifier import AttentionClassifier, ClassifierConfig
from faithbench.benchmark.core.models.lifecycle import PreparedModel, from_release, load_or_train
from faithbench.benchmark.core.models.training import (
    TrainConfig,
    accuracy,
    epoch_stream,
    seed_everything,
    train,
)
from faithbench.benchmark.core.vocab import Vocabulary, collate
from faithbench.tasks import transformer
from faithbench.tasks.data import read_once

log = logging.getLogger(__name__)
MASKED_SHARE = 0.5  # --masked-training: the share of each batch masked (Madsen et al.)


@dataclass(kw_only=True)
class ReadyTask(PreparedModel):
    """A task with data loaded and its model trained (or loaded from the cache): the
    ``faithbench.api.PreparedTask`` of every classification task."""

    splits: dict[str, list[Example]]
    vocab: Any  # Vocabulary, or transformer.Pieces for a subword model
    # a deceptive model's (``--deceive``): words -> which are impermissible, marked on
    # its training batches (``training_batches``); None for every other model
    impermissible: Callable[[tuple[str, ...]], tuple[bool, ...]] | None = None
    _by_id: dict | None = field(default=None, repr=False, compare=False)  # see task_words

    @property
    def n_outputs(self) -> int:
        return len(self.spec.labels)

    def examples(self, split: str, limit: int | None = None) -> list[Example]:
        if split not in self.splits:
            raise InputError(f"task {self.spec.name!r} has no split {split!r} "
                             f"(has: {', '.join(self.splits)})")
        rows = self.splits[split]
        return rows[:limit] if limit else rows

    def group_of(self, example: Example) -> str:
        """Each example is its own unit of a corpus-level statistic."""
        return example.id

    def targets(self, examples: Sequence[Example], base_probs: torch.Tensor) -> torch.Tensor:
        """A classifier explains its predicted class (ERASER's convention)."""
        return base_probs.argmax(dim=-1)

    def examples_from_rows(self, path, rows: list[dict]) -> list[Example]:
        """``{"id", "tokens"}`` rows (and ``segments`` for a pair task) as examples with
        no gold label (-1). On a subword model the pieces are grouped into words as
        ``run`` groups them: by the row's ``words`` field, else by the task's own example
        of that id and those pieces (``task_words``), else not at all (words None; scoring
        then refuses the row unless every metric ranks pieces)."""
        pairs = self.spec.kind == PAIR_CLASSIFICATION
        out = []
        for line, row in enumerate(rows, start=1):
            for name in ("id", "tokens"):
                if name not in row:
                    raise DataFileError(path, line, name, "missing field")
            tokens = row["tokens"]
            if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
                raise DataFileError(path, line, "tokens", "expected a list of strings")
            segments, words = _segments(path, line, row) if pairs else None, None
            if isinstance(self.vocab, transformer.Pieces):  # the model's pieces, grouped
                self.vocab.check(path, line, tokens)
                words = _words(path, line, row) or self.task_words(str(row["id"]),
                                                                   tuple(tokens), segments)
            out.append(Example(str(row["id"]), tuple(tokens), -1, segments=segments,
                               words=words))
        return out

    def task_words(self, example_id: str, tokens: tuple[str, ...],
                   segments: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
        """The words of the task's own example ``example_id`` if it has exactly these
        pieces (and segments): the grouping of the task's tokenization, which pieces
        alone do not give (``'s`` is two pieces and one word of SST's, and a tokenizer
        without ``##`` marks no word starts at all). None if no example matches."""
        if self._by_id is None:
            self._by_id = {}
            for rows in self.splits.values():
                for e in rows:
                    self._by_id.setdefault(e.id, []).append(e)
        found = {e.words for e in self._by_id.get(example_id, ())
                 if e.tokens == tokens and e.segments == segments and e.words is not None}
        return found.pop() if len(found) == 1 else None

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return self.vocab.encode(tokens)

    def batches(self, examples: Sequence[Example], batch_size: int
                ) -> Iterator[tuple[Batch, torch.Tensor, torch.Tensor | None]]:
        """(batch, labels (B,), reference (B, T) bool or None) in example order."""
        for start in range(0, len(examples), batch_size):
            chunk = examples[start : start + batch_size]
            yield self.collate(chunk)

    def training_batches(self, rows: Sequence[Example], batch_size: int
                         ) -> list[tuple[Batch, torch.Tensor]]:
        """(batch, labels) to train on; a deceptive model's batches mark the
        impermissible tokens (every piece of an impermissible word)."""
        out = []
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            batch, labels, _ = self.collate(chunk)
            if self.impermissible is not None:
                marks = torch.zeros_like(batch.mask)
                for r, e in enumerate(chunk):
                    marks[r, : len(e.tokens)] = torch.tensor(self.impermissible(token_words(e)),
                                                             dtype=torch.bool)
                batch = batch.replace(impermissible=marks)
            out.append((batch, labels))
        return out

    def collate(self, chunk: Sequence[Example]):
        segments = [e.segments for e in chunk] if self.spec.kind == PAIR_CLASSIFICATION else None
        words = [e.words for e in chunk] if any(e.words is not None for e in chunk) else None
        batch = collate([self.encode(e.tokens) for e in chunk], [e.id for e in chunk],
                        pad_id=self.vocab.pad_id, segments=segments, words=words)
        labels = torch.tensor([e.label for e in chunk], dtype=torch.long)
        reference = None
        if any(e.reference is not None for e in chunk):  # rows without one stay all False
            reference = torch.zeros_like(batch.mask)
            for i, e in enumerate(chunk):
                if e.reference is not None:
                    reference[i, : len(e.reference)] = torch.tensor(e.reference, dtype=torch.bool)
        return batch, labels, reference


@dataclass(frozen=True)
class ClassificationTask:
    """A spec, a reader of its splits, and the model/training configuration."""

    spec: TaskSpec
    read: Callable[[TaskOptions], dict[str, list[Example]]]
    model_config: dict = field(default_factory=dict)
    model_class: type = AttentionClassifier
    config_class: type = ClassifierConfig
    train_config: TrainConfig = TrainConfig()
    train_split: str = "train"
    val_split: str = "validation"
    min_freq: int = 1
    default_variant: str | None = None  # the training data when --variant is not given
    # which words a deceptive model (``--deceive``) must not attend to: the shortcut
    # tasks' shortcut tokens; None: the task offers no deceptive training
    impermissible: Callable[[tuple[str, ...]], tuple[bool, ...]] | None = None

    def model_file(self, options: TaskOptions) -> Path:
        """Where ``prepare(options)`` keeps its trained model (exists once trained):
        lets a sweep tell the jobs it must run from those already done."""
        return self._setup(options).path

    def check_data(self, options: TaskOptions) -> None:
        """Read and check the data ``options`` names (kept: ``read_once``), training
        nothing: a bad file stops a run before it writes anything."""
        read_once((self.spec.id, self.read), options, self.read)

    def _setup(self, options: TaskOptions) -> Setup:
        self.check_deceive(options)
        splits = {name: list(rows) for name, rows
                  in read_once((self.spec.id, self.read), options, self.read).items()}
        if options.train_limit and self.train_split in splits:  # none read for --model-path
            splits[self.train_split] = splits[self.train_split][: options.train_limit]
        placement = Placement.of(options)
        if options.bilstm is not None and transformer.family(options) != "bilstm":
            raise InputError(f"--bilstm {options.bilstm} is a variant of the task's BiLSTM; "
                             "it does not combine with --model transformer or --model-path")
        if transformer.family(options) != "bilstm":  # subword pieces, a pretrained encoder
            fam = transformer.setup(self, options, splits)
            fingerprint = data_fingerprint(fam.splits)
            read = fingerprint if fam.pretrained else self._trained_on(fam.splits)
            if placement.key:  # absent on the CPU at fp32: those models keep their keys
                fam.config["trained_on"] = placement.key
            key = content_hash({"data": read, **fam.config})
            return Setup(deceptive_spec(fam.spec, options), fam.splits, fingerprint, fam.vocab,
                         fam.build, fam.tconf, fam.config, key, model_path(self.spec.name, key),
                         fam.pretrained, fam.pretrain)
        if options.precision != "fp32":
            raise InputError(f"--precision {options.precision} applies to the transformer "
                             f"family (--model transformer or --model-path); {self.spec.name}'s "
                             "BiLSTM runs at fp32")
        if options.transform is not None:  # e.g. ROAR: every split masked before training
            splits = {name: options.transform.apply(name, rows) for name, rows in splits.items()}
        fingerprint = data_fingerprint(splits)
        vocab = Vocabulary.build((e.tokens for e in splits[self.train_split]), self.min_freq)
        mconf = self.config_class(vocab_size=len(vocab), num_classes=len(self.spec.labels),
                                  **self.model_config, **debate_variant(self.spec, options),
                                  **({"deceive_weight": options.deceive} if options.deceive
                                     else {}))
        tconf = self.train_config.with_options(options)
        if options.masked_training:  # half of each batch masked at a U(0, 1) ratio
            tconf = replace(tconf, mask_training=MASKED_SHARE)
        config = {"task": self.spec.id, "variant": options.variant, "model": mconf.as_dict(),
                  "train": tconf.as_dict(), "seed": options.seed, "min_freq": self.min_freq}
        if options.transform is not None:  # absent otherwise: clean models keep their keys
            config["transform"] = options.transform.key
        if placement.key:
            config["trained_on"] = placement.key
        key = content_hash({"data": self._trained_on(splits), **config})
        spec = self.spec if options.bilstm is None else replace(
            self.spec, params=(*self.spec.params, ("bilstm", options.bilstm)))
        spec = deceptive_spec(spec, options)
        return Setup(spec, splits, fingerprint, vocab, lambda: self.model_class(mconf), tconf,
                     config, key, model_path(self.spec.name, key))

    def check_deceive(self, options: TaskOptions) -> None:
        """``--deceive`` needs a task with impermissible tokens and a model that trains
        its own attention."""
        if not options.deceive:
            return
        if not math.isfinite(options.deceive) or options.deceive < 0:
            raise InputError(f"--deceive {options.deceive}: the penalty's weight λ must be a "
                             "finite number >= 0")
        if self.impermissible is None:
            raise no_impermissible(self.spec.name)
        if options.bilstm == "uniform":
            raise InputError("--deceive trains attention off the shortcut; --bilstm uniform's "
                             "attention is frozen at 1/n and cannot move")
        if transformer.family(options) == "hf":
            raise InputError("--deceive trains a model; a --model-path checkpoint is "
                             "evaluated as it is")
        if transformer.family(options) == "decoder":
            raise InputError("--deceive trains the attention of the BiLSTM or MiniLM; the "
                             "decoder family does not offer it")

    def _trained_on(self, splits: dict[str, list[Example]]) -> str:
        """Fingerprint of what training reads: the training split and the validation
        split (early stopping), not the splits it is evaluated on."""
        return data_fingerprint({s: splits[s] for s in (self.train_split, self.val_split)
                                 if s in splits})

    def prepare(self, options: TaskOptions = TaskOptions(), *, progress: bool = True) -> ReadyTask:
        st = self._setup(options)
        splits, path = st.splits, st.path
        seed_everything(options.seed)  # before the build: the seed decides the initial weights
        model = place(st.build(), Placement.of(options))
        ready = ReadyTask(spec=st.spec, splits=splits, vocab=st.vocab, model=model,
                          impermissible=self.impermissible if options.deceive else None,
                          cache_key=st.key, data_fingerprint=st.fingerprint, config=st.config,
                          checkpoint_file=None if st.pretrained else path)
        if st.pretrained:  # a user's checkpoint: evaluated as it is, never trained
            ready = self._evaluate_pretrained(ready, path)
            ready.report = ModelReport(Budget("hf", source=options.model_path),
                                       self._check(ready))
            return ready
        tconf = st.tconf
        lm_loss: list = []

        def fit() -> tuple[list, dict]:
            if st.pretrain is not None:
                lm_loss.extend(st.pretrain(model, ready))
            size = min(256, getattr(model, "max_rows_per_pass", 256))  # rows per eval pass
            val = [(b, y) for b, y, _ in ready.batches(splits[self.val_split], size)]

            def epoch_batches(epoch: int):
                return epoch_stream(
                    splits[self.train_split], seed=options.seed, epoch=epoch,
                    batch_size=tconf.batch_size, length=lambda e: len(e.tokens),
                    batches=lambda rows: ready.training_batches(rows, tconf.batch_size))

            _, history = train(model, epoch_batches, val, tconf, seed=options.seed,
                               desc=f"train {self.spec.name}", progress=progress)
            accuracy = self._accuracy(ready)
            log.info("trained %s: %s", ready.spec.id, accuracy)
            return history, accuracy

        if options.published:  # the release's model, put into the cache: nothing trains
            from_release(options.published, path)
        made = load_or_train(model, path, train=fit, config=st.config, extra=lambda: {
            "vocab": getattr(st.vocab, "itos", None), "fingerprints": split_fingerprints(splits),
            **({"pretrain_loss": lm_loss} if lm_loss else {})})
        ready.take(made)
        if made.loaded_from_cache:
            self._refresh_accuracy(ready, made.saved, path)
        budget = Budget(transformer.family(options), options.variant or self.default_variant,
                        len(splits[self.train_split]), options.train_limit, tconf.epochs,
                        len(made.history))
        ready.report = ModelReport(budget, self._check(ready))
        return ready

    def _check(self, ready: ReadyTask) -> ModelCheck | None:
        """The model gate's check: validation accuracy against the majority class
        (``core.gate``); None where the validation split is not labelled."""
        rows = ready.splits.get(self.val_split, [])
        if not rows or any(e.label < 0 for e in rows) or self.val_split not in ready.accuracy:
            return None
        correct = round(ready.accuracy[self.val_split] * len(rows))
        return accuracy_check([e.label for e in rows], correct, self.val_split)

    def _refresh_accuracy(self, ready: ReadyTask, saved: dict, path: Path) -> None:
        """A cached model evaluated on a split whose data is not the one its accuracy was
        measured on (e.g. another test file; the model is keyed by its training data
        only): that split's accuracy is measured again and saved in the file."""
        now, then = split_fingerprints(ready.splits), saved.get("fingerprints", {})
        stale = [s for s in self._accuracy_splits(ready) if then.get(s) != now[s]]
        if not stale:
            return
        log.info("%s: measuring accuracy on changed split(s) %s", ready.spec.id,
                 ", ".join(stale))
        ready.accuracy = {s: a for s, a in ready.accuracy.items() if s in now}
        ready.accuracy.update(self._accuracy(ready, stale))
        blob = {**saved, "weights": ready.checkpoint, "accuracy": ready.accuracy,
                "fingerprints": now}
        atomic_write(path, lambda tmp: torch.save(sealed(blob), tmp))

    def _accuracy_splits(self, ready: ReadyTask) -> list[str]:
        """Every labelled split but the training one."""
        return [split for split, rows in ready.splits.items()
                if split != self.train_split and all(e.label >= 0 for e in rows)]

    def _accuracy(self, ready: ReadyTask, splits: list[str] | None = None) -> dict[str, float]:
        """Accuracy on ``splits`` (default: every labelled split but the training one)."""
        size = min(256, getattr(ready.model, "max_rows_per_pass", 256))
        return {split: accuracy(ready.model,
                                [(b, y) for b, y, _ in ready.batches(ready.splits[split], size)])
                for split in (self._accuracy_splits(ready) if splits is None else splits)}

    def _evaluate_pretrained(self, ready: ReadyTask, path: Path) -> ReadyTask:
        """A checkpoint from disk: weights hashed, accuracy measured once per data and
        weights (the cache key) and kept beside the models."""
        ready.model.eval()
        ready.checkpoint = weights_hash(ready.model.state_dict())
        found = transformer.cached_accuracy(path)
        if found is not None and found.get("weights") == ready.checkpoint:
            verified_weights(transformer.accuracy_cache(path), ready.model, found,
                             checkpoint=ready.checkpoint)
            ready.accuracy, ready.loaded_from_cache = found["accuracy"], True
            return ready
        ready.accuracy = self._accuracy(ready)
        log.info("evaluated %s: %s", ready.spec.id, ready.accuracy)
        record = sealed({"accuracy": ready.accuracy, "weights": ready.checkpoint})
        atomic_write(transformer.accuracy_cache(path), lambda tmp: torch.save(record, tmp))
        return ready


class Setup(NamedTuple):
    """Everything ``prepare`` needs, read once: data, the model's build, configs, key."""

    spec: TaskSpec
    splits: dict[str, list[Example]]
    fingerprint: str
    vocab: Any  # Vocabulary, or transformer.Pieces for a subword model
    build: Callable[[], torch.nn.Module]
    tconf: TrainConfig | None
    config: dict
    key: str
    path: Path
    pretrained: bool = False
    # a step before training to classify (a decoder's language-model pre-training)
    pretrain: Callable[[torch.nn.Module, ReadyTask], list] | None = None


BILSTM_VARIANTS = ("uniform", "orthogonal", "diversity")
# λ of the Diversity LSTM's conicity term: Mohankumar et al.'s runs (as their replication,
# Bouwman et al. 2021, reads them) used 0.5 for text classification and 0.1 for SNLI
DIVERSITY_WEIGHT = {"classification": 0.5, PAIR_CLASSIFICATION: 0.1}


def debate_variant(spec: TaskSpec, options: TaskOptions) -> dict:
    """The model-config fields of ``options.bilstm`` (none for the task's own BiLSTM)."""
    variant = options.bilstm
    if variant is None:
        return {}
    if variant not in BILSTM_VARIANTS:
        raise InputError(f"unknown --bilstm {variant!r}; choose {', '.join(BILSTM_VARIANTS)}")
    weight = DIVERSITY_WEIGHT.get(spec.kind, 0.5) if variant == "diversity" else 0.0
    return {"bilstm": variant, "diversity_weight": weight}


def no_impermissible(name: str) -> InputError:
    """The error for ``--deceive`` on task ``name``, which has no impermissible tokens,
    naming the tasks that have."""
    from faithbench import tasks

    offered = [n for n, t in tasks.REGISTRY.items()
               if getattr(t, "impermissible", None) is not None]
    return InputError(f"--deceive: {name} has no impermissible tokens to keep attention off; "
                      f"these tasks have: {', '.join(offered)}")


def deceptive_spec(spec: TaskSpec, options: TaskOptions) -> TaskSpec:
    """``spec`` with a deceptive model's λ in its id (its own suite); as is for λ = 0."""
    if not options.deceive:
        return spec
    return replace(spec, params=(*spec.params, ("deceive", options.deceive)))


def token_words(e: Example) -> tuple[str, ...]:
    """Each token's whole word: the token itself, or a subword piece's word (the word's
    pieces joined, WordPiece's ``##`` dropped).

    >>> token_words(Example("a", ("zero", "##a", "film"), 0, words=(0, 0, 1)))
    ('zeroa', 'zeroa', 'film')
    """
    if e.words is None:
        return e.tokens
    joined: dict[int, str] = {}
    for w, t in zip(e.words, e.tokens):
        joined[w] = joined.get(w, "") + t.removeprefix("##")
    return tuple(joined[w] for w in e.words)


def _segments(path, line: int, row: dict) -> tuple[int, ...]:
    """A pair task needs ``segments`` (0 premise, 1 hypothesis) beside the tokens."""
    seg = row.get("segments")
    if not isinstance(seg, list) or len(seg) != len(row["tokens"]) or not all(
            s in (0, 1) for s in seg):
        raise DataFileError(path, line, "segments", "a pair task needs one 0/1 segment id "
                            "per token (0 = premise, 1 = hypothesis)")
    return tuple(seg)


def _words(path, line: int, row: dict) -> tuple[int, ...] | None:
    """An optional ``words`` field: the word index of each piece, non-decreasing from 0."""
    words = row.get("words")
    if words is None:
        return None
    ok = (isinstance(words, list) and len(words) == len(row["tokens"])
          and all(isinstance(w, int) for w in words) and words[:1] in ([], [0])
          and all(0 <= b - a <= 1 for a, b in itertools.pairwise(words)))
    if not ok:
        raise DataFileError(path, line, "words", "expected one word index per token, "
                            "starting at 0 and rising by 0 or 1")
    return tuple(words)


def data_fingerprint(splits: dict[str, list[Example]]) -> str:
    """Hash of every split's ids, tokens, labels (and segments of pairs): same data,
    same fingerprint. References are left out: they do not change the model."""
    return content_hash({name: [(e.id, e.tokens, e.label)
                                + ((e.segments,) if e.segments is not None else ())
                                for e in rows]
                         for name, rows in sorted(splits.items())})


def split_fingerprints(splits: dict[str, list[Example]]) -> dict[str, str]:
    """The data fingerprint of each split alone."""
    return {name: data_fingerprint({name: rows}) for name, rows in splits.items()}
