"""MT word alignment: a GRU encoder–decoder with Bahdanau attention, trained with
teacher forcing on a parallel corpus, explained on gold-aligned sentence pairs.

A row is one (gold sentence pair, target position t): the source sentence is what
an explainer scores, the prefix is BOS plus the reference target words before t
(teacher forcing), and the explained target is the reference word at t — not the
model's own prediction. Its id is ``<sentence id>-<t>``.

Data (``faithbench.tasks.alignment_data``): ``DIR/<variant>/gold/test.jsonl`` (and optionally
``validation.jsonl``) and ``DIR/<variant>/parallel/train.jsonl`` (``--variant``
defaults to ``alignment``, the Hansards fr→en copy). The gold alone is enough to
score links and run the reference aligners; the model trains on the parallel pairs
whose source is not a gold sentence and needs at least ``MIN_TRAIN_PAIRS`` of them.
The last tenth of those pairs, at most ``HELD_OUT``, is never trained on: it gives the
validation perplexity that early stopping reads (whether or not the gold has a
validation split), and the BLEU of greedy decoding (sacrebleu, tokens as given)
reported beside it.

Two directions: ``alignment`` translates ``src`` → ``tgt`` as the files give them
(fr→en on Hansards), ``alignment_reverse`` the other way (its links are (tgt, src) in
the files' terms; ``faithbench.benchmark.core.links.symmetrize`` combines the two).

Size cap (so the full model trains in tens of CPU minutes): the first ``max_pairs``
training pairs, the ``tgt_words`` most frequent target words (the rest are ``<unk>``;
the output layer dominates the cost), hidden size 128, at most 5 epochs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import sacrebleu
import torch

from faithbench.benchmark.core.api import ALIGNMENT, Batch, Example, TaskOptions, TaskSpec
from faithbench.benchmark.core.cache import model_path
from faithbench.benchmark.core.device import Placement, place
from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.gate import Budget, ModelCheck, ModelReport, perplexity_check
from faithbench.benchmark.core.models.decoder_translator import (
    DecoderTranslator,
    TranslatorConfig,
)
from faithbench.benchmark.core.models.lifecycle import PreparedModel, from_release, load_or_train
from faithbench.benchmark.core.models.seq2seq import AttentionSeq2Seq, Seq2SeqConfig
from faithbench.benchmark.core.models.training import (
    NEXT_WORD,
    TrainConfig,
    epoch_stream,
    perplexity,
    seed_everything,
    sentence_nll,
    train,
)
from faithbench.benchmark.core.models.transformer_translator import (
    EncoderDecoderConfig,
    TransformerTranslator,
)
from faithbench.benchmark.core.vocab import Vocabulary, collate
from faithbench.tasks.alignment_baselines import ALIGNERS, diagonal, eflomal_links
from faithbench.tasks.alignment_data import MAX_TOKENS, read_gold, read_parallel
from faithbench.tasks.data import read_once, resolve_data_dir

log = logging.getLogger(__name__)

BOS, EOS = "<s>", "</s>"
HELD_OUT = 2000  # at most this many parallel pairs kept out of training: perplexity, BLEU
HELD_FRACTION = 10  # ... and at most one in this many, so a small corpus still trains
MIN_TRAIN_PAIRS = 100  # a floor that keeps perplexity and training defined, not a promise of
# a useful model (the Hansards model trains on 60,000 pairs)
DEFAULT_VARIANT = "alignment"
# the Transformer translators, decoder-only (``--model decoder``) and encoder-decoder
# (``--model transformer``): AdamW with warm-up, as Transformers train
DECODER_TRAIN = TrainConfig(epochs=5, patience=1, lr=1e-3, batch_size=64, word_dropout=0.05,
                            weight_decay=0.01, clip=1.0, optimizer="adamw", warmup=0.1)
TRANSLATORS: dict[str, type] = {"decoder": DecoderTranslator,
                                "transformer": TransformerTranslator}

SPEC = TaskSpec(
    name="alignment",
    version="1",
    kind=ALIGNMENT,
    dataset="local: DIR/<variant>/gold + DIR/<variant>/parallel (no hub copy)",
    eval_split="test",
    labels=(),
    citation="Mihalcea & Pedersen (2003), HLT-NAACL word alignment shared task (gold: "
             "Och & Ney 2000); Germann (2001), Aligned Hansards of the 36th Parliament",
)
REVERSE_SPEC = replace(SPEC, name="alignment_reverse")


@dataclass(frozen=True)
class AlignmentTask:
    spec: TaskSpec = SPEC
    model_config: dict = field(default_factory=lambda: {
        "embed_dim": 128, "hidden": 128, "attn_dim": 128, "dropout": 0.1})
    train_config: TrainConfig = TrainConfig(epochs=5, patience=1, lr=2e-3, batch_size=64,
                                            word_dropout=0.05)
    min_freq: int = 2
    held_out: int = HELD_OUT
    min_pairs: int = MIN_TRAIN_PAIRS
    max_pairs: int | None = 60_000  # training pairs (after the held-out ones are set aside)
    tgt_words: int | None = 8_000  # target vocabulary, besides <pad> <unk> <s> </s>
    reverse: bool = False  # translate tgt -> src

    def spec_for(self, options: TaskOptions) -> TaskSpec:
        """The spec records and leaderboard suites name: the data variant (the language
        pair's folder) is in the task id, so two language pairs never share a label or
        a ranking.

        >>> TASK.spec_for(TaskOptions(variant="ro-en")).id
        'alignment[variant=ro-en]@1'
        """
        params = (("variant", options.variant or DEFAULT_VARIANT),)
        if options.model in ("decoder", "transformer"):  # a Transformer translator
            params = (*params, ("model", options.model))
        if options.bilstm is not None:  # the uniform-attention model (``--bilstm uniform``)
            params = (*params, ("bilstm", options.bilstm))
        return replace(self.spec, params=params)

    def read(self, options: TaskOptions) -> tuple[dict, dict, list, list]:
        """(gold pairs by split, out-of-range links dropped by split, training pairs,
        held-out pairs): the data, without training anything. Only ``gold/test.jsonl`` is
        required (reference aligners and scoring links need nothing else); without a
        parallel corpus the training and held-out pairs are empty, and ``prepare``
        refuses to train on fewer than ``min_pairs``."""
        folder = self._folder(options)
        if not (folder / "gold" / "test.jsonl").is_file():
            raise InputError(
                f"{folder / 'gold' / 'test.jsonl'}: missing; task {self.spec.name} reads "
                f"{folder}/gold/test.jsonl (gold links: id, src, tgt, sure, possible), "
                f"optionally gold/validation.jsonl, and parallel/train.jsonl (src, tgt) to "
                "train its model (--variant names the folder, default alignment)")
        gold, dropped = read_gold(folder / "gold", out_of_range=options.gold_out_of_range,
                                  optional=("validation",))
        if "validation" not in gold:
            log.info("%s: no validation.jsonl, so only the test split is scored; early "
                     "stopping reads the held-out parallel pairs either way", folder / "gold")
        for split, n in dropped.items():
            if n:
                log.warning("%s: dropped %d gold links outside their sentence (%s split)",
                            folder / "gold", n, split)
        pairs = []
        if (folder / "parallel" / "train.jsonl").is_file():
            corpus = read_parallel(folder / "parallel")
            pairs = [(tuple(r["src"]), tuple(r["tgt"])) for r in corpus]
            long = sum(len(s) + len(t) > MAX_TOKENS for s, t in pairs)
            if long:  # training data, not scored: left out and counted, not refused
                log.warning("%s: left out %d training pairs of more than %d tokens (source "
                            "and target together)", folder / "parallel", long, MAX_TOKENS)
                pairs = [(s, t) for s, t in pairs if len(s) + len(t) <= MAX_TOKENS]
        seen = {p.src for rows in gold.values() for p in rows}
        kept = [pair for pair in pairs if pair[0] not in seen]  # gold is never trained on
        if len(kept) < len(pairs):
            log.warning("%s: left out %d training pairs whose source sentence is a gold one",
                        folder / "parallel", len(pairs) - len(kept))
        pairs = kept
        if self.reverse:
            gold = {split: [p.reversed() for p in rows] for split, rows in gold.items()}
            pairs = [(t, s) for s, t in pairs]
        n_held = min(self.held_out, max(1, len(pairs) // HELD_FRACTION)) if pairs else 0
        held, training = pairs[len(pairs) - n_held :], pairs[: len(pairs) - n_held]
        caps = [x for x in (options.train_limit, self.max_pairs) if x]
        return gold, dropped, training[: min(caps)] if caps else training, held

    def _folder(self, options: TaskOptions) -> Path:
        root = resolve_data_dir(options.data_dir)
        if root is None:
            raise InputError("task alignment has no hub copy: pass --data-dir DIR with "
                             "DIR/alignment/{gold,parallel} (see docs/guides/alignment.md)")
        return Path(root) / (options.variant or DEFAULT_VARIANT)

    def _check_trainable(self, options: TaskOptions, training: list, held: list) -> None:
        """Too little parallel text to train on is an error that says what is needed and
        what works without a model."""
        path = self._folder(options) / "parallel" / "train.jsonl"
        if len(training) >= self.min_pairs:
            return
        without = ("`faithbench score --alignments` and `faithbench align --aligner "
                   "diagonal|eflomal` need only the gold")
        if not path.is_file():
            raise InputError(f"{path}: missing parallel training corpus: the translation "
                             f"model trains on at least {self.min_pairs} pairs from it; "
                             f"{without}")
        capped = (f", capped by --train-limit {options.train_limit}"
                  if options.train_limit and options.train_limit < self.min_pairs else "")
        raise DataFileError(path, None, None, f"{len(training)} training pairs (besides "
                            f"{len(held)} held out, and leaving out pairs whose source is a "
                            f"gold sentence{capped}): the translation model needs at least "
                            f"{self.min_pairs}; {without}")

    @property
    def other_direction(self) -> str:
        """The registered name of the task that translates the other way."""
        return SPEC.name if self.reverse else REVERSE_SPEC.name

    @staticmethod
    def fingerprint(gold: dict, training: list, held: list) -> str:
        """The data fingerprint records carry: entries compare only when it matches, so
        alignments scored without a model (``score --alignments``) compute it too."""
        return content_hash({"train": training, "held_out": held,
                             "gold": {s: [(p.id, p.src, p.tgt) for p in rows]
                                      for s, rows in sorted(gold.items())}})

    def reference_alignments(self, aligner: str, options: TaskOptions, split: str,
                             limit: int | None = None) -> dict[str, list[list[int]]]:
        """{pair id: links} of a reference aligner (``faithbench.tasks.alignment_baselines``) on the
        first ``limit`` gold pairs of ``split``; no model is trained."""
        if aligner not in ALIGNERS:
            raise InputError(f"unknown aligner {aligner!r}; choose one of {', '.join(ALIGNERS)}")
        gold, _, training, _ = self.read(options)
        if split not in gold:
            raise InputError(f"task alignment has no split {split!r} (has: {', '.join(gold)})")
        pairs = gold[split][:limit] if limit else gold[split]
        return diagonal(pairs) if aligner == "diagonal" else eflomal_links(pairs, training)

    def prepare(self, options: TaskOptions | None = None, *, progress: bool = True):
        options = options or TaskOptions()
        if options.precision != "fp32":
            raise InputError(f"--precision {options.precision} applies to the transformer "
                             f"family; {self.spec.name}'s encoder-decoder runs at fp32")
        if options.masked_training or options.transform is not None:
            raise InputError(f"{self.spec.name}: masked training and ROAR apply to the "
                             "classification tasks only")
        if options.model not in (None, "bilstm", *TRANSLATORS) or options.model_path:
            raise InputError(f"{self.spec.name}: its models are the GRU encoder-decoder "
                             "(default), a decoder-only translator (--model decoder) and a "
                             "Transformer encoder-decoder (--model transformer); "
                             "--model-path applies to the classification tasks")
        family = TRANSLATORS.get(options.model or "")
        if family is not None and options.bilstm is not None:
            raise InputError(f"--bilstm {options.bilstm} is a variant of the GRU "
                             f"encoder-decoder, not of --model {options.model}")
        if options.bilstm not in (None, "uniform"):
            raise InputError(f"{self.spec.name}: --bilstm {options.bilstm} is a variant of the "
                             "classifiers' BiLSTM; the encoder-decoder has only --bilstm "
                             "uniform (its attention frozen at 1/n)")
        plan = self._plan(options)
        seed_everything(options.seed)  # before the build: the seed decides the initial weights
        build = family or AttentionSeq2Seq
        model = place(build(plan.mconf), Placement.of(options))
        path, tconf, held, training = plan.path, plan.tconf, plan.held, plan.training
        ready = ReadyAlignment(spec=self.spec_for(options), gold=plan.gold,
                               dropped_links=plan.dropped, src_vocab=plan.src_vocab,
                               tgt_vocab=plan.tgt_vocab, model=model, cache_key=plan.key,
                               data_fingerprint=plan.fingerprint, config=plan.config,
                               checkpoint_file=path)

        def fit() -> tuple[list, dict]:
            held_batches = [ready.teacher_forced(held[i : i + 256])
                            for i in range(0, len(held), 256)]

            def epoch_batches(epoch: int):
                size = tconf.batch_size
                return epoch_stream(
                    training, seed=options.seed, epoch=epoch, batch_size=size,
                    length=lambda p: len(p[1]),
                    batches=lambda rows: [ready.teacher_forced(rows[i : i + size])
                                          for i in range(0, len(rows), size)])

            _, history = train(model, epoch_batches, held_batches, tconf, seed=options.seed,
                               desc="train alignment", progress=progress, objective=NEXT_WORD)
            accuracy = {"held_out_perplexity": perplexity(model, held_batches),
                        "held_out_bleu": ready.bleu(held[:500])}
            log.info("trained alignment: %s", accuracy)
            return history, accuracy

        if options.published:  # the release's model, put into the cache: nothing trains
            from_release(options.published, path)
        made = load_or_train(model, path, train=fit, config=plan.config,
                             fraction_accuracy=False)  # perplexity and BLEU
        ready.take(made)
        name = {"decoder": "decoder", "transformer": "encoder_decoder"}.get(options.model or "",
                                                                         "seq2seq")
        budget = Budget(name, options.variant or DEFAULT_VARIANT,
                        len(training), options.train_limit, tconf.epochs, len(made.history))
        ready.report = ModelReport(budget, ready.check(held, training))
        return ready


    def _plan(self, options: TaskOptions) -> _Plan:
        """Data, vocabularies, configs and the content key of the model ``options``
        asks for: what ``prepare`` builds or loads, and ``model_file`` names."""
        gold, dropped, training, held = read_once(repr(self), options, self.read)
        gold, dropped, training, held = dict(gold), dict(dropped), list(training), list(held)
        self._check_trainable(options, training, held)
        src_vocab = Vocabulary.build((s for s, _ in training), self.min_freq)
        tgt_counts = Vocabulary.build((t for _, t in training), self.min_freq,
                                      self.tgt_words).itos[2:]
        tgt_vocab = Vocabulary([BOS, EOS, *tgt_counts])
        mconf: Seq2SeqConfig | TranslatorConfig | EncoderDecoderConfig
        if options.model in TRANSLATORS:
            kind = TranslatorConfig if options.model == "decoder" else EncoderDecoderConfig
            mconf = kind(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab),
                         bos_id=tgt_vocab.stoi[BOS],
                         **({"layers": options.model_layers} if options.model_layers else {}))
            tconf = DECODER_TRAIN.with_options(options)
        else:
            mconf = Seq2SeqConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab),
                                  bos_id=tgt_vocab.stoi[BOS], **self.model_config,
                                  uniform_attention=options.bilstm == "uniform")
            tconf = self.train_config.with_options(options)
        fingerprint = self.fingerprint(gold, training, held)
        config = {"task": self.spec.id, "variant": options.variant, "model": mconf.as_dict(),
                  "train": tconf.as_dict(), "seed": options.seed, "min_freq": self.min_freq,
                  "held_out": self.held_out, "max_pairs": self.max_pairs,
                  "tgt_words": self.tgt_words, "reverse": self.reverse}
        trained_on = Placement.of(options).key
        if trained_on:  # absent on the CPU: those models keep their keys
            config["trained_on"] = trained_on
        key = content_hash({"data": fingerprint, **config})
        return _Plan(gold, dropped, training, held, src_vocab, tgt_vocab, mconf, tconf,
                     fingerprint, config, key, model_path(self.spec.name, key))

    def model_file(self, options: TaskOptions) -> Path:
        """Where ``prepare(options)`` keeps its trained model (exists once trained)."""
        return self._plan(options).path

    def check_data(self, options: TaskOptions) -> None:
        """Read and check the data ``options`` names (kept: ``read_once``), training
        nothing: a bad file stops a run before it writes anything."""
        read_once(repr(self), options, self.read)


@dataclass(frozen=True)
class _Plan:
    gold: dict
    dropped: dict
    training: list
    held: list
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary
    mconf: Seq2SeqConfig | TranslatorConfig | EncoderDecoderConfig
    tconf: TrainConfig
    fingerprint: str
    config: dict
    key: str
    path: Path

@dataclass(kw_only=True)
class ReadyAlignment(PreparedModel):
    """The ``PreparedTask`` of the alignment task: gold pairs, vocabularies, the model
    (its ``accuracy`` is held-out perplexity and BLEU)."""

    gold: dict
    dropped_links: dict[str, int]
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary

    @property
    def n_outputs(self) -> int:
        return len(self.tgt_vocab)

    @property
    def splits(self) -> dict[str, list[Example]]:
        """Every gold split's rows (one per target position)."""
        return {split: self.examples(split) for split in self.gold}

    def examples(self, split: str, limit: int | None = None) -> list[Example]:
        """One row per (sentence pair, target position) of the first ``limit`` pairs."""
        if split not in self.gold:
            raise InputError(f"task alignment has no split {split!r} (has: {', '.join(self.gold)})")
        pairs = self.gold[split][:limit] if limit else self.gold[split]
        return [self._row(f"{p.id}-{t}", p.src, p.tgt[:t], p.tgt[t], sentence=p.id, position=t,
                          gold=_grades(p, t))
                for p in pairs for t in range(len(p.tgt))]

    def _row(self, row_id, src, prefix, word, *, sentence, position, gold=None) -> Example:
        """``reference``: per source word, 2 = sure link to this target word, 1 = possible
        only, 0 = none (None for a user's row without gold)."""
        return Example(row_id, tuple(src), self.tgt_vocab.encode([word])[0], reference=gold,
                       extras={"sentence": sentence, "position": position,
                               "prefix": tuple(prefix), "target_word": word})

    def group_of(self, example: Example) -> str:
        """Rows of one sentence pair form one unit of a corpus-level statistic (AER's
        bootstrap resamples sentences)."""
        return example.extras["sentence"]

    def batches(self, examples: Sequence[Example], batch_size: int
                ) -> Iterator[tuple[Batch, torch.Tensor, torch.Tensor | None]]:
        for start in range(0, len(examples), batch_size):
            chunk = examples[start : start + batch_size]
            batch = collate([self.src_vocab.encode(e.tokens) for e in chunk], [e.id for e in chunk])
            prefix = collate([[self.model.bos_id, *self.tgt_vocab.encode(e.extras["prefix"])]
                              for e in chunk], [e.id for e in chunk])
            batch = batch.replace(prefix=prefix.ids, prefix_mask=prefix.mask)
            reference = None
            if all(e.reference is not None for e in chunk):
                reference = torch.zeros(batch.ids.shape, dtype=torch.int8)
                for i, e in enumerate(chunk):
                    reference[i, : len(e.reference)] = torch.tensor(e.reference, dtype=torch.int8)
            yield batch, torch.tensor([e.label for e in chunk], dtype=torch.long), reference

    def targets(self, examples: Sequence[Example], base_probs: torch.Tensor) -> torch.Tensor:
        """The reference next word of each row (teacher forcing), whatever the model predicts."""
        return torch.tensor([e.label for e in examples], dtype=torch.long)

    def examples_from_rows(self, path, rows: list[dict]) -> list[Example]:
        """``{"id", "tokens" (source), "prefix" (target words before t), "target_word"}``."""
        out = []
        for line, row in enumerate(rows, start=1):
            for name in ("id", "tokens", "prefix", "target_word"):
                if name not in row:
                    raise DataFileError(path, line, name, "missing field")
            for name in ("tokens", "prefix"):
                if not isinstance(row[name], list) or not all(isinstance(t, str) for t in row[name]):
                    raise DataFileError(path, line, name, "expected a list of strings")
            if not row["tokens"]:
                raise DataFileError(path, line, "tokens", "no source token: nothing to explain")
            if not isinstance(row["target_word"], str):
                raise DataFileError(path, line, "target_word", "expected a string")
            out.append(self._row(str(row["id"]), row["tokens"], row["prefix"], row["target_word"],
                                 sentence=str(row["id"]), position=len(row["prefix"])))
        return out

    def teacher_forced(self, pairs: Sequence[tuple[tuple[str, ...], tuple[str, ...]]]):
        """(batch with prefix BOS + target, labels target + EOS, -100 at padding) for training."""
        src = collate([self.src_vocab.encode(s) for s, _ in pairs], [str(i) for i in range(len(pairs))])
        targets = [self.tgt_vocab.encode(t) + [self.tgt_vocab.stoi[EOS]] for _, t in pairs]
        prefix = collate([[self.model.bos_id, *t[:-1]] for t in targets], src.example_ids)
        labels = torch.full(prefix.ids.shape, -100, dtype=torch.long)
        for i, t in enumerate(targets):
            labels[i, : len(t)] = torch.tensor(t)
        return src.replace(prefix=prefix.ids, prefix_mask=prefix.mask), labels

    def check(self, held: list, training: list) -> ModelCheck | None:
        """The model gate's check (``core.gate``): held-out perplexity against a unigram
        model of the training targets (add-one smoothed over the target vocabulary,
        end of sentence included), on the same words; None without held-out pairs."""
        if not held:
            return None
        eos = self.tgt_vocab.stoi[EOS]
        counts = torch.ones(len(self.tgt_vocab), dtype=torch.float64)
        for _, target in training:
            counts += torch.bincount(torch.tensor(self.tgt_vocab.encode(target) + [eos]),
                                     minlength=len(counts)).double()
        unigram = -torch.log(counts / counts.sum())
        batches = [self.teacher_forced(held[i : i + 256]) for i in range(0, len(held), 256)]
        model_nll, words = sentence_nll(self.model, batches)
        unigram_nll = [float(unigram[labels[i][labels[i] != -100]].sum())
                       for _, labels in batches for i in range(len(labels))]
        return perplexity_check(model_nll, unigram_nll, words, "held-out")

    @torch.no_grad()
    def translate(self, sources: Sequence[Sequence[str]], max_extra: int = 5) -> list[list[str]]:
        """Greedy decoding, batched over sentences, up to 2 · n + ``max_extra`` words."""
        self.model.eval()
        eos = self.tgt_vocab.stoi[EOS]
        out = []
        for start in range(0, len(sources), 128):
            chunk = sources[start : start + 128]
            batch = collate([self.src_vocab.encode(s) for s in chunk], [str(i) for i in range(len(chunk))])
            words = torch.full((len(chunk), 1), self.model.bos_id, dtype=torch.long)
            cap = 2 * batch.lengths + max_extra  # per sentence, so batching changes nothing
            done = torch.zeros(len(chunk), dtype=torch.bool)
            for step_no in range(int(cap.max())):
                step = batch.replace(prefix=words, prefix_mask=torch.ones_like(words, dtype=torch.bool))
                nxt = self.model.logits(step).argmax(-1)
                nxt = torch.where(done, eos, nxt)
                words = torch.cat([words, nxt.unsqueeze(1)], dim=1)
                done |= (nxt == eos) | (step_no + 1 >= cap)
                if bool(done.all()):
                    break
            for row in words[:, 1:].tolist():
                cut = row.index(eos) if eos in row else len(row)
                out.append(self.tgt_vocab.decode(row[:cut]))
        return out

    def bleu(self, pairs) -> float:
        """Corpus BLEU (sacrebleu, tokens as given) of greedy translations of ``pairs``."""
        hyps = [" ".join(h) for h in self.translate([s for s, _ in pairs])]
        refs = [" ".join(t) for _, t in pairs]
        return float(sacrebleu.corpus_bleu(hyps, [refs], tokenize="none").score)


def _grades(pair, t: int) -> tuple[int, ...]:
    """Gold of target word t over the source words: 2 sure, 1 possible only, 0 none."""
    return tuple(2 if (i, t) in pair.sure else 1 if (i, t) in pair.possible else 0
                 for i in range(len(pair.src)))


TASK = AlignmentTask()
REVERSE_TASK = AlignmentTask(spec=REVERSE_SPEC, reverse=True)
