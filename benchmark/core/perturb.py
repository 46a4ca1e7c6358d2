"""The batched perturbation engine: it owns every forward pass a metric makes.

A metric describes its perturbations as keep-masks over the original positions
of the examples in a batch; the engine stacks every variant of every example,
sorts them by resulting length (so a chunk pads little), forwards them in chunks
of ``chunk_size`` rows, and returns probabilities in the order asked.
"""

import torch

from benchmark.core.api import Batch, ExplainableModel
from benchmark.core.erasers import ERASERS, erase
from benchmark.core.errors import InputError


class Perturber:
    """Forwards (erased) variants of a batch in chunks of ``chunk_size`` rows."""

    def __init__(self, model: ExplainableModel, *, chunk_size: int = 512, eraser: str = "delete"):
        if chunk_size < 1:
            raise InputError(f"chunk_size must be >= 1, got {chunk_size}")
        if eraser not in ERASERS:
            raise InputError(f"unknown eraser {eraser!r}; choose one of {', '.join(ERASERS)}")
        self.model, self.chunk_size, self.eraser = model, chunk_size, eraser
        self.rows_forwarded = 0  # counted so speed can be reported against forward passes

    @torch.no_grad()
    def probs(self, batch: Batch) -> torch.Tensor:
        """(B, C) softmax probabilities of the unperturbed batch."""
        keep = batch.mask.clone()
        rows = torch.arange(len(batch), device=batch.ids.device)
        return self.probs_of_variants(batch, rows, keep)

    @torch.no_grad()
    def probs_of_variants(
        self, batch: Batch, rows: torch.Tensor, keep: torch.Tensor, eraser: str | None = None
    ) -> torch.Tensor:
        """(N, C) probabilities of variant i = row ``rows[i]`` with ``keep[i]`` (N, T) kept."""
        how = eraser or self.eraser
        n = keep.shape[0]
        if n == 0:
            return torch.empty(0, 0)
        lengths = (keep & batch.mask.index_select(0, rows)).sum(dim=1)
        by_length = torch.sort(lengths, stable=True).indices
        out: torch.Tensor | None = None
        for start in range(0, n, self.chunk_size):
            idx = by_length[start : start + self.chunk_size]
            sub = batch.select(rows.index_select(0, idx))
            sub = erase(
                sub, keep.index_select(0, idx), how,
                pad_id=self.model.pad_id, mask_id=self.model.mask_id,
            )
            sub = _trim(sub)
            p = torch.softmax(self.model.logits(sub).float(), dim=-1)
            if out is None:
                out = torch.empty(n, p.shape[1], device=p.device)
            out[idx] = p
            self.rows_forwarded += len(idx)
        return out

    def probs_of_keeps(self, batch: Batch, keeps: torch.Tensor, eraser: str | None = None):
        """(B, V, C) for keeps (B, V, T): V variants of every row of the batch."""
        b, v, t = keeps.shape
        rows = torch.arange(b, device=keeps.device).repeat_interleave(v)
        p = self.probs_of_variants(batch, rows, keeps.reshape(b * v, t), eraser)
        return p.reshape(b, v, -1)


def _trim(batch: Batch) -> Batch:
    """Drop all-padding columns at the right so a chunk costs what its longest row costs."""
    width = max(int(batch.mask.sum(dim=1).max()), 1)
    if width == batch.ids.shape[1]:
        return batch
    seg = None if batch.segments is None else batch.segments[:, :width]
    return batch.replace(ids=batch.ids[:, :width], mask=batch.mask[:, :width], segments=seg)
