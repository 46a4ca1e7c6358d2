"""Leave-one-out occlusion: score_t = p_target(x) - p_target(x with token t
deleted), the remaining tokens kept in order (Li, Monroe & Jurafsky 2016,
"Understanding neural networks through representation erasure"; the LOO
measure of Jain & Wallace 2019). Needs only ``logits``.

Every one-token deletion of every row is stacked into one tensor of variants
and forwarded in chunks of ``chunk_size`` rows; nothing loops over examples.

Subword models. Where the batch has ``words`` (a Transformer's pieces), the unit
left out is a whole word, as the metrics count and erase words by default: all its
pieces are deleted together, and the drop is shared equally among its pieces, so a
word's summed score (what a word-level metric ranks) is its leave-one-out drop and
``taucorr_loo`` under the same eraser is 1. ``granularity="subword"`` deletes one
piece at a time (each piece's own drop; the 1.0 version's output on a Transformer).
On a model without words the two are the same.

Scored by its own operator. Under the metrics' default ``delete`` eraser, an
occlusion score *is* the first step of the MoRF erasure curve: its top token is by
definition the single deletion that lowers p(target) most. So it wins ``flip_rate``
(and the k = 1 terms of ``aopc_morf`` and ``comprehensiveness``) by construction on
a binary task, where the largest drop is the likeliest flip; its lead there says
more about the match of operators than about faithfulness. Compare explainers also
under ``eraser=mask`` (occlusion still deletes), as the robustness table of docs/results/sst2.md
does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import Batch, ExplainableModel, ExplainerSpec, Target

GRANULARITIES = (None, "word", "subword")


def delete_one(batch: Batch, rows: torch.Tensor, drop: torch.Tensor, pad_id: int) -> Batch:
    """Variant i = row ``rows[i]`` of ``batch`` with position ``drop[i]`` deleted and the
    gap closed. (N,) longs in, a Batch of N rows and width max(T - 1, 1) out."""
    ids, mask = batch.ids.index_select(0, rows), batch.mask.index_select(0, rows)  # (N, T)
    width = max(ids.shape[1] - 1, 1)
    j = torch.arange(width, device=ids.device).unsqueeze(0)  # (1, T-1)
    # (N, T-1) original position of each kept token
    src = (j + (j >= drop.unsqueeze(1)).long()).clamp(max=ids.shape[1] - 1)
    new_mask = j < (mask.sum(dim=1) - 1).unsqueeze(1)
    return _gathered(batch, rows, src, new_mask, pad_id)


def delete_positions(batch: Batch, rows: torch.Tensor, drop: torch.Tensor,
                     pad_id: int) -> Batch:
    """Variant i = row ``rows[i]`` of ``batch`` with every position where ``drop[i]`` is
    True deleted (a whole word's pieces) and the gaps closed, order kept. (N,) longs
    and (N, T) bools in, a Batch of N rows and width max(T - 1, 1) out."""
    keep = batch.mask.index_select(0, rows) & ~drop  # (N, T)
    width = max(batch.ids.shape[1] - 1, 1)
    # kept positions first, in order (a stable sort of the dropped flags)
    src = torch.sort((~keep).long(), dim=1, stable=True).indices[:, :width]
    new_mask = torch.arange(width, device=keep.device).unsqueeze(0) < keep.sum(1, keepdim=True)
    return _gathered(batch, rows, src, new_mask, pad_id)


def _gathered(batch: Batch, rows: torch.Tensor, src: torch.Tensor, new_mask: torch.Tensor,
              pad_id: int) -> Batch:
    """Rows ``rows`` of ``batch`` with position ``src[i, j]`` moved to j, padded past
    ``new_mask``."""
    ids = batch.ids.index_select(0, rows)

    def rows_of(t):
        return None if t is None else t.index_select(0, rows)

    segments = rows_of(batch.segments)
    return Batch(
        ids=ids.gather(1, src).masked_fill(~new_mask, pad_id),
        mask=new_mask,
        example_ids=tuple(batch.example_ids[i] for i in rows.tolist()),
        segments=None if segments is None else segments.gather(1, src).masked_fill(~new_mask, 0),
        prefix=rows_of(batch.prefix),
        prefix_mask=rows_of(batch.prefix_mask),
    )


@dataclass(frozen=True)
class OcclusionExplainer:
    # rows per forward pass; changes speed and memory, not the output (so not in spec.params)
    chunk_size: int = 1024
    granularity: str | None = None  # None or "word": whole words where the batch has words
    spec: ExplainerSpec = field(init=False)

    def __post_init__(self):
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"occlusion: granularity must be word or subword, "
                             f"got {self.granularity!r}")
        object.__setattr__(self, "spec", ExplainerSpec(
            name="occlusion",
            version="1",
            requires=frozenset(),
            params=(("eraser", "delete"), ("granularity", self.granularity)),
            deterministic=True,
            citation="Li, Monroe & Jurafsky 2016, Understanding neural networks through "
                     "representation erasure; Jain & Wallace 2019, Attention is not explanation",
            description="Drop in p(target) when one token (on a subword model: one word) is "
                        "deleted (leave-one-out).",
            cost="T + 1 fwd (T = tokens; words on a subword model)",
        ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) probability drops; zero at padding."""
        with torch.no_grad():
            base = torch.softmax(model.logits(batch).float(), dim=-1)  # (B, C)
            base = base.gather(1, target.view(-1, 1).to(base.device)).squeeze(1)  # (B,)
            if batch.words is None or self.granularity == "subword":
                return self._pieces(model, batch, target, base)
            return self._words(model, batch, target, base)

    def _pieces(self, model, batch: Batch, target: Target, base: torch.Tensor) -> torch.Tensor:
        rows, drop = batch.mask.nonzero(as_tuple=True)  # one variant per real token
        p = self._probs(model, rows, target, lambda r, s: delete_one(
            batch, r, drop[s], model.pad_id))
        scores = torch.zeros(batch.ids.shape, dtype=torch.float32, device=base.device)
        scores[rows, drop] = base.index_select(0, rows) - p
        return scores

    def _words(self, model, batch: Batch, target: Target, base: torch.Tensor) -> torch.Tensor:
        t = batch.ids.shape[1]  # words may be padded wider (a batch cut to its longest row)
        words = torch.where(batch.mask, batch.words[:, :t], -1)  # (B, T)
        width = int(words.max()) + 1 if words.numel() else 1
        pieces = words.unsqueeze(1) == torch.arange(width, device=words.device).view(1, -1, 1)
        rows, unit = pieces.any(dim=2).nonzero(as_tuple=True)  # one variant per real word
        drops = pieces[rows, unit]  # (N, T) the pieces each variant deletes
        p = self._probs(model, rows, target, lambda r, s: delete_positions(
            batch, r, drops[s], model.pad_id))
        share = (base.index_select(0, rows) - p) / drops.sum(dim=1)  # the word's drop, split
        scores = torch.zeros(batch.ids.shape, dtype=torch.float32, device=base.device)
        return scores.index_add_(0, rows, drops.float() * share.unsqueeze(1))

    def _probs(self, model, rows: torch.Tensor, target: Target, variants) -> torch.Tensor:
        """(N,) p_target of variant i; ``variants(rows, slice)`` builds a chunk of them."""
        tgt = target.to(rows.device).index_select(0, rows)
        p = torch.empty(rows.shape[0], dtype=torch.float32, device=rows.device)
        for start in range(0, rows.shape[0], self.chunk_size):
            s = slice(start, start + self.chunk_size)
            probs = torch.softmax(model.logits(variants(rows[s], s)).float(), dim=-1)  # (n, C)
            p[s] = probs.gather(1, tgt[s].view(-1, 1)).squeeze(1)
        return p


EXPLAINER = OcclusionExplainer()
