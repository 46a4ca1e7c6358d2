"""Leave-one-out occlusion: score_t = p_target(x) - p_target(x with token t
deleted), the remaining tokens kept in order (Li, Monroe & Jurafsky 2016,
"Understanding neural networks through representation erasure"; the LOO
measure of Jain & Wallace 2019). Needs only ``logits``.

Every one-token deletion of every row is one keep-mask, and all of them go through
the shared perturbation engine (``faithbench.api.variant_probs``) as one request:
it forwards each distinct variant once, in length-sorted chunks, and remembers it, so
the leave-one-out variants that ``taucorr_loo`` and ``flip_rate`` ask for later (and
the unperturbed input every metric starts from) are answered from memory. Nothing
loops over examples. Cost: T + 1 forwards per example at most (fewer where two
deletions give the same input, as in "very very good").

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

from faithbench.api import Batch, ExplainableModel, ExplainerSpec, Target, variant_probs

GRANULARITIES = (None, "word", "subword")


@dataclass(frozen=True)
class OcclusionExplainer:
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
        mask = batch.mask
        if batch.words is None or self.granularity == "subword":
            rows, drop = mask.nonzero(as_tuple=True)  # one variant per real token
            drops = torch.zeros(len(rows), mask.shape[1], dtype=torch.bool, device=mask.device)
            drops[torch.arange(len(rows), device=mask.device), drop] = True
        else:
            t = mask.shape[1]  # words may be padded wider (a batch cut to its longest row)
            words = torch.where(mask, batch.words[:, :t], -1)  # (B, T)
            width = int(words.max()) + 1 if words.numel() else 1
            pieces = words.unsqueeze(1) == torch.arange(width, device=words.device).view(1, -1, 1)
            rows, unit = pieces.any(dim=2).nonzero(as_tuple=True)  # one variant per real word
            drops = pieces[rows, unit]  # (N, T) the pieces each variant deletes
        # the unperturbed rows first: variant_probs forwards both in one request
        everything = torch.arange(len(batch), device=mask.device)
        probs = variant_probs(model, batch, torch.cat([everything, rows]),
                              torch.cat([mask, mask.index_select(0, rows) & ~drops]), "delete")
        target = target.to(probs.device)
        p = probs.gather(1, torch.cat([target, target.index_select(0, rows.to(probs.device))])
                         .view(-1, 1)).squeeze(1).float()
        base, p = p[: len(batch)], p[len(batch):]
        drop = (base.index_select(0, rows.to(p.device)) - p) / drops.sum(dim=1).to(p.device)
        # a word's drop is shared equally among its pieces (one piece: the whole drop)
        scores = torch.zeros(mask.shape, dtype=torch.float32, device=p.device)
        return scores.index_add_(0, rows.to(p.device), drops.to(p.device).float() * drop.unsqueeze(1))


EXPLAINER = OcclusionExplainer()
