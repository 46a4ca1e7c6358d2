"""ROAR's data transforms (Hooker et al. 2019): replace each example's top-k% tokens,
by an explainer's scores, with the mask token — or k% chosen at random, the baseline —
on every split before a fresh model is trained.

The count is floor(k · n) computed exactly (``Fraction`` of the ratio's decimal
text, so 0.29 · 100 is 29, not the 28 that float arithmetic gives); ties go to the
earlier position; an example has no padding, so padding is never chosen. A
transform's ``key`` is the content hash of everything that decides its output, so a
retrained model is cached under it and never confused with another's.

``RecursiveMask`` is Madsen et al. (2022)'s recursive ROAR step: the positions the
previous step masked stay masked, and the rest of the floor(k · n) come from scores
that the previous step's retrained model gave to the already-masked input.
``MaskPattern`` keeps only *where* a mask fell (the leakage check): masked positions
become the mask token and every other token one constant word, so a model trained on
it sees the pattern and the length, never a word.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping, Sequence
from fractions import Fraction

from faithbench.benchmark.core.api import Example
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.vocab import UNK

KEPT = "<kept>"  # what MaskPattern puts at every position the mask left alone


def mask_count(ratio: float, n: int) -> int:
    """floor(ratio · n), exactly.

    >>> mask_count(0.29, 100), mask_count(0.1, 9), mask_count(0.7, 10)
    (29, 0, 7)
    """
    if not 0 <= ratio <= 1:
        raise InputError(f"a masking ratio must be in [0, 1], got {ratio!r}")
    return math.floor(Fraction(repr(float(ratio))) * n)


def top_positions(scores: Sequence[float], ratio: float) -> list[int]:
    """The floor(ratio · n) highest-scoring positions, ties to the earlier one, sorted.

    >>> top_positions([0.1, 0.9, 0.5, 0.9], 0.5)
    [1, 3]
    """
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return sorted(order[: mask_count(ratio, len(scores))])


def _masked(example: Example, positions: Sequence[int]) -> Example:
    tokens = list(example.tokens)
    for i in positions:
        tokens[i] = UNK
    return dataclasses.replace(example, tokens=tuple(tokens))


@dataclasses.dataclass(frozen=True)
class TopKMask:
    """Mask each example's top ``ratio`` of tokens by ``scores`` (example id -> one
    score per token: the explainer's scores of every split, from the original model)."""

    scores: Mapping[str, Sequence[float]] = dataclasses.field(repr=False)
    ratio: float
    explainer: str  # canonical id, for the key and for messages

    @property
    def key(self) -> str:
        return content_hash({"mask": "top-k", "ratio": repr(float(self.ratio)),
                             "explainer": self.explainer,
                             "scores": sorted((k, list(v)) for k, v in self.scores.items())})

    def positions(self, example: Example) -> list[int]:
        return top_positions(_scores_of(self.scores, example, self.explainer), self.ratio)

    def apply(self, split: str, examples: list[Example]) -> list[Example]:
        return _apply(self, split, examples)


def _scores_of(scores: Mapping[str, Sequence[float]], example: Example, explainer: str):
    s = scores.get(example.id)
    if s is None or len(s) != len(example.tokens):
        got = "none" if s is None else f"{len(s)} scores"
        raise InputError(f"ROAR masking ({explainer}): example {example.id!r} "
                         f"has {len(example.tokens)} tokens but {got}")
    return s


def _apply(mask, split: str, examples: list[Example]) -> list[Example]:
    try:
        return [_masked(e, mask.positions(e)) for e in examples]
    except InputError as exc:
        raise InputError(f"{exc} (split {split})") from None


@dataclasses.dataclass(frozen=True)
class RandomMask:
    """Mask floor(ratio · n) positions of each example drawn at random: the same
    positions for the same (seed, example id), whatever the split order or batch."""

    ratio: float
    seed: int = 0

    @property
    def key(self) -> str:
        return content_hash({"mask": "random", "ratio": repr(float(self.ratio)),
                             "seed": self.seed})

    def positions(self, example: Example) -> list[int]:
        rng = random.Random(content_hash({"seed": self.seed, "id": example.id}))
        n = len(example.tokens)
        return sorted(rng.sample(range(n), mask_count(self.ratio, n)))

    def apply(self, split: str, examples: list[Example]) -> list[Example]:
        return _apply(self, split, examples)


@dataclasses.dataclass(frozen=True)
class RecursiveMask:
    """``previous``'s positions plus the highest-scoring unmasked ones, floor(ratio · n)
    in all (ties to the earlier position). ``scores`` are the previous step's retrained
    model's explanations of ``previous``'s masked data, one per token; ``previous``
    None is the first step (= ``TopKMask``)."""

    previous: TopKMask | RecursiveMask | None
    scores: Mapping[str, Sequence[float]] = dataclasses.field(repr=False)
    ratio: float
    explainer: str

    @property
    def key(self) -> str:
        return content_hash({"mask": "recursive", "ratio": repr(float(self.ratio)),
                             "explainer": self.explainer,
                             "previous": None if self.previous is None else self.previous.key,
                             "scores": sorted((k, list(v)) for k, v in self.scores.items())})

    def positions(self, example: Example) -> list[int]:
        s = _scores_of(self.scores, example, self.explainer)
        done = set(self.previous.positions(example)) if self.previous is not None else set()
        want = mask_count(self.ratio, len(s))
        if want < len(done):
            raise InputError(f"recursive ROAR: ratio {self.ratio} masks fewer tokens than "
                             "the previous step; ratios must increase")
        rest = sorted((i for i in range(len(s)) if i not in done), key=lambda i: (-s[i], i))
        return sorted(done | set(rest[: want - len(done)]))

    def apply(self, split: str, examples: list[Example]) -> list[Example]:
        return _apply(self, split, examples)


@dataclasses.dataclass(frozen=True)
class MaskPattern:
    """Only where ``inner`` masks: its positions become the mask token, all others
    ``KEPT``. A model trained on this sees no word, so any accuracy above what length
    alone gives means the mask pattern itself gives the label away."""

    inner: TopKMask | RandomMask | RecursiveMask

    @property
    def key(self) -> str:
        return content_hash({"mask": "pattern", "inner": self.inner.key})

    def positions(self, example: Example) -> list[int]:
        return self.inner.positions(example)

    def apply(self, split: str, examples: list[Example]) -> list[Example]:
        try:
            return [_pattern(e, set(self.inner.positions(e))) for e in examples]
        except InputError as exc:
            raise InputError(f"{exc} (split {split})") from None


def _pattern(example: Example, masked: set[int]) -> Example:
    tokens = tuple(UNK if i in masked else KEPT for i in range(len(example.tokens)))
    return dataclasses.replace(example, tokens=tokens)


# every mask a ROAR sweep trains on (each a ``faithbench.api.DataTransform``)
Mask = TopKMask | RandomMask | RecursiveMask | MaskPattern
