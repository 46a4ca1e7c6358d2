"""Generation attribution, scored: a causal LM's continuation of each prompt, one row per
generated (teacher-forced) token.

A sequence is a prompt and its continuation: the continuation a ``--continuation-column``
gives, else the model's own greedy one (``--max-new-tokens``, stopped at its end-of-text
token). Row t of a sequence reads the prompt's tokens and the continuation's first t
tokens, and its target is continuation token t: explainers score every token before it
(prompt and earlier generated ones), and the faithfulness metrics erase them and compare
the target's **log-probability** (``MetricInput.log_target``). A sequence's value is
the mean over its steps, so intervals and paired tests resample sequences (and seeds),
not the correlated steps of one sequence (``faithbench.benchmark.scoring``).

The model is any causal checkpoint on disk (``--model-path DIR``: GPT-2, Llama, Qwen2,
Mistral layouts), read with its tokenizer's leading special tokens (or its BOS / end of
text token, as GPT-2 starts a text) before the prompt, which are constants of the model
and never scored (``decoder.generation_template``). Pieces are the tokenizer's own:
the prompt and continuation are tokenized together, so a continuation that starts
mid-word is split as the model would read it.

The task id names the dataset's content and columns, and the checkpoint's weights name
the model, so two datasets or two models never share a suite::

    generation[continuation=answer;data=3f9a0c1d2b4e;model=hf;prompt=question]@1

``faithbench score --task generation --model-path DIR --explanations F.jsonl`` scores
rows written by ``faithbench explain`` (or by hand: ``id``, ``tokens``, ``scores``,
``target_token``, and ``sequence`` to group steps); ``--inseq F.json`` reads the
attributions Inseq saved (``faithbench.benchmark.inseq``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from faithbench.benchmark.core.api import (
    GENERATION,
    Batch,
    DatasetOptions,
    Example,
    TaskOptions,
    TaskSpec,
)
from faithbench.benchmark.core.cache import weights_hash
from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.gate import Budget, ModelReport, perplexity_check
from faithbench.benchmark.core.models import decoder as model
from faithbench.benchmark.core.models.lifecycle import PreparedModel
from faithbench.benchmark.core.vocab import collate
from faithbench.tasks.decoder import checkpoint_limit, is_causal
from faithbench.tasks.own_data import load_source
from faithbench.tasks.transformer import load_tokenizer

SPEC = TaskSpec(
    name="generation",
    version="1",
    kind=GENERATION,
    dataset="your own: --dataset FILE, FOLDER or hub id, --text-column (the prompt)",
    eval_split="test",
    labels=(),
)


NO_DATASET = ("task generation explains a dataset's prompts: give --dataset FILE "
              "--text-column PROMPT [--continuation-column C] (or score saved attributions: "
              "faithbench score --task generation --model-path DIR --explanations/--inseq F)")


@dataclass(frozen=True)
class Continued:
    """One prompt and its continuation, as the tokenizer's pieces."""

    id: str
    prompt: tuple[str, ...]
    continuation: tuple[str, ...]


@dataclass(frozen=True)
class GenerationTask:
    """The generation task: a checkpoint's continuations of a dataset's prompts."""

    spec: TaskSpec = SPEC

    def prepare(self, options: TaskOptions | None = None, *, progress: bool = True
                ) -> ReadyGeneration:
        options = options or TaskOptions()
        path = self._checkpoint(options)
        from transformers import AutoModelForCausalLM
        tokenizer = load_tokenizer(path)
        try:
            hf = AutoModelForCausalLM.from_pretrained(str(path), attn_implementation="eager")
        except (OSError, ValueError) as exc:
            raise InputError(f"--model-path {path}: not a causal LM checkpoint ({exc})") from exc
        net = model.DecoderClassifier(hf, tokenizer, model.generation_template(tokenizer),
                                      next_token=True).eval()
        dataset = options.dataset
        rows = read_rows(dataset) if dataset is not None else {}
        spec = replace(self.spec, params=(*spec_params(dataset, rows), ("model", "hf")))
        ready = ReadyGeneration(
            spec=spec, model=net, tokenizer=tokenizer,
            limit=checkpoint_limit(path, model.PROMPT) - len(net.template.prefix),
            cache_key=content_hash({"task": spec.id, "model": str(path.resolve())}),
            data_fingerprint="", config={"task": spec.id, "model": {
                "family": "hf", "path": str(path.resolve()), "next_token": True}},
            checkpoint=weights_hash(hf.state_dict()))
        if dataset is not None:
            ready.sequences = {split: ready.tokenized(*read, dataset, split)
                               for split, read in rows.items()}
            ready.data_fingerprint = content_hash(
                {s: [(q.id, q.prompt, q.continuation) for q in seqs]
                 for s, seqs in ready.sequences.items()})[:16]
            ready.accuracy, ready.report = ready.measure(path)
        return ready

    def model_file(self, options: TaskOptions) -> Path:
        return self._checkpoint(options)

    def check_data(self, options: TaskOptions) -> None:
        """Before a run: a model and a dataset are named (the dataset's columns are
        checked when the model has read it: a generated continuation needs the model)."""
        self._checkpoint(options)
        if options.dataset is None:
            raise InputError(NO_DATASET)

    def dataset_of(self, options: TaskOptions) -> DatasetOptions | None:
        """``options.dataset`` (None: explanations from a file are scored, nothing read)."""
        d = options.dataset
        if d is not None and (d.pair is not None or d.rationale is not None):
            raise InputError("task generation reads a prompt (--text-column) and optionally "
                             "its continuation (--continuation-column); --pair-column and "
                             "--rationale-column belong to the text tasks")
        return d

    def _checkpoint(self, options: TaskOptions) -> Path:
        if options.model_path is None:
            raise InputError("task generation explains a causal LM's continuations: give "
                             "--model-path DIR (a GPT-2, Llama, Qwen2 or Mistral checkpoint)")
        path = Path(options.model_path)
        if not is_causal(path):
            raise InputError(f"--model-path {path}: task generation needs a causal LM "
                             "(gpt2, llama, qwen2, mistral, ...); "
                             "this config's model_type is not one")
        return path


def spec_params(dataset: DatasetOptions | None, rows: dict) -> tuple[tuple[str, str], ...]:
    """The content hash of the rows read and the columns read (or the greedy length), as
    the text tasks name theirs; nothing without a dataset (explanations from a file)."""
    if dataset is None:
        return ()
    read = (("continuation", dataset.continuation) if dataset.continuation
            else ("generate", str(dataset.generate)))
    return (read, ("data", content_hash(rows)[:12]), ("prompt", dataset.text))


def read_rows(dataset: DatasetOptions) -> dict[str, tuple[list, list, list | None]]:
    """Each split's (ids, prompts, continuations or None) as the dataset holds them; a
    file with one split is the test split. A missing column, an empty prompt or an id
    seen twice is an error naming the dataset, split, row and column."""
    tables = load_source(dataset.source)
    if len(tables) == 1:
        tables = {"test": next(iter(tables.values()))}
    out = {}
    for split, table in tables.items():
        columns = set(table.column_names)
        for column in (dataset.text, dataset.continuation):
            if column is not None and column not in columns:
                raise InputError(f"--dataset {dataset.source} ({split}): no column {column!r} "
                                 f"(has: {', '.join(sorted(columns))})")
        prompts, ids, seen = [], [], dict[str, int]()
        for i, row in enumerate(table):
            where = f"--dataset {dataset.source}, {split} row {i + 1}"
            text = row[dataset.text]
            if not isinstance(text, str) or not text.strip():
                raise InputError(f"{where}, column {dataset.text!r}: an empty prompt "
                                 "(every row needs text to continue)")
            sid = str(row["id"]) if "id" in columns else f"{split}-{i}"
            if sid in seen:
                raise InputError(f"{where}, column 'id': id {sid!r} also on row {seen[sid]}")
            seen[sid] = i + 1
            prompts.append(text)
            ids.append(sid)
        given = list(table[dataset.continuation]) if dataset.continuation else None
        out[split] = (ids, prompts, given)
    return out


@dataclass(kw_only=True)
class ReadyGeneration(PreparedModel):
    """The ``PreparedTask`` of the generation task: the checkpoint, its tokenizer and the
    dataset's sequences (its ``accuracy``: teacher-forced perplexity and next-token
    accuracy on the scored split)."""

    tokenizer: Any  # a transformers tokenizer
    limit: int  # positions a row may fill (the model's, less the start token)
    sequences: dict[str, list[Continued]] = field(default_factory=dict)

    @property
    def n_outputs(self) -> int:
        return int(self.model.hf.get_output_embeddings().weight.shape[0])

    @property
    def splits(self) -> dict[str, list[Example]]:
        return {split: self.examples(split) for split in self.sequences}

    def examples(self, split: str, limit: int | None = None) -> list[Example]:
        """One row per (sequence, continuation token) of the first ``limit`` sequences."""
        if not self.sequences:  # no dataset: explanations from a file are scored
            return []
        if split not in self.sequences:
            raise InputError(f"task generation has no split {split!r} in this dataset (has: "
                             f"{', '.join(self.sequences)})")
        chosen = self.sequences[split][:limit] if limit else self.sequences[split]
        return [row for s in chosen for row in self.steps(s)]

    def steps(self, s: Continued) -> list[Example]:
        """The rows of sequence ``s``, one per continuation token."""
        return [self.row(f"{s.id}-{t}", s.prompt + s.continuation[:t], s.continuation[t],
                         sequence=s.id, step=t, prompt_length=len(s.prompt))
                for t in range(len(s.continuation))]

    def row(self, row_id: str, tokens: Sequence[str], target: str, *, sequence: str,
            step: int, prompt_length: int) -> Example:
        return Example(row_id, tuple(tokens), self._ids([target])[0],
                       extras={"sequence": sequence, "step": step,
                               "prompt_length": prompt_length, "target_token": target})

    def group_of(self, example: Example) -> str:
        """A sequence's steps form one unit: its value is their mean."""
        return (example.extras or {}).get("sequence", example.id)

    def batches(self, examples: Sequence[Example], batch_size: int
                ) -> Iterator[tuple[Batch, torch.Tensor, torch.Tensor | None]]:
        for start in range(0, len(examples), batch_size):
            chunk = examples[start : start + batch_size]
            batch = collate([self._ids(e.tokens) for e in chunk], [e.id for e in chunk],
                            pad_id=self.model.pad_id)
            yield batch, torch.tensor([e.label for e in chunk], dtype=torch.long), None

    def targets(self, examples: Sequence[Example], base_probs: torch.Tensor) -> torch.Tensor:
        """The continuation's token at each step (teacher forcing), whatever the model
        would generate."""
        return torch.tensor([e.label for e in examples], dtype=torch.long)

    def examples_from_rows(self, path, rows: list[dict]) -> list[Example]:
        """``{"id", "tokens" (prompt and earlier tokens), "target_token"}`` and optionally
        ``sequence`` (the steps' group; default the id) and ``step``."""
        known = self.tokenizer.get_vocab()
        out = []
        for line, row in enumerate(rows, start=1):
            for name in ("id", "tokens", "target_token"):
                if name not in row:
                    raise DataFileError(path, line, name, "missing field")
            pieces = [*row["tokens"], row["target_token"]]
            unknown = next((p for p in pieces if not isinstance(p, str) or p not in known), None)
            if unknown is not None:
                raise DataFileError(path, line, "tokens" if unknown in row["tokens"]
                                    else "target_token", f"{unknown!r} is not a token of the "
                                    "model's tokenizer (write its pieces, as `faithbench "
                                    "explain` does)")
            out.append(self.row(str(row["id"]), row["tokens"], row["target_token"],
                                sequence=str(row.get("sequence", row["id"])),
                                step=int(row.get("step", 0)),
                                prompt_length=int(row.get("prompt_length", 0))))
        return out

    def tokenized(self, ids: list[str], prompts: list[str], given: list | None,
                  dataset: DatasetOptions, split: str) -> list[Continued]:
        """Sequences as pieces: prompt and continuation tokenized together (the pieces
        of the prompt must be the prompt's own; else each is tokenized alone), or the
        model's greedy continuation of the prompt."""
        tok = self.tokenizer
        out = []
        for i, (sid, text) in enumerate(zip(ids, prompts)):
            prompt = tuple(tok.tokenize(text))
            if given is None:
                continuation: tuple[str, ...] = ()
            else:
                more = given[i]
                if not isinstance(more, str) or not more:
                    raise InputError(f"--dataset {dataset.source}, {split} row {i + 1}, column "
                                     f"{dataset.continuation!r}: an empty continuation")
                whole = tuple(tok.tokenize(text + more))
                continuation = whole[len(prompt):] if whole[: len(prompt)] == prompt \
                    else tuple(tok.tokenize(more))
            if len(prompt) + len(continuation) > self.limit:
                raise InputError(f"--dataset {dataset.source}, {split} row {i + 1}: "
                                 f"{len(prompt) + len(continuation)} tokens, more than the "
                                 f"{self.limit} the model reads; shorten it")
            out.append(Continued(sid, prompt, continuation))
        if given is None:
            out = self.generate(out, dataset.generate)
        return out

    @torch.no_grad()
    def generate(self, sequences: list[Continued], steps: int) -> list[Continued]:
        """Each prompt continued greedily by up to ``steps`` tokens (at most what the
        model reads), stopped after its end-of-text token (kept, as a target)."""
        eos = self.tokenizer.eos_token_id
        out = []
        for start in range(0, len(sequences), 32):
            chunk = sequences[start : start + 32]
            rows = [self._ids(s.prompt) for s in chunk]
            done = [False] * len(chunk)
            for _ in range(steps):
                live = [i for i, r in enumerate(rows) if not done[i] and len(r) < self.limit]
                if not live:
                    break
                batch = collate([rows[i] for i in live], [chunk[i].id for i in live],
                                pad_id=self.model.pad_id)
                nxt = self.model.logits(batch).argmax(-1).tolist()
                for i, token in zip(live, nxt):
                    rows[i].append(int(token))
                    done[i] = token == eos
            for s, r in zip(chunk, rows):
                pieces = tuple(self.tokenizer.convert_ids_to_tokens(r[len(s.prompt):]))
                out.append(replace(s, continuation=pieces))
        return out

    @torch.no_grad()
    def measure(self, path: Path) -> tuple[dict[str, float], ModelReport]:
        """The scored split's teacher-forced perplexity and next-token accuracy, and the
        model gate: that perplexity against a unigram model (add-one over the
        vocabulary) of the training split's continuations, or where the dataset has
        none, of the scored split's own (in-sample: a stricter baseline)."""
        scored = self.sequences.get(SPEC.eval_split) or []
        fitted = self.sequences.get("train") or scored
        counts = torch.ones(self.n_outputs, dtype=torch.float64)
        for s in fitted:
            counts += torch.bincount(torch.tensor(self._ids(s.continuation), dtype=torch.long),
                                     minlength=self.n_outputs).double()
        unigram = -torch.log(counts / counts.sum())
        rows = [e for s in scored for e in self.steps(s)]  # every step, batched together
        nll, right = [], 0
        for batch, labels, _ in self.batches(rows, 32):
            logp = torch.log_softmax(self.model.logits(batch).double(), dim=-1)
            nll += (-logp.gather(1, labels.unsqueeze(1)).squeeze(1)).tolist()
            right += int((logp.argmax(-1) == labels).sum())
        model_nll, unigram_nll, words = [], [], []
        at = 0
        for s in scored:  # each sequence's sums: the gate resamples sequences
            n = len(s.continuation)
            if n:
                model_nll.append(sum(nll[at : at + n]))
                unigram_nll.append(float(unigram[[e.label for e in rows[at : at + n]]].sum()))
                words.append(n)
            at += n
        if not words:
            return {}, ModelReport(Budget("hf", source=str(path)))
        accuracy = {"perplexity": math.exp(sum(model_nll) / sum(words)),
                    "next_token_accuracy": right / sum(words)}
        check = perplexity_check(model_nll, unigram_nll, words, SPEC.eval_split)
        return accuracy, ModelReport(Budget("hf", source=str(path)), check)

    def _ids(self, pieces: Sequence[str]) -> list[int]:
        return [int(i) for i in self.tokenizer.convert_tokens_to_ids(list(pieces))]


TASK = GenerationTask()
