"""What the debate's experiments do to attention inside a model, and the distances they
read off the output.

A BiLSTM of faithbench takes attention as a leaf (``logits_from_attention``, weights
(B, 1, T)): the experiments put other weights in the model's place and read the
output distribution. Attention is normalised per *group*: the one sentence of a
classifier, each side of the NLI model (``batch.segments``), so every operation here
(renormalise, permute, uniform, random) acts within a group and keeps each group's
weights summing to one. Padding is group -1 and keeps weight 0.

Distances are the papers': total variation distance between output distributions
(Jain & Wallace's output change; |Δp| on a binary task) and Jensen–Shannon divergence
in nats (their and Wiegreffe & Pinter's ``jsd``, at most ln 2).
"""

from __future__ import annotations

import torch

EPS = 1e-10  # Jain & Wallace's smoothing inside the JSD's logarithms


def groups(batch) -> torch.Tensor:
    """(B, T) long: the attention group of each position (the segment, 0 without
    segments), -1 at padding."""
    base = (torch.zeros_like(batch.ids) if batch.segments is None
            else batch.segments[:, : batch.ids.shape[1]].to(torch.long))
    return torch.where(batch.mask, base, torch.full_like(base, -1))


def each_group(group: torch.Tensor):
    """(B, T) bool masks, one per group present in the batch (padding is none)."""
    for g in group.unique().tolist():
        if g >= 0:
            yield group == g


def group_sums(weights: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """(B, T) the sum of ``weights`` over each position's group (0 at padding)."""
    out = torch.zeros_like(weights)
    for inside in each_group(group):
        total = (weights * inside).sum(dim=1, keepdim=True)
        out = torch.where(inside, total.expand_as(weights), out)
    return out


def masked_softmax(logits: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """(B, T) a softmax of ``logits`` within each group of real positions."""
    out = torch.zeros_like(logits)
    for inside in each_group(group):
        part = torch.softmax(logits.masked_fill(~inside, float("-inf")), dim=-1)
        out = out + torch.nan_to_num(part) * inside
    return out


def row_distribution(weights: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """(B, T) one distribution over the row: each group's weights (summing to one)
    divided by the number of groups of the row (what ``model.attention`` reports)."""
    present = sum(inside.any(dim=1, keepdim=True).to(weights.dtype)
                  for inside in each_group(group))
    return weights * (group >= 0) / torch.as_tensor(present).clamp(min=1)


def renormalise(weights: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """``weights`` divided by their group's sum, 0 at padding; a group whose weights are
    all zero stays zero (nothing left to attend to)."""
    weights = weights * (group >= 0)
    total = group_sums(weights, group)
    return torch.where(total > 0, weights / total.clamp(min=1e-30), torch.zeros_like(weights))


def uniform(group: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """(B, T) 1/n over the n real positions of each group (Wiegreffe & Pinter's frozen
    uniform attention; Vashishth et al.'s uniform alteration)."""
    return renormalise((group >= 0).to(dtype), group)


def permuted(weights: torch.Tensor, group: torch.Tensor, generators: list[torch.Generator]
             ) -> torch.Tensor:
    """``weights`` shuffled among the real positions of each group, one random
    permutation per row and group, drawn from that row's generator (Jain & Wallace's
    permutation)."""
    out = weights.clone()
    for b in range(weights.shape[0]):
        for g in group[b].unique().tolist():
            if g < 0:
                continue
            where = (group[b] == g).nonzero().flatten()
            order = torch.randperm(len(where), generator=generators[b])
            out[b, where] = weights[b, where[order.to(where.device)]]
    return out


def random_weights(group: torch.Tensor, generators: list[torch.Generator]) -> torch.Tensor:
    """(B, T) U(0, 1) draws (row b's from ``generators[b]``) normalised within each
    group (Vashishth et al.'s random attention)."""
    draws = torch.stack([torch.rand(group.shape[1], generator=g, dtype=torch.float64)
                         for g in generators]).to(group.device)
    return renormalise(draws, group)


def max_weight(weights: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """(B,) the largest attention weight of each row over its real positions."""
    return weights.masked_fill(group < 0, float("-inf")).max(dim=1).values


def tvd(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Total variation distance over the last axis: ½ Σ |p − q|."""
    return 0.5 * (p - q).abs().sum(dim=-1)


def jsd(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen–Shannon divergence (nats) over the last axis: ½ KL(p‖m) + ½ KL(q‖m),
    m = (p + q) / 2; zero entries contribute nothing."""
    m = (p + q) / 2

    def kl(a: torch.Tensor) -> torch.Tensor:
        return (a * (torch.log(a + EPS) - torch.log(m + EPS))).sum(dim=-1)

    return 0.5 * kl(p) + 0.5 * kl(q)


def probs_with(model, batch, weights: torch.Tensor) -> torch.Tensor:
    """(B, C) float64 output distribution with ``weights`` (B, T) in place of the
    model's attention."""
    logits = model.logits_from_attention(weights.unsqueeze(1), batch)
    return torch.softmax(logits.double(), dim=-1)


def attention_of(model, batch) -> torch.Tensor:
    """(B, T) the model's own attention weights as its output reads them (each group
    summing to one), detached."""
    weights, _ = model.attention_leaf(batch)
    return weights[:, 0].detach()
