"""Word-level vocabulary built from a training split, and batching of token lists."""

from collections import Counter
from collections.abc import Iterable, Sequence

import torch

from faithbench.benchmark.core.api import Batch

PAD, UNK = "<pad>", "<unk>"


class Vocabulary:
    """Token <-> id; id 0 is padding, id 1 the unknown word."""

    def __init__(self, tokens: Sequence[str]):
        self.itos = [PAD, UNK] + [t for t in tokens if t not in (PAD, UNK)]
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.pad_id, self.unk_id = 0, 1

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1,
              max_words: int | None = None) -> "Vocabulary":
        """Most frequent first, ties alphabetical, so the same data gives the same ids;
        at most ``max_words`` words besides padding and ``<unk>``."""
        counts = Counter(t for s in sentences for t in s)
        kept = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        return cls(kept[:max_words])

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self.stoi.get(t, self.unk_id) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]


def collate(rows: Sequence[Sequence[int]], example_ids: Sequence[str], *, pad_id: int = 0,
            segments: Sequence[Sequence[int]] | None = None,
            words: Sequence[Sequence[int] | None] | None = None) -> Batch:
    """Right-pad id lists into a Batch.

    >>> b = collate([[5, 6, 7], [8]], ["a", "b"])
    >>> b.ids.tolist(), b.mask.sum(1).tolist()
    ([[5, 6, 7], [8, 0, 0]], [3, 1])
    """
    width = max([len(r) for r in rows] + [1])
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    seg = torch.zeros((len(rows), width), dtype=torch.long) if segments is not None else None
    word = torch.zeros((len(rows), width), dtype=torch.long) if words is not None else None
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = True
        if seg is not None and segments is not None:
            seg[i, : len(r)] = torch.tensor(segments[i], dtype=torch.long)
        if word is not None and words is not None:  # a row without word ids: each its own word
            word[i, : len(r)] = torch.tensor(words[i] if words[i] is not None else range(len(r)),
                                             dtype=torch.long)
    return Batch(ids=ids, mask=mask, example_ids=tuple(str(e) for e in example_ids), segments=seg,
                 words=word)
