"""What every classification task shares: examples, vocabulary, a cached trained
model, and batches. A task module supplies only its spec and how to read its data.

Trained models are cached under ``cache_dir()/models`` keyed by a hash of the data
fingerprint, model config, training config and seed (``cache_key``); a second run
loads the file. Records and leaderboard suites name a model by ``checkpoint``, the
hash of its weights: two results pair only when they came from the same weights,
whichever run or machine trained them. The seed is set before the model is built,
so it decides the initial weights as well as the order of the training batches.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from benchmark.core.api import PAIR_CLASSIFICATION, Batch, Example, TaskOptions, TaskSpec
from benchmark.core.cache import atomic_write, cache_dir, content_hash, weights_hash
from benchmark.core.errors import DataFileError, InputError
from benchmark.core.models.classifier import AttentionClassifier, ClassifierConfig
from benchmark.core.models.training import TrainConfig, accuracy, seed_everything, train
from benchmark.core.vocab import Vocabulary, collate

log = logging.getLogger(__name__)
MASKED_SHARE = 0.5  # --masked-training: the share of each batch masked (Madsen et al.)


@dataclass
class ReadyTask:
    """A task with data loaded and its model trained (or loaded from the cache): the
    ``benchmark.core.api.PreparedTask`` of every classification task."""

    spec: TaskSpec
    splits: dict[str, list[Example]]
    vocab: Vocabulary
    model: torch.nn.Module  # implements the model surface of benchmark.core.api
    accuracy: dict[str, float]
    checkpoint: str  # weights hash (benchmark.core.cache.weights_hash)
    cache_key: str  # hash of data fingerprint + configs + seed: the cached file's name
    data_fingerprint: str
    config: dict
    history: list = field(default_factory=list)
    loaded_from_cache: bool = False
    checkpoint_file: Path | None = None  # the cached weights (a retraining job ships it)

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
        no gold label (-1)."""
        pairs = self.spec.kind == PAIR_CLASSIFICATION
        out = []
        for line, row in enumerate(rows, start=1):
            for name in ("id", "tokens"):
                if name not in row:
                    raise DataFileError(path, line, name, "missing field")
            tokens = row["tokens"]
            if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
                raise DataFileError(path, line, "tokens", "expected a list of strings")
            out.append(Example(str(row["id"]), tuple(tokens), -1,
                               segments=_segments(path, line, row) if pairs else None))
        return out

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return self.vocab.encode(tokens)

    def batches(self, examples: Sequence[Example], batch_size: int
                ) -> Iterator[tuple[Batch, torch.Tensor, torch.Tensor | None]]:
        """(batch, labels (B,), reference (B, T) bool or None) in example order."""
        for start in range(0, len(examples), batch_size):
            chunk = examples[start : start + batch_size]
            yield self.collate(chunk)

    def collate(self, chunk: Sequence[Example]):
        segments = [e.segments for e in chunk] if self.spec.kind == PAIR_CLASSIFICATION else None
        batch = collate([self.encode(e.tokens) for e in chunk], [e.id for e in chunk],
                        pad_id=self.vocab.pad_id, segments=segments)
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

    def model_file(self, options: TaskOptions) -> Path:
        """Where ``prepare(options)`` keeps its trained model (exists once trained):
        lets a sweep tell the jobs it must run from those already done."""
        return self._setup(options)[-1]

    def _setup(self, options: TaskOptions):
        splits = self.read(options)
        if options.train_limit:
            splits[self.train_split] = splits[self.train_split][: options.train_limit]
        if options.transform is not None:  # e.g. ROAR: every split masked before training
            splits = {name: options.transform.apply(name, rows) for name, rows in splits.items()}
        fingerprint = data_fingerprint(splits)
        vocab = Vocabulary.build((e.tokens for e in splits[self.train_split]), self.min_freq)
        mconf = self.config_class(vocab_size=len(vocab), num_classes=len(self.spec.labels),
                                  **self.model_config)
        tconf = self.train_config
        if options.epochs:
            tconf = replace(tconf, epochs=options.epochs)
        if options.masked_training:  # half of each batch masked at a U(0, 1) ratio
            tconf = replace(tconf, mask_training=MASKED_SHARE)
        config = {"task": self.spec.id, "variant": options.variant, "model": mconf.as_dict(),
                  "train": tconf.as_dict(), "seed": options.seed, "min_freq": self.min_freq}
        if options.transform is not None:  # absent otherwise: clean models keep their keys
            config["transform"] = options.transform.key
        key = content_hash({"data": fingerprint, **config})
        return splits, fingerprint, vocab, mconf, tconf, config, key, checkpoint_path(self.spec.name, key)

    def prepare(self, options: TaskOptions = TaskOptions(), *, progress: bool = True) -> ReadyTask:
        splits, fingerprint, vocab, mconf, tconf, config, key, path = self._setup(options)
        seed_everything(options.seed)  # before the build: the seed decides the initial weights
        model = self.model_class(mconf)
        ready = ReadyTask(self.spec, splits, vocab, model, {}, "", key, fingerprint, config,
                          checkpoint_file=path)
        if path.exists():
            saved = torch.load(path, map_location="cpu", weights_only=True)
            model.load_state_dict(saved["state_dict"])
            ready.accuracy, ready.history, ready.loaded_from_cache = saved["accuracy"], saved["history"], True
            ready.checkpoint = weights_hash(model.state_dict())
            model.eval()
            return ready
        val = [(b, y) for b, y, _ in ready.batches(splits[self.val_split], 256)]

        def epoch_batches(epoch: int):
            rows = list(splits[self.train_split])
            random.Random(options.seed * 1000 + epoch).shuffle(rows)
            # bucket by length inside windows so batches pad little, yet stay shuffled
            window = tconf.batch_size * 50
            rows = [r for s in range(0, len(rows), window)
                    for r in sorted(rows[s : s + window], key=lambda e: len(e.tokens))]
            out = [(b, y) for b, y, _ in ready.batches(rows, tconf.batch_size)]
            random.Random(options.seed * 1000 + epoch + 1).shuffle(out)
            return out

        _, ready.history = train(model, epoch_batches, val, tconf, seed=options.seed,
                                 desc=f"train {self.spec.name}", progress=progress)
        ready.accuracy = {
            split: accuracy(model, [(b, y) for b, y, _ in ready.batches(rows, 256)])
            for split, rows in splits.items()
            if split != self.train_split and all(e.label >= 0 for e in rows)
        }
        log.info("trained %s: %s", self.spec.name, ready.accuracy)
        ready.checkpoint = weights_hash(model.state_dict())
        blob = {"state_dict": model.state_dict(), "accuracy": ready.accuracy,
                "history": ready.history, "config": config, "vocab": vocab.itos,
                "weights": ready.checkpoint}
        atomic_write(path, lambda tmp: torch.save(blob, tmp))
        return ready


def _segments(path, line: int, row: dict) -> tuple[int, ...]:
    """A pair task needs ``segments`` (0 premise, 1 hypothesis) beside the tokens."""
    seg = row.get("segments")
    if not isinstance(seg, list) or len(seg) != len(row["tokens"]) or not all(
            s in (0, 1) for s in seg):
        raise DataFileError(path, line, "segments", "a pair task needs one 0/1 segment id "
                            "per token (0 = premise, 1 = hypothesis)")
    return tuple(seg)


def data_fingerprint(splits: dict[str, list[Example]]) -> str:
    """Hash of every split's ids, tokens, labels (and segments of pairs): same data,
    same fingerprint. References are left out: they do not change the model."""
    return content_hash({name: [(e.id, e.tokens, e.label)
                                + ((e.segments,) if e.segments is not None else ())
                                for e in rows]
                         for name, rows in sorted(splits.items())})


def checkpoint_path(name: str, key: str) -> Path:
    return cache_dir() / "models" / f"{name}-{key}.pt"
