"""The model gate: a model that learned nothing is never explained.

Erasure metrics on a model at chance measure noise, and the numbers look like any
other. So before anything is explained, every model a session opens is checked on a
split it was not trained on, against the model that learned nothing:

- a classifier: its validation accuracy, with its 95 % Wilson interval
  (``stats.wilson``), against the majority-class rate of that split. It passes when
  the interval's low end reaches ``majority + ACCURACY_MARGIN``.
- the alignment task's encoder-decoder: its held-out perplexity (teacher-forced), with
  a bootstrap interval over sentence pairs, against a unigram model of the training
  targets (what a decoder that reads neither source nor prefix can do) on the same
  words. It passes when the interval's high end is at most
  ``unigram × exp(-PERPLEXITY_MARGIN)``.

The baseline is taken as fixed (a property of the split), the model's figure as the
estimate; a model whose true accuracy sits exactly at ``majority + margin`` passes in
about 2.5 % of validation draws (``tests/test_gate.py`` measures it), one at chance
almost never. A refused model stops the run with both numbers and what to change;
``--allow-weak-model`` scores it anyway and every record says so
(``ModelCheck.allowed``), so the entry is marked wherever it is shown.

``Budget`` says what made the model (family, training rows, data variant, epochs):
every record carries it, and the board shows it beside the suite.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.stats import ALPHA, Aggregation, corpus_bootstrap, wilson

log = logging.getLogger(__name__)

ACCURACY_MARGIN = 0.05  # accuracy points above the majority-class rate
PERPLEXITY_MARGIN = 0.05  # nats per word below the unigram model (perplexity x 0.95)
FAMILY_NAMES = {"bilstm": "BiLSTM", "transformer": "MiniLM fine-tuned", "hf": "checkpoint",
                "seq2seq": "GRU encoder-decoder", "decoder": "decoder trained here",
                "encoder_decoder": "Transformer encoder-decoder"}


class WeakModelError(InputError):
    """The model gate refused a model (exit 2, as bad input: the options made it)."""


@dataclass(frozen=True)
class ModelCheck:
    """One model's figure against the baseline of a model that learned nothing.

    ``measure`` is "accuracy" (higher is better: passes when ``ci_low >= threshold``)
    or "perplexity" (lower is better: passes when ``ci_high <= threshold``);
    ``baseline`` is the majority-class rate or the unigram perplexity, ``threshold``
    the baseline moved by the margin. ``allowed``: refused, but scored anyway
    (``--allow-weak-model``)."""

    measure: str
    split: str
    n: int
    value: float
    ci_low: float
    ci_high: float
    baseline: float
    baseline_name: str
    threshold: float
    passed: bool
    allowed: bool = False

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ModelCheck:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def describe(self) -> str:
        """>>> accuracy_check([0] * 51 + [1] * 49, 70, "validation").describe()
        'validation accuracy 0.700 [0.604, 0.781] (n 100), majority class 0.510'
        """
        fmt = _fmt(self.measure)
        return (f"{self.split} {self.measure} {fmt(self.value)} [{fmt(self.ci_low)}, "
                f"{fmt(self.ci_high)}] (n {self.n:,}), {self.baseline_name} "
                f"{fmt(self.baseline)}")

    def short(self) -> str:
        """The two numbers a board's reader needs.

        >>> accuracy_check([0] * 51 + [1] * 49, 51, "validation").short()
        'validation 0.51, majority 0.51'
        """
        digits = ".2f" if self.measure == "accuracy" else ".1f"
        what = self.split if self.measure == "accuracy" else f"{self.split} perplexity"
        return (f"{what} {self.value:{digits}}, {self.baseline_name.split()[0]} "
                f"{self.baseline:{digits}}")


def _fmt(measure: str):
    return (lambda x: f"{x:.3f}") if measure == "accuracy" else (lambda x: f"{x:.1f}")


def accuracy_check(labels: Sequence[int], correct: int, split: str, *,
                   margin: float = ACCURACY_MARGIN, alpha: float = ALPHA) -> ModelCheck:
    """A classifier's ``correct`` of the gold ``labels`` of ``split``, against the share
    of the most frequent label.

    >>> c = accuracy_check([0] * 51 + [1] * 49, 70, "validation")
    >>> c.passed, c.threshold
    (True, 0.56)
    >>> accuracy_check([0] * 51 + [1] * 49, 55, "validation").passed
    False
    """
    n = len(labels)
    if n == 0:
        raise InputError(f"the model gate needs labelled {split} examples; {split} has none")
    majority = Counter(labels).most_common(1)[0][1] / n
    low, high = wilson(correct, n, alpha=alpha)
    threshold = round(majority + margin, 12)
    return ModelCheck("accuracy", split, n, correct / n, low, high, majority, "majority class",
                      threshold, low >= threshold)


PER_WORD = Aggregation(("nll", "words"), (1.0, 0.0), (0.0, 1.0))  # mean nats per word


def perplexity_check(model_nll: Sequence[float], unigram_nll: Sequence[float],
                     words: Sequence[int], split: str, *, margin: float = PERPLEXITY_MARGIN,
                     alpha: float = ALPHA) -> ModelCheck:
    """A language model's summed negative log-likelihood per sentence (nats) against a
    unigram model's on the same ``words`` per sentence; the interval is a bootstrap over
    sentences of the mean nats per word, exponentiated.

    >>> c = perplexity_check([2.0, 4.0], [6.0, 12.0], [2, 4], "held-out")
    >>> round(c.value, 3), round(c.baseline, 3), c.passed
    (2.718, 20.086, True)
    """
    stats = np.column_stack([np.asarray(model_nll, float), np.asarray(words, float)])
    est = corpus_bootstrap(stats, PER_WORD, alpha=alpha)
    baseline = math.exp(float(np.sum(unigram_nll)) / float(np.sum(words)))
    threshold = baseline * math.exp(-margin)
    return ModelCheck("perplexity", split, len(words), math.exp(est.mean),
                      math.exp(est.ci_low), math.exp(est.ci_high), baseline, "unigram model",
                      threshold, math.exp(est.ci_high) <= threshold)


@dataclass(frozen=True)
class Budget:
    """What made a model: its family, the training rows and data variant, the most
    epochs it could train and those it trained (early stopping keeps the best);
    ``source``: a checkpoint's folder or the release a model came from."""

    family: str
    variant: str | None = None
    train_rows: int | None = None
    train_limit: int | None = None
    epochs: int | None = None
    epochs_trained: int | None = None
    source: str | None = None

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict) -> Budget:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def describe(self) -> str:
        """>>> Budget("bilstm", "phrases", 3000, 3000, 2, 2).describe()
        'BiLSTM on 3,000 training rows (phrases, --train-limit 3000), 2 of at most 2 epochs'
        >>> Budget("hf", source="my-model").describe()
        'checkpoint my-model (not trained here)'
        """
        name = FAMILY_NAMES.get(self.family, self.family)
        if self.family == "hf":
            return f"{name} {self.source} (not trained here)"
        text = name + (f" on {self.train_rows:,} training rows" if self.train_rows else "")
        how = [x for x in (self.variant, self.train_limit and f"--train-limit {self.train_limit}")
               if x]
        text += f" ({', '.join(how)})" if how else ""
        if self.epochs_trained is not None:
            text += f", {self.epochs_trained} of at most {self.epochs} epochs"
        elif self.epochs is not None:
            text += f", at most {self.epochs} epochs"
        return text + (f", from {self.source}" if self.source else "")


@dataclass(frozen=True)
class ModelReport:
    """A model's budget and its check (None where the task has no gate)."""

    budget: Budget
    check: ModelCheck | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"budget": self.budget.as_dict()}
        if self.check is not None:
            d["check"] = self.check.as_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ModelReport:
        check = d.get("check")
        return cls(Budget.from_dict(d["budget"]),
                   None if check is None else ModelCheck.from_dict(check))

    @property
    def weak(self) -> bool:
        return self.check is not None and not self.check.passed


def gate(report: ModelReport | None, what: str, *, allow: bool = False) -> ModelReport | None:
    """``report`` if its model passes; with ``allow``, marked as scored anyway; else a
    ``WeakModelError`` with both numbers and what to change."""
    if report is None or not report.weak:
        return report
    check = report.check
    assert check is not None
    if allow:
        log.warning("%s: weak model (%s), scored because of --allow-weak-model; its "
                    "entries are marked", what, check.short())
        return replace(report, check=replace(check, allowed=True))
    side = ("low end must reach the majority-class rate + %.2f = %.3f" if check.measure
            == "accuracy" else "high end must be at most the unigram perplexity x 0.95 = %.1f")
    need = side % ((ACCURACY_MARGIN, check.threshold) if check.measure == "accuracy"
                   else (check.threshold,))
    raise WeakModelError(
        f"{what}: the model gate refused the model: {check.describe()}; its 95% CI's "
        f"{need}. It is a {report.budget.describe()}. Train it more (more rows: raise or "
        "drop --train-limit; more epochs: --epochs) or try another --seed; "
        "--allow-weak-model scores it anyway and marks its entries as weak")
