"""What a run will do, as data: the configuration, and the frozen units it implies.

A unit is one (task, model seed, explainer, metric) on one split and example limit.
Its key (``unit_key``) hashes everything that changes its result: the model's weights
hash (``checkpoint``), the seed (the explainer's generator: one checkpoint evaluated
with ``--seeds 0 1``, as ``--model-path`` is, gives two units), the data fingerprint
(replacing a test file changes the examples but not the weights), the split and the
limit, the explainer and the metric. Units are listed once a model is prepared
(``units``), and "done" is read off the results file by key. The explanation cache
under ``<out>/explanations`` is keyed the same way, with "explanations" as the metric.

Schema 1 keys hashed only checkpoint, explainer, metric, split and limit: a result
folder written before this key does not resume (its units run again, appended
beside the old records); its records still load and rank.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from dataclasses import fields as dataclass_fields

from faithbench.benchmark.core.api import DatasetOptions, PromptOptions, TaskOptions
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.executor import Executor, make_executor
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.stats import SEED as BOOTSTRAP_SEED

DEFAULT_OUT = "faithbench-results"


@dataclass(frozen=True)
class Seeds:
    """Every seed of one unit, in one place. ``model`` decides the weights (and, as
    the data's seed, the epoch order and ROAR's random masks); ``explainer`` seeds a
    stochastic explainer's generator, the model seed unless set (so ids and keys
    written before it existed stay); ``bootstrap`` seeds the CIs' resampling.

    >>> Seeds(3).as_dict(), Seeds(3, explainer=7).explainer_seed
    ({'model': 3, 'explainer': 3, 'bootstrap': 0}, 7)
    """

    model: int = 0
    explainer: int | None = None
    bootstrap: int = BOOTSTRAP_SEED

    @property
    def explainer_seed(self) -> int:
        return self.model if self.explainer is None else self.explainer

    def as_dict(self) -> dict:
        return {"model": self.model, "explainer": self.explainer_seed,
                "bootstrap": self.bootstrap}


@dataclass(frozen=True)
class Evaluation:
    """What decides a unit's result beside its task, model seed, explainer and metric:
    the model's training options and which examples are scored. Records carry it
    (``provenance.config.run``); nothing here changes with where or how fast a run
    goes, or where it writes."""

    data_dir: str | None = None
    variant: str | None = None
    gold_out_of_range: str = "error"
    train_limit: int | None = None
    epochs: int | None = None
    masked_training: bool = False
    model: str | None = None
    model_path: str | None = None
    model_layers: int | None = None
    bilstm: str | None = None  # a BiLSTM variant of the attention debate (``BILSTM_VARIANTS``)
    deceive: float | None = None  # λ of deceptive training (Pruthi et al. 2020)
    split: str | None = None
    limit: int | None = None
    sample: int | None = None
    sample_seed: int = 0
    explainer_seed: int | None = None
    precision: str = "fp32"  # bf16: the transformer family's passes under autocast
    half_weights: bool = False  # trained weights rounded to float16 (the published models)
    dataset: DatasetOptions | None = None  # the text and text_pair tasks' own data
    published: str | None = None  # a release folder: its models, never trained here
    prompt: PromptOptions | None = None  # a decoder's template and read-out

    def as_dict(self) -> dict:
        d = asdict(self)
        # at their defaults left out: records written before they existed stay the same
        for name, default in (("precision", "fp32"), ("half_weights", False),
                              ("dataset", None), ("published", None), ("bilstm", None),
                              ("deceive", None), ("prompt", None)):
            if d[name] == default:
                del d[name]
        return d

    def task_options(self, seed: int, device: str = "cpu") -> TaskOptions:
        """What the task's model is prepared from, for model seed ``seed``, on
        ``device`` (``Execution.device``)."""
        return TaskOptions(data_dir=self.data_dir, seed=seed, train_limit=self.train_limit,
                           variant=self.variant, epochs=self.epochs,
                           gold_out_of_range=self.gold_out_of_range,
                           masked_training=self.masked_training, model=self.model,
                           model_path=self.model_path, model_layers=self.model_layers,
                           bilstm=self.bilstm, deceive=self.deceive, device=device, precision=self.precision,
                           half_weights=self.half_weights, dataset=self.dataset,
                           published=self.published, prompt=self.prompt)


@dataclass(frozen=True)
class Execution:
    """How a run goes, which never changes a result's value (batching and the device
    change float32 rounding only; a plugin's budget and confinement decide whether it
    fails). ``device`` is resolved (``cpu``, ``cuda:0``), never ``auto``."""

    batch_size: int = 32
    chunk_size: int = 512
    time_budget_s: float = 5.0
    isolation: str = "auto"
    sandbox: bool = False
    plugin_memory_gib: float = 8.0
    executor: str = "in-process"
    workers: int | None = None
    address: str | None = None
    progress: bool = True
    device: str = "cpu"
    # score a model the gate refuses (its records say so, so the value is marked)
    allow_weak_model: bool = False

    def job_executor(self) -> Executor:
        """Where retraining jobs run (``--executor``, ``--workers``, ``--address``)."""
        return make_executor(self.executor, workers=self.workers, address=self.address,
                             device=self.device)


@dataclass(frozen=True)
class RunConfig:
    tasks: tuple[str, ...] = ("synthetic",)
    explainers: tuple[str, ...] = ()  # reference names, plugin paths, modules or entry points; () = all reference
    metrics: tuple[str, ...] = ()  # () = every metric that applies to the task
    data_dir: str | None = None
    out: str = DEFAULT_OUT
    fresh: bool = False
    seeds: tuple[int, ...] = (0,)
    split: str | None = None  # None = the task's eval split (TaskSpec.split)
    limit: int | None = None  # the first N examples of the split; None = the whole split
    sample: int | None = None  # instead: N examples drawn at random (seeded), in split order
    sample_seed: int = 0  # the draw's seed (``random.Random``)
    variant: str | None = None  # task-specific data variant (e.g. SST-2 training split)
    gold_out_of_range: str = "error"  # alignment gold links outside a sentence: error or drop
    train_limit: int | None = None
    epochs: int | None = None
    masked_training: bool = False  # task models trained with random masking (Madsen et al.)
    model: str | None = None  # classification model family: None/bilstm, transformer
    model_path: str | None = None  # a Hugging Face classifier directory, evaluated as is
    model_layers: int | None = None  # transformer family: the first N encoder layers only
    bilstm: str | None = None  # uniform, orthogonal or diversity: a BiLSTM of the debate
    deceive: float | None = None  # λ of deceptive training on a shortcut task (Pruthi et al.)
    executor: str = "in-process"  # where retraining jobs run: in-process, pool or ray
    workers: int | None = None  # pool size / local Ray CPUs (None: all cores)
    address: str | None = None  # a Ray cluster's address (None: start a local one)
    batch_size: int = 32  # examples per explain call and per metric call
    chunk_size: int = 512  # rows per forward pass in the perturbation engine
    time_budget_s: float = 5.0  # a plugin's, per example of <= 32 tokens; scaled with length
    isolation: str = "auto"  # auto: plugins in workers, references here; process: all in workers; none: API objects here
    sandbox: bool = False  # plugin workers inside bubblewrap: no network, read-only environment
    plugin_memory_gib: float = 8.0  # a plugin worker's address-space limit
    progress: bool = True
    write_leaderboard: bool = True
    notes: str = ""
    explainer_seed: int | None = None  # the explainers' generator; None: each model seed
    device: str = "cpu"  # where models train and run: a resolved torch device (--device)
    precision: str = "fp32"  # bf16: the transformer family under autocast (--precision)
    half_weights: bool = False  # trained weights rounded to float16 (--half-weights)
    allow_weak_model: bool = False  # score a model the gate refuses, marked (core.gate)
    dataset: DatasetOptions | None = None  # --dataset and its columns (tasks text, text_pair)
    published: str | None = None  # a release folder whose models are loaded (submit --published)
    prompt: PromptOptions | None = None  # --template, --label-words, --classify (decoders)

    def __post_init__(self):
        for name in ("limit", "sample"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise InputError(f"--{name}: expected a whole number >= 1, got {value!r}")
        if self.sandbox and self.device.split(":")[0] != "cpu":
            raise InputError(f"--sandbox with --device {self.device}: the sandbox's private "
                             "/dev holds no GPU, so a sandboxed plugin could not reach the "
                             "model; give --device cpu, or leave out --sandbox")
        if self.limit is not None and self.sample is not None and self.sample >= self.limit:
            raise InputError(f"--sample {self.sample} draws from the first --limit "
                             f"{self.limit} examples: give a sample smaller than the limit, "
                             "or one of the two")

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def evaluation(self) -> Evaluation:
        """The options that decide results (what records carry)."""
        return Evaluation(**{f: getattr(self, f) for f in _fields(Evaluation)})

    @property
    def execution(self) -> Execution:
        """The options that decide only how the run goes."""
        return Execution(**{f: getattr(self, f) for f in _fields(Execution)})

    @classmethod
    def of(cls, evaluation: Evaluation, execution: Execution, *, out: str) -> RunConfig:
        """The configuration of a job that needs only these: e.g. a sweep's explain job
        on a worker, which explains into ``out`` (no task lists, notes or leaderboard)."""
        return cls(out=out, write_leaderboard=False,
                   **{f: getattr(evaluation, f) for f in _fields(Evaluation)},
                   **asdict(execution))

    def seeds_of(self, model_seed: int) -> Seeds:
        """The seeds of the units of model seed ``model_seed``."""
        return Seeds(model_seed, explainer=self.explainer_seed)

    @property
    def selection(self) -> int | dict | None:
        """Which examples of the split are scored, as keys hash it: None (all), N (the
        first N; the value schema-1 keys hashed), {"sample": N, "seed": S}, or that with
        "limit": L (N drawn from the first L)."""
        if self.sample is not None:
            drawn = {"sample": self.sample, "seed": self.sample_seed}
            return drawn if self.limit is None else {**drawn, "limit": self.limit}
        return self.limit


def _fields(cls) -> list[str]:
    return [f.name for f in dataclass_fields(cls)]


def select(prepared, split: str, config: RunConfig) -> list:
    """The examples of ``split`` that ``config`` scores: all, the task's first ``limit``
    (``prepared.examples``: alignment counts sentence pairs), or ``sample`` drawn without
    replacement by ``random.Random(sample_seed)`` among the groups (``group_of``: the
    rows of one sentence pair stay together) of all of them, or of the first ``limit``
    where both are given, kept in split order. On a file sorted by label the first N are
    a biased sample; the draw is not."""
    if config.sample is None:
        return prepared.examples(split, config.limit)
    examples = prepared.examples(split, config.limit)
    groups = list(dict.fromkeys(prepared.group_of(e) for e in examples))
    if config.sample >= len(groups):
        return examples
    chosen = set(random.Random(config.sample_seed).sample(groups, config.sample))
    return [e for e in examples if prepared.group_of(e) in chosen]


@dataclass(frozen=True)
class Unit:
    """One result to compute: ``key`` names it in ``results.jsonl``."""

    task: str  # task name
    seed: int  # model seed
    explainer: str  # canonical explainer id
    metric: str  # canonical metric id
    split: str
    limit: int | dict | None  # RunConfig.selection
    key: str


def models(config: RunConfig) -> list[tuple[str, int]]:
    """(task, model seed) of every model the run evaluates, in run order."""
    return [(task, seed) for task in config.tasks for seed in config.seeds]


def planned(config: RunConfig, explainers: int, metrics: Callable[[str], int]) -> list[int]:
    """How many units each model of ``models(config)`` has, as known before it is
    prepared: ``explainers`` x the task's ``metrics(task)`` (a run's progress total).
    Once a model is prepared, ``units`` lists its own, which may be fewer (explainers
    the model cannot serve, metrics whose references its examples lack).

    >>> planned(RunConfig(tasks=("a", "b"), seeds=(0, 1)), 3, {"a": 2, "b": 5}.get)
    [6, 6, 15, 15]
    """
    return [explainers * metrics(task) for task, _ in models(config)]


def units(config: RunConfig, task: str, seed: int, checkpoint: str, split: str,
          explainers: list[str], metrics: list[str], *, data: str) -> list[Unit]:
    """Every unit of one model, explainer by explainer (each explainer's metrics share
    its explanations), metrics in the given order; ``data`` is the task's data
    fingerprint."""
    return [Unit(task, seed, e, m, split, config.selection,
                 unit_key(checkpoint, e, m, split, config.selection, seed=seed, data=data,
                          explainer_seed=config.explainer_seed, precision=config.precision))
            for e in explainers for m in metrics]


def unit_key(checkpoint: str, explainer_id: str, metric_id: str, split: str,
             limit: int | dict | None, *, seed: int, data: str,
             explainer_seed: int | None = None, precision: str = "fp32") -> str:
    """Content key of one unit (see the module docstring). The weights hash alone does
    not name the examples (same weights, another test file) nor the explainer's seed
    (a checkpoint from disk is the same for every seed), so both are hashed beside it.
    An explainer seed other than the model seed (``Seeds``) is hashed too; the default
    adds nothing, so keys written before it existed stay; so does bf16 (the same weights
    at another precision: other values), which fp32 leaves out."""
    fields = {"checkpoint": checkpoint, "seed": seed, "data": data, "explainer": explainer_id,
              "metric": metric_id, "split": split, "limit": limit}
    if explainer_seed is not None and explainer_seed != seed:
        fields["explainer_seed"] = explainer_seed
    if precision != "fp32":
        fields["precision"] = precision
    return content_hash(fields)
