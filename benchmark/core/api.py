"""The only surface a submitter imports: batch and target types, the model
surface, the Explainer protocol, and the frozen spec types.

One batch type serves every task kind. A classifier row is a token sequence
(``segments`` tells premise from hypothesis for NLI). A seq2seq alignment row is
one (source sentence, target position): ``ids`` holds the source, ``prefix`` the
teacher-forced target words before that position, and the target is the next
target word. In every case an explainer scores the tokens in ``ids``, one float
per position, higher = more important for ``target``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch

from faithbench.benchmark.core.ids import format_id

# Task kinds, re-exported for submitters (the lists live in faithbench.benchmark.core.names).
from faithbench.benchmark.core.names import (  # noqa: F401  (kinds re-exported for submitters)
    ALIGNMENT,
    CLASSIFICATION,
    DIRECTIONS,
    FAMILIES,
    GENERATION,
    PAIR_CLASSIFICATION,
    TASK_KINDS,
)
from faithbench.benchmark.core.stats import Aggregation

if TYPE_CHECKING:  # core.retrain and core.perturb build on this module
    from faithbench.benchmark.core.perturb import Perturber
    from faithbench.benchmark.core.retrain import Retrainer

# Capabilities an explainer may require of the model surface.
GRADIENTS = "gradients"  # model is differentiable wrt its input embeddings
EMBEDDINGS = "embeddings"  # embed() / logits_from_embeddings()
ATTENTION = "attention"  # attention()
LAYER_ATTENTION = "layer_attention"  # attention_maps(): every layer's and head's attention
LRP = "lrp"  # lrp_logits(): a forward pass whose backward propagates LRP relevance
# attention_vectors(): the attention the output reads and the vectors it weights
ATTENTION_VECTORS = "attention_vectors"
# attention_leaf() / logits_from_attention(): the logits as a function of that attention
ATTENTION_GRADIENT = "attention_gradient"
VALUE_ZEROING = "value_zeroing"  # value_zeroing_maps(): per-layer context mixing
# appended only: existing ids and orders never change
CAPABILITIES = (GRADIENTS, EMBEDDINGS, ATTENTION, LAYER_ATTENTION, LRP, ATTENTION_VECTORS,
                ATTENTION_GRADIENT, VALUE_ZEROING)
# what each capability is, for the message that refuses an explainer a model cannot serve
CAPABILITY_TEXT = {
    GRADIENTS: "gradients wrt the input embeddings",
    EMBEDDINGS: "embed() / logits_from_embeddings()",
    ATTENTION: "attention(): one attention distribution over the input",
    LAYER_ATTENTION: "attention_maps(): every layer's and head's attention, which only a "
                     "Transformer exposes",
    LRP: "lrp_logits(): BiLSTM, GRU, BERT-architecture and Llama-layout decoder models",
    ATTENTION_VECTORS: "attention_vectors(): the vectors the attention weights (task BiLSTMs "
                       "and BERT-layout Transformers)",
    ATTENTION_GRADIENT: "logits_from_attention(): the logits with the attention as an input "
                        "(task BiLSTMs and BERT-layout Transformers)",
    VALUE_ZEROING: "value_zeroing_maps(): a layer recomputed with one token's value vector "
                   "zeroed, which only a BERT-layout Transformer offers",
}


def capabilities(model: Any) -> frozenset[str]:
    """What a model offers explainers: its ``capabilities`` attribute if it declares one,
    else the three of the original surface (every task model here has them)."""
    declared = getattr(model, "capabilities", None)
    return frozenset(declared) if declared is not None else frozenset(CAPABILITIES[:3])



@dataclass(frozen=True)
class Batch:
    """Token ids as the model sees them, right-padded.

    ids: (B, T) long; mask: (B, T) bool, True = real token;
    segments: (B, T) long or None (0 = first sentence, 1 = second);
    prefix, prefix_mask: (B, U) teacher-forced target prefix, or None;
    example_ids: B strings, the ids records and files use;
    words: (B, T) long word index of each position, or None where every token is a
    word. A subword model's pieces of one word share an index; metrics then rank and
    erase whole words unless asked for ``granularity="subword"``;
    impermissible: (B, T) bool, the tokens deceptive training keeps attention off
    (Pruthi et al. 2020), in training batches of a ``--deceive`` model only, else None.
    """

    ids: torch.Tensor
    mask: torch.Tensor
    example_ids: tuple[str, ...]
    segments: torch.Tensor | None = None
    prefix: torch.Tensor | None = None
    prefix_mask: torch.Tensor | None = None
    words: torch.Tensor | None = None
    impermissible: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.ids.shape[0]

    @property
    def lengths(self) -> torch.Tensor:
        """(B,) number of real tokens per row."""
        return self.mask.sum(dim=1)

    def replace(self, **changes: Any) -> Batch:
        return dataclasses.replace(self, **changes)

    def select(self, rows: torch.Tensor | list[int]) -> Batch:
        """Rows ``rows`` (repeats allowed), in that order."""
        rows = torch.as_tensor(rows, dtype=torch.long, device=self.ids.device)
        pick = lambda t: None if t is None else t.index_select(0, rows)
        ids = [self.example_ids[i] for i in rows.tolist()]
        return Batch(
            ids=self.ids.index_select(0, rows),
            mask=self.mask.index_select(0, rows),
            example_ids=tuple(ids),
            segments=pick(self.segments),
            prefix=pick(self.prefix),
            prefix_mask=pick(self.prefix_mask),
            words=pick(self.words),
        )

    def tokens_of(self, row: int) -> list[int]:
        """The real token ids of one row."""
        return self.ids[row][self.mask[row]].tolist()


Target = torch.Tensor  # (B,) long: class index, or next target-word id for seq2seq rows


@runtime_checkable
class ExplainableModel(Protocol):
    """What explainers and metrics may use of a model, and nothing else.

    ``logits`` returns (B, C) scores over classes (or the target vocabulary);
    ``embed`` the (B, T, D) input embeddings that ``logits_from_embeddings`` maps
    to the same logits, so gradients wrt embeddings are well defined;
    ``attention`` (B, T) weights that sum to 1 over real tokens. Optional: a
    ``capabilities`` set (default: the first three of ``CAPABILITIES``),
    ``attention_maps`` (``LAYER_ATTENTION``: (B, L, H, S, S) maps and each position's
    place in the model's full sequence), ``lrp_logits(embeds, batch, eps)`` (``LRP``:
    the logits, by a forward pass whose backward maps the relevance of the logits to
    that of the embeddings, ``faithbench.benchmark.core.lrp``), ``attention_vectors(batch,
    layer=None)`` (``ATTENTION_VECTORS``: (B, H, S) the attention weights the output reads
    — a Transformer's [CLS] row of one layer, per head —, (B, H, S, K) the vectors f(x_j)
    they weight and (B, T) each position's place), ``attention_leaf(batch)`` and
    ``logits_from_attention(weights, batch)`` (``ATTENTION_GRADIENT``: those (B, H, S)
    weights and the logits with given weights in their place), ``value_zeroing_maps``
    (``VALUE_ZEROING``: (B, L, S, S) value-zeroing context mixing per layer, rows summing
    to 1), ``max_rows_per_pass`` (the most rows worth forwarding at once),
    ``retokenize`` (the ``retokenize`` eraser) and ``query`` (the full-sequence position
    whose attention row the output reads: 0, an encoder's [CLS], by default; -1 for a
    decoder, which answers at its last position).
    """

    pad_id: int  # padding id (the BiLSTMs' is the zero vector)
    mask_id: int  # the unknown-word id the ``mask`` eraser substitutes
    baseline_id: int  # the id whose embedding is the reference input

    def logits(self, batch: Batch) -> torch.Tensor: ...

    def embed(self, batch: Batch) -> torch.Tensor: ...

    def logits_from_embeddings(self, embeds: torch.Tensor, batch: Batch) -> torch.Tensor: ...

    def attention(self, batch: Batch) -> torch.Tensor: ...


NAME_PATTERN = r"[a-z][a-z0-9_]{0,63}"  # explainer names and parameter keys
VERSION_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,31}"
VALUE_PATTERN = r"[A-Za-z0-9._+-]{0,64}"  # a string parameter value
TEXT_LIMIT = 2000  # characters of a citation, description or cost


@dataclass(frozen=True)
class ExplainerSpec:
    """Metadata of an explainer. Bump ``version`` whenever its outputs change.

    Names, versions and parameters match the patterns above: they become folder and
    file names, cache keys and table cells, so no path separator, markup or bracket
    can enter them (``gradient[norm=l2]@1`` as a *name* is refused, as is ``../x``).

    >>> ExplainerSpec(name="my_method", version="1.2", params=(("k", 3),)).id
    'my_method[k=3]@1.2'
    >>> ExplainerSpec(name="gradient[norm=l2]@1", version="1")
    Traceback (most recent call last):
    ...
    ValueError: explainer name 'gradient[norm=l2]@1' must match [a-z][a-z0-9_]{0,63} (lower case, digits, underscores; no brackets, separators or markup)
    """

    name: str
    version: str
    requires: frozenset[str] = frozenset()
    params: tuple[tuple[str, Any], ...] = ()
    deterministic: bool = True
    citation: str = ""
    description: str = ""
    # nominal cost per example, printable text: "1 fwd + 1 bwd", "50 fwd + 50 bwd
    # (n_steps)", "T + 1 fwd (T = tokens)"; shown by ``faithbench list``. Not part of
    # the id or any cache key; what a run measures is in each record's timing
    cost: str = ""

    def __post_init__(self):
        _match("explainer name", self.name, NAME_PATTERN,
               "lower case, digits, underscores; no brackets, separators or markup")
        _match("version", self.version, VERSION_PATTERN, "letters, digits, . _ + -")
        unknown = set(self.requires) - set(CAPABILITIES)
        if unknown:
            raise ValueError(f"requires {sorted(unknown)}: not among {CAPABILITIES}")
        for pair in self.params:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise ValueError(f"parameter {pair!r} is not a (key, value) tuple")
            _match("parameter key", pair[0], NAME_PATTERN, "as an explainer name")
            for v in pair[1] if isinstance(pair[1], tuple) else (pair[1],):
                _check_value(pair[0], v)
        for what in ("citation", "description", "cost"):
            text = getattr(self, what)
            if not isinstance(text, str) or len(text) > TEXT_LIMIT or not text.isprintable():
                raise ValueError(f"{what} must be printable text (no newlines or control "
                                 f"characters) of at most {TEXT_LIMIT} characters")

    @property
    def id(self) -> str:
        return format_id(self.name, self.params, self.version)

    def param(self, key: str) -> Any:
        return dict(self.params)[key]


def _match(what: str, value, pattern: str, hint: str) -> None:
    if not isinstance(value, str) or re.fullmatch(pattern, value) is None:
        raise ValueError(f"{what} {value!r} must match {pattern} ({hint})")


def _check_value(key: str, value) -> None:
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"parameter {key!r} = {value!r} is not finite")
        return
    _match(f"parameter {key!r} value", value, VALUE_PATTERN, "letters, digits, . _ + -")


def example_generator(rng: torch.Generator, example_id: str) -> torch.Generator:
    """The generator an explainer draws one example's random numbers from: seeded by
    the run's seed (``rng``) and the example's id, so the example gets the same draws
    alone, in any batch, at any position (``faithbench validate`` checks that)."""
    digest = hashlib.blake2b(f"{rng.initial_seed()}\x00{example_id}".encode(),
                             digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") >> 1)


def baseline_embeddings(model: ExplainableModel, batch: Batch,
                        embeds: torch.Tensor) -> torch.Tensor:
    """(B, T, D) the reference input of path methods (integrated gradients,
    GradientSHAP): the embedding of ``model.baseline_id`` at real tokens (the zero vector
    for the task models' padding id), ``embeds`` itself at padding."""
    base_ids = batch.ids.masked_fill(batch.mask, model.baseline_id)
    base = model.embed(batch.replace(ids=base_ids)).detach()
    return torch.where(batch.mask.unsqueeze(-1), base, embeds)


@runtime_checkable
class Explainer(Protocol):
    """A submission exposes one object with a ``spec`` and a batched ``explain``.

    ``explain`` returns a float tensor (B, T) aligned with ``batch.ids``; values
    at padded positions are ignored. Randomness comes only from
    ``example_generator(rng, batch.example_ids[b])``, one generator per example: an
    explainer is a deterministic function of (model, example, seed), checked alone
    and in batches of other sizes and orders.
    """

    @property
    def spec(self) -> ExplainerSpec: ...

    def explain(
        self, model: ExplainableModel, batch: Batch, target: Target, *, rng: torch.Generator
    ) -> torch.Tensor: ...


@dataclass(frozen=True)
class TaskSpec:
    """Metadata of a task; ``kind`` decides which metrics apply."""

    name: str
    version: str
    kind: str
    dataset: str  # hub id, or "generated"
    eval_split: str
    labels: tuple[str, ...]
    citation: str = ""
    has_reference: bool = False  # human or planted rationales exist
    params: tuple[tuple[str, Any], ...] = ()
    # the references are planted: tokens the labels were made to depend on, a ground
    # truth of what a model that learned the task relies on (``faithbench meta-eval``)
    ground_truth: bool = False

    def __post_init__(self):
        _one_of("task", self.name, "kind", self.kind, TASK_KINDS)

    @property
    def id(self) -> str:
        return format_id(self.name, self.params, self.version)

    def split(self, requested: str | None) -> str:
        """The split to score: ``requested``, else the task's eval split (the one
        place the default is chosen)."""
        return requested or self.eval_split


@dataclass(frozen=True)
class Example:
    """One input as the model sees it; ``reference`` marks rationale tokens, if known;
    ``segments`` tells the sentences of a pair apart (0 premise, 1 hypothesis);
    ``label`` is the gold class, or -1 where none is known; ``words`` gives the word
    index of each token where tokens are subwords (None: every token is a word)."""

    id: str
    tokens: tuple[str, ...]
    label: int
    reference: tuple[bool, ...] | None = None
    segments: tuple[int, ...] | None = None
    extras: dict | None = field(default=None, compare=False)  # carried along, e.g. e-SNLI texts
    words: tuple[int, ...] | None = None


@runtime_checkable
class DataTransform(Protocol):
    """A change to a task's data before its model is trained (e.g. ROAR's masking of
    each example's top-k tokens). ``key`` names the change by content: it enters the
    model's cache key, so a transformed model never reuses a clean one's file."""

    @property
    def key(self) -> str: ...

    def apply(self, split: str, examples: list[Example]) -> list[Example]: ...


@dataclass(frozen=True)
class DatasetOptions:
    """A user's own dataset, for the ``text`` and ``text_pair`` tasks: anything
    ``datasets`` loads (``source``: a hub id, a folder, or a JSON Lines, JSON, CSV, TSV
    or Parquet file) and the columns to read. ``labels`` fixes the label order (else the
    sorted values, or a ``ClassLabel``'s names); ``rationale`` a column of token indices
    or a 0/1 mask per token, a human rationale unless ``rationale_kind`` is "planted"
    (tokens the label was made to depend on: a ground truth ``meta-eval`` accepts).
    The generation task reads ``text`` as each prompt and ``continuation``."""

    source: str
    text: str
    label: str | None = None  # None only for the generation task
    pair: str | None = None
    labels: tuple[str, ...] | None = None
    rationale: str | None = None
    rationale_kind: str = "human"
    # the generation task: the column of each prompt's continuation (None: the model's
    # greedy continuation of ``generate`` tokens)
    continuation: str | None = None
    generate: int = 16


@dataclass(frozen=True)
class PromptOptions:
    """How a decoder classifies (``--model decoder``, or a causal ``--model-path``): the
    template around the input (``{text}``, or ``{a}`` and ``{b}`` for a pair; None: the
    task's default), and ``prompt`` (the next-token logits of one label word per class,
    ``label_words`` None: the task's label names) or ``head`` (a linear layer on the last
    position). Part of the task id."""

    template: str | None = None
    label_words: tuple[str, ...] | None = None
    classify: str = "prompt"


@dataclass(frozen=True)
class TaskOptions:
    """Run-time choices that change data or model (and so the cache key)."""

    data_dir: str | None = None
    seed: int = 0
    train_limit: int | None = None  # a small slice, for tests
    variant: str | None = None  # task-specific, e.g. the SST-2 training split
    epochs: int | None = None
    transform: DataTransform | None = None  # applied to every split before training
    masked_training: bool = False  # train with random masking (classification tasks)
    gold_out_of_range: str = "error"  # alignment gold: "drop" removes and counts such links
    model: str | None = None  # model family: None = the task's own (BiLSTM), "transformer"
    model_path: str | None = None  # a Hugging Face classifier directory to evaluate as is
    model_layers: int | None = None  # transformer family: keep the first N encoder layers
    # a BiLSTM variant of the attention debate: "uniform" (attention frozen at 1/n,
    # Wiegreffe & Pinter), "orthogonal" or "diversity" (Mohankumar et al. 2020)
    bilstm: str | None = None
    # λ of deceptive training (Pruthi et al. 2020): λ · −log(1 − the attention mass on the
    # task's impermissible tokens) added to the loss; None (or 0): the task's own model
    deceive: float | None = None
    # where the model trains and runs (``faithbench.benchmark.core.device``): a torch
    # device string, and fp32 or bf16 (the transformer family); the CPU at fp32 changes
    # no key, another device or bf16 trains another model
    device: str = "cpu"
    precision: str = "fp32"
    half_weights: bool = False  # trained weights rounded to float16 (``TrainConfig``)
    dataset: DatasetOptions | None = None  # the text and text_pair tasks' data
    # a release folder whose model (named by the content key) is loaded instead of
    # training one: ``submit --published`` (``core.models.lifecycle.from_release``)
    published: str | None = None
    prompt: PromptOptions | None = None  # a decoder's template and read-out

    @property
    def reads_training_split(self) -> bool:
        """Whether the model needs the training data: a ``--model-path`` checkpoint is
        evaluated as it is, so a reader may skip its training split (SST-2's 67k
        phrases take longer to read than the checkpoint takes to score 1,821 sentences)."""
        return self.model_path is None


@runtime_checkable
class PreparedTask(Protocol):
    """One task with its data loaded and its model trained (or loaded from the cache):
    all that an evaluation session, and so the runner and every verb, may use.

    ``checkpoint`` is the hash of the weights (records name a model by it);
    ``cache_key`` the hash of what training reads (the train and validation data,
    configs, seed) that named the cached weights: evaluating another test split reuses them;
    ``n_outputs`` the size of the model's output (classes, or a target vocabulary).
    ``splits`` every split's examples; ``checkpoint_file`` the cached weights (None
    for a checkpoint evaluated as is), ``history`` the training epochs' losses and
    scores, ``loaded_from_cache`` whether this process trained it: what retraining
    (``core.retrain``) reads.
    """

    spec: TaskSpec
    model: Any  # implements ExplainableModel
    checkpoint: str
    cache_key: str
    data_fingerprint: str
    config: dict
    accuracy: dict[str, float]
    n_outputs: int
    splits: dict[str, list]
    checkpoint_file: Path | None
    history: list
    loaded_from_cache: bool

    def examples(self, split: str, limit: int | None = None) -> list[Example]: ...

    def batches(self, examples: Sequence[Example], batch_size: int
                ) -> Iterator[tuple[Batch, torch.Tensor, torch.Tensor | None]]: ...

    def targets(self, examples: Sequence[Example], base_probs: torch.Tensor) -> Target:
        """(E,) what is explained for each example (the predicted class of a classifier,
        the gold next word of an alignment row)."""
        ...

    def examples_from_rows(self, path: str, rows: list[dict]) -> list[Example]:
        """Examples of this task's type from the rows of a user's file (``id``, ``tokens``,
        and whatever else the type needs), with errors that name file, line and field."""
        ...

    def group_of(self, example: Example) -> str:
        """The unit a corpus-level metric's statistics are summed over and resampled by
        (the example itself for a classifier; the sentence pair of an alignment row)."""
        ...


@runtime_checkable
class Task(Protocol):
    """A registered task: a spec, and how to get a trained model on its data."""

    spec: TaskSpec

    def prepare(self, options: TaskOptions = TaskOptions(), *, progress: bool = True
                ) -> PreparedTask: ...

    def model_file(self, options: TaskOptions) -> Path:
        """Where ``prepare(options)`` keeps (or finds) its trained weights."""
        ...


@dataclass(frozen=True)
class MetricSpec:
    """Metadata of a metric. ``direction``: "higher" or "lower" is more faithful
    (or more plausible for the plausibility family).

    ``aggregation`` None: the value is the mean of per-example values. Otherwise the
    metric is corpus-level: its outputs carry per-example ``stats`` and the value is
    ``aggregation`` of their sums. ``needs_training``: the metric retrains models
    (ROAR) and gets a ``TrainingInput`` instead of batches; ``needs_explainer``: it runs
    the explainer again on other models (the sanity checks), and gets one too.
    """

    name: str
    version: str
    direction: str
    kinds: frozenset[str]
    params: tuple[tuple[str, Any], ...] = ()
    family: str = "faithfulness"  # or plausibility, descriptive, sanity; never mixed in rankings
    needs_reference: bool = False
    citation: str = ""
    aggregation: Aggregation | None = None
    needs_training: bool = False
    needs_explainer: bool = False

    def __post_init__(self):
        _one_of("metric", self.name, "direction", self.direction, DIRECTIONS)
        _one_of("metric", self.name, "family", self.family, FAMILIES)
        for kind in sorted(self.kinds):
            _one_of("metric", self.name, "kind", kind, TASK_KINDS)

    @property
    def id(self) -> str:
        return format_id(self.name, self.params, self.version)

    def param(self, key: str) -> Any:
        return dict(self.params)[key]

    @property
    def depends_on_examples(self) -> bool:
        """Whether an example's value depends on the other examples scored with it: a
        plausibility metric whose cut ``k_frac`` is left to ``MetricInput.reference_rate``
        (the rationale rate of every example scored), so a subset of a split scores its
        examples otherwise than the whole split does."""
        return self.needs_reference and "k_frac" in dict(self.params) \
            and dict(self.params)["k_frac"] is None


def _one_of(what: str, name: str, field_: str, value: str, known: tuple[str, ...]) -> None:
    """A spec names only values of the shared lists (``faithbench.benchmark.core.names``)."""
    if value not in known:
        raise ValueError(f"{what} {name!r}: unknown {field_} {value!r} (known: {', '.join(known)})")


@dataclass(frozen=True)
class MetricInput:
    """Everything a metric sees for one batch of examples.

    scores: (B, T) explainer scores; target: (B,) the explained target (the
    predicted class ŷ of a classifier in a run); base_probs: (B, C) p(·|x) computed
    once per model; perturber: the engine that forwards perturbed variants (and shares
    identical variants between metrics and explainers); reference: (B, T) bool
    rationale, or for alignment rows (B, T) int8 gold grades of the source words
    (2 sure link to the row's target word, 1 possible only, 0 none), or None; reference_rate: the mean over *all* examples being scored of
    |reference| / n — a dataset-level statistic (ERASER cuts soft scores at one
    dataset-level k), None where there are no references; log_target: drops are in
    log p(target) (a generation row, ``target_drops``).
    """

    batch: Batch
    scores: torch.Tensor
    target: torch.Tensor
    base_probs: torch.Tensor
    perturber: Perturber
    reference: torch.Tensor | None = None
    reference_rate: float | None = None
    # a generation row's metrics compare log p(target) instead of p(target)
    log_target: bool = False


@dataclass(frozen=True)
class MetricOutput:
    """values: (B,) float per-example values; flags: named (B,) bool per-example
    facts the record counts (e.g. ``never_flipped``); stats: (B, K) per-example
    sufficient statistics of a corpus-level metric (None for a mean); curve: (B, V) the
    per-step values an erasure metric averages (the drop at k = 1..V tokens removed, or
    at each bin), NaN where an example has no such step — the points of its curve."""

    values: torch.Tensor
    flags: dict[str, torch.Tensor] = field(default_factory=dict)
    stats: torch.Tensor | None = None
    curve: torch.Tensor | None = None


class Metric(Protocol):
    spec: MetricSpec

    def compute(self, inp: MetricInput) -> MetricOutput: ...


class Explanations(Protocol):
    """An explainer's scores of a session's examples, one float per token."""

    scores: list[list[float]]


class ModelSession(Protocol):
    """What a retraining metric reads of the evaluated model's session
    (``faithbench.benchmark.session.EvaluationSession``): its prepared model, split and
    examples, the same model on another split, and cached explanations."""

    prepared: PreparedTask
    split: str | None
    examples: list[Example]

    def on_split(self, split: str, limit: int | None = None) -> ModelSession: ...

    def explain(self, explainer: Explainer, *, cache: bool = True) -> Explanations: ...

    def explain_on(self, explainer: Explainer, model: Any = None, *,
                   prepared: PreparedTask | None = None) -> list[list[float]]:
        """The explainer's scores of the same examples and targets on another model,
        through the session's guarded caller (the sanity checks)."""
        ...


@dataclass(frozen=True)
class TrainingInput:
    """What a metric that retrains (``spec.needs_training``, e.g. ROAR) or explains
    other models (``spec.needs_explainer``: the sanity checks) is handed, and nothing
    else: the task and the options of the evaluated model, the session of that model
    (its examples, targets, explanations: ``session.explain``; the explainer on another
    model: ``session.explain_on``), the explainer under test, and
    ``retrain(transform, seed)`` (``core.retrain.Retrainer``), which
    returns a ``PreparedTask`` trained on transformed data through the run's executor
    (cached by content key like every model)."""

    task: Task
    options: TaskOptions
    session: ModelSession
    explainer: Explainer
    scores: list[list[float]]  # the explainer's scores of the session's examples
    retrain: Retrainer


class TrainingMetric(Protocol):
    spec: MetricSpec

    def evaluate(self, inp: TrainingInput) -> MetricOutput: ...


@dataclass(frozen=True)
class SimpleMetric:
    """A metric as a spec plus a pure per-batch function ``fn(inp, **params)`` that
    returns (B,) values, (values, flags), or a MetricOutput (with ``stats`` for a
    corpus-level metric)."""

    spec: MetricSpec
    fn: Any = field(repr=False)

    def compute(self, inp: MetricInput) -> MetricOutput:
        out = self.fn(inp, **dict(self.spec.params))
        if isinstance(out, MetricOutput):
            return out
        if isinstance(out, tuple):
            return MetricOutput(out[0].double(), dict(out[1]))
        return MetricOutput(out.double())


# -- reading a Transformer's attention (models with LAYER_ATTENTION) ----------------

def token_attention(maps: torch.Tensor, index: torch.Tensor, mask: torch.Tensor, *,
                    layer: int = -1, heads: str = "mean", query: int = 0) -> torch.Tensor:
    """(B, T) attention of one layer's ``query`` row (0: [CLS]; -1: a decoder's last
    position, the model's ``query``) over the real pieces, heads averaged (or their
    maximum), renormalized to sum to 1 over the pieces (the mass on special tokens and a
    decoder's template tokens is dropped)."""
    per_layer = maps[:, layer]  # (B, H, S, S)
    row = per_layer[:, :, query, :]  # (B, H, S)
    row = row.mean(1) if heads == "mean" else row.max(1).values
    return over_pieces(row, index, mask)


def over_pieces(row: torch.Tensor, index: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T) values of a (B, S) full-sequence row at each batch position's place,
    renormalized over the real pieces; zero at padding."""
    picked = row.gather(1, index.clamp(min=0)) * mask
    total = picked.sum(1, keepdim=True)
    return torch.where(total > 0, picked / total.clamp(min=1e-30), picked)
