"""Your own dataset as a task: ``text`` (one text per example) and ``text_pair`` (two,
as in NLI), over anything ``datasets`` loads, read by its columns
(``faithbench.tasks.own_data``: sources, splits, tokens, labels, rationales, errors).

The task id names the dataset's content and the columns read, so two datasets (or two
readings of one) never share a suite or a cached model::

    text[data=3f9a0c1d2b4e;label=stars;text=review]@1
    text_pair[data=...;label=gold;pair=hypothesis;text=premise]@1

Models: the BiLSTM with additive attention of the sentiment task (``text``) or the
premise/hypothesis BiLSTM of the NLI task (``text_pair``), trained here with their
settings and a seed like every model, through the model gate; or ``--model
transformer`` (MiniLM fine-tuned here), or ``--model-path DIR`` (a Hugging Face
classifier fine-tuned on the data, evaluated as it is: its labels must be the data's).
Scored split: test; validation drives early stopping and the gate.

A ``--rationale-column`` gives the plausibility metrics their references (a human
rationale); with ``--rationale-kind planted`` it is a ground truth (tokens the label
was made to depend on) and ``faithbench meta-eval`` accepts the task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from faithbench.benchmark.core.api import (
    CLASSIFICATION,
    PAIR_CLASSIFICATION,
    DatasetOptions,
    TaskOptions,
    TaskSpec,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.models.pair_classifier import PairAttentionClassifier, PairConfig
from faithbench.tasks import nli, sentiment
from faithbench.tasks.classification import ClassificationTask, ReadyTask, data_fingerprint
from faithbench.tasks.own_data import OwnData, read_dataset

SPEC = TaskSpec(
    name="text",
    version="1",
    kind=CLASSIFICATION,
    dataset="your own: --dataset FILE, FOLDER or hub id",
    eval_split="test",
    labels=(),
    citation="",
    has_reference=True,  # where --rationale-column is given
)
PAIR_SPEC = replace(SPEC, name="text_pair", kind=PAIR_CLASSIFICATION)
READ_CACHE = 4  # datasets kept read in one process (a run prepares each seed's model)


@dataclass
class TextTask:
    """A task whose spec (labels, id) comes from the data: ``concrete(options)`` is the
    classification task of one dataset, which ``prepare`` and ``model_file`` use."""

    spec: TaskSpec
    model: ClassificationTask  # model and training settings; its spec and reader unused
    _read: dict = field(default_factory=dict, repr=False)

    @property
    def pair(self) -> bool:
        return self.spec.kind == PAIR_CLASSIFICATION

    def prepare(self, options: TaskOptions | None = None, *, progress: bool = True
                ) -> ReadyTask:
        options = options or TaskOptions()
        return self.concrete(options).prepare(options, progress=progress)

    def model_file(self, options: TaskOptions) -> Path:
        return self.concrete(options).model_file(options)

    def check_data(self, options: TaskOptions) -> None:
        """Read and check the dataset ``options`` names (kept: ``_data``), training
        nothing: a bad row stops a run before it writes anything."""
        self.concrete(options)

    def concrete(self, options: TaskOptions) -> ClassificationTask:
        """The task of the dataset ``options`` names, its data read and checked."""
        dataset = self.dataset_of(options)
        data = self._data(dataset, train=options.reads_training_split)
        spec = replace(self.spec, labels=data.labels, has_reference=data.has_rationale,
                       dataset=dataset.source, params=spec_params(dataset, data),
                       ground_truth=dataset.rationale_kind == "planted")
        splits = data.splits
        return replace(self.model, spec=spec,
                       read=lambda _: {name: list(rows) for name, rows in splits.items()})

    def dataset_of(self, options: TaskOptions) -> DatasetOptions:
        """``options.dataset``, checked against the task: a pair column for
        ``text_pair`` only."""
        d = options.dataset
        if d is None:
            pair = " --pair-column C2" if self.pair else ""
            raise InputError(f"task {self.spec.name} reads your own dataset: give --dataset "
                             f"FILE_FOLDER_OR_HUB_ID --text-column C{pair} --label-column L")
        if d.label is None:
            raise InputError(f"task {self.spec.name} reads labels: give --label-column L")
        if d.continuation is not None:
            raise InputError(f"--continuation-column {d.continuation}: the generation task "
                             f"reads continuations; task {self.spec.name} reads labels")
        if self.pair and d.pair is None:
            raise InputError("task text_pair needs --pair-column (the second text of each "
                             "pair); for one text per example use --tasks text")
        if not self.pair and d.pair is not None:
            raise InputError(f"--pair-column {d.pair}: the text task reads one text per "
                             "example; for pairs use --tasks text_pair")
        return d

    def _data(self, dataset: DatasetOptions, *, train: bool) -> OwnData:
        """The dataset read once per process (and file state): every seed's model and
        every verb of one run read the same rows."""
        key = (dataset, train, _stamp(dataset.source))
        if key not in self._read:
            while len(self._read) >= READ_CACHE:
                self._read.pop(next(iter(self._read)))
            self._read[key] = read_dataset(dataset, train=train)
        return self._read[key]


def _stamp(source: str) -> tuple:
    """What changes when a local dataset does: each file's size and modification time."""
    path = Path(source).expanduser()
    files = sorted(path.iterdir()) if path.is_dir() else [path] if path.is_file() else []
    return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files if p.is_file())


SAFE = re.compile(r"[^A-Za-z0-9._+-]")


def spec_params(dataset: DatasetOptions, data: OwnData) -> tuple[tuple[str, str], ...]:
    """The id's parameters: the content fingerprint of the examples and label names (12
    hex digits), and the columns read (characters an id cannot hold become ``_``).

    >>> d = DatasetOptions("x.csv", "review text", "stars", rationale="why")
    >>> [k for k, _ in spec_params(d, OwnData({"test": []}, ("1", "2"), {}, True))]
    ['data', 'text', 'label', 'rationale']
    >>> dict(spec_params(d, OwnData({"test": []}, ("1", "2"), {}, True)))["text"]
    'review_text'
    """
    fingerprint = content_hash([data_fingerprint(data.splits), list(data.labels)])[:12]
    columns = [("text", dataset.text), ("pair", dataset.pair), ("label", dataset.label),
               ("rationale", dataset.rationale)]
    params = [("data", fingerprint)] + [(k, SAFE.sub("_", v)[:32]) for k, v in columns if v]
    if dataset.rationale and dataset.rationale_kind != "human":
        params.append(("truth", dataset.rationale_kind))
    return tuple(params)


TEXT = TextTask(SPEC, ClassificationTask(
    spec=SPEC, read=lambda _: {}, model_config=sentiment.TASK.model_config,
    train_config=replace(sentiment.TASK.train_config, epochs=10, batch_size=32), min_freq=1))
TEXT_PAIR = TextTask(PAIR_SPEC, ClassificationTask(
    spec=PAIR_SPEC, read=lambda _: {}, model_class=PairAttentionClassifier,
    config_class=PairConfig, model_config=nli.TASK.model_config,
    train_config=nli.TASK.train_config, min_freq=nli.TASK.min_freq))
