"""Leave-one-out occlusion: score_t = p_target(x) - p_target(x with token t
deleted), the remaining tokens kept in order (Li, Monroe & Jurafsky 2016,
"Understanding neural networks through representation erasure"; the LOO
measure of Jain & Wallace 2019). Needs only ``logits``.

Every one-token deletion of every row is stacked into one tensor of variants
and forwarded in chunks of ``chunk_size`` rows; nothing loops over examples.

Scored by its own operator. Under the metrics' default ``delete`` eraser, an
occlusion score *is* the first step of the MoRF erasure curve: its top token is by
definition the single deletion that lowers p(target) most. So it wins ``flip_rate``
(and the k = 1 terms of ``aopc_morf`` and ``comprehensiveness``) by construction on
a binary task, where the largest drop is the likeliest flip; its lead there says
more about the match of operators than about faithfulness. Compare explainers also
under ``eraser=mask`` (occlusion still deletes), as the README's robustness table
does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from benchmark.core.api import Batch, ExplainableModel, ExplainerSpec, Target


def delete_one(batch: Batch, rows: torch.Tensor, drop: torch.Tensor, pad_id: int) -> Batch:
    """Variant i = row ``rows[i]`` of ``batch`` with position ``drop[i]`` deleted and the
    gap closed. (N,) longs in, a Batch of N rows and width max(T - 1, 1) out."""
    ids, mask = batch.ids.index_select(0, rows), batch.mask.index_select(0, rows)  # (N, T)
    width = max(ids.shape[1] - 1, 1)
    j = torch.arange(width, device=ids.device).unsqueeze(0)  # (1, T-1)
    # (N, T-1) original position of each kept token
    src = (j + (j >= drop.unsqueeze(1)).long()).clamp(max=ids.shape[1] - 1)
    new_mask = j < (mask.sum(dim=1) - 1).unsqueeze(1)

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
    spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(
        name="occlusion",
        version="1",
        requires=frozenset(),
        params=(("eraser", "delete"),),
        deterministic=True,
        citation="Li, Monroe & Jurafsky 2016, Understanding neural networks through representation "
                 "erasure; Jain & Wallace 2019, Attention is not explanation",
        description="Drop in p(target) when one token is deleted (leave-one-out).",
    ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) probability drops; zero at padding."""
        with torch.no_grad():
            base = torch.softmax(model.logits(batch).float(), dim=-1)  # (B, C)
            base = base.gather(1, target.view(-1, 1).to(base.device)).squeeze(1)  # (B,)
            rows, drop = batch.mask.nonzero(as_tuple=True)  # one variant per real token
            tgt = target.to(rows.device).index_select(0, rows)
            p = torch.empty(rows.shape[0], dtype=torch.float32, device=base.device)
            for start in range(0, rows.shape[0], self.chunk_size):
                r, d = rows[start : start + self.chunk_size], drop[start : start + self.chunk_size]
                variants = delete_one(batch, r, d, model.pad_id)
                probs = torch.softmax(model.logits(variants).float(), dim=-1)  # (n, C)
                t = tgt[start : start + len(r)].view(-1, 1)
                p[start : start + len(r)] = probs.gather(1, t).squeeze(1)
            scores = torch.zeros(batch.ids.shape, dtype=torch.float32, device=base.device)
            scores[rows, drop] = base.index_select(0, rows) - p
        return scores


EXPLAINER = OcclusionExplainer()
