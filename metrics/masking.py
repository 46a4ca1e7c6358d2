"""ROAR's data transforms (Hooker et al. 2019): replace each example's top-k% tokens,
by an explainer's scores, with the mask token — or k% chosen at random, the baseline —
on every split before a fresh model is trained.

The count is floor(k · n) computed exactly (``Fraction`` of the ratio's decimal
text, so 0.29 · 100 is 29, not the 28 that float arithmetic gives); ties go to the
earlier position; an example has no padding, so padding is never chosen. A
transform's ``key`` is the content hash of everything that decides its output, so a
retrained model is cached under it and never confused with another's.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping, Sequence
from fractions import Fraction

from benchmark.core.api import Example
from benchmark.core.cache import content_hash
from benchmark.core.errors import InputError
from benchmark.core.vocab import UNK


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

    def apply(self, split: str, examples: list[Example]) -> list[Example]:
        out = []
        for e in examples:
            s = self.scores.get(e.id)
            if s is None or len(s) != len(e.tokens):
                got = "none" if s is None else f"{len(s)} scores"
                raise InputError(f"ROAR masking ({self.explainer}): {split} example {e.id!r} "
                                 f"has {len(e.tokens)} tokens but {got}")
            out.append(_masked(e, top_positions(s, self.ratio)))
        return out


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
        return [_masked(e, self.positions(e)) for e in examples]
