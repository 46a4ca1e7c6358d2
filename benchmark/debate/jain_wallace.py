"""Jain & Wallace (NAACL 2019), "Attention is not Explanation": the three experiments,
per example, after their released code (successar/AttentionExplanation).

(a) ``correlations``: Kendall τ between attention and gradient importance and between
    attention and leave-one-out importance (and, as the yardstick, between gradient and
    leave-one-out), over the example's real tokens
    (``scipy.stats.kendalltau``, τ-b, p ≤ 0.05 counts as significant). Gradient
    importance is |∇_e p_ŷ · e| per token with attention held fixed (no gradient flows
    through the weights); leave-one-out is the change of the output distribution (TVD)
    when the token is deleted (their |Δp| on a binary task; half their Σ|Δp| on NLI,
    the same τ).
(b) ``permutation``: the median TVD of the output over ``PERMUTATIONS`` random
    shuffles of the weights among the real tokens (the encoder's states fixed), beside
    the example's largest attention weight.
(c) ``adversarial``: ``ADVERSARIES`` attention distributions per example, free logits
    started at log(1/n) + N(0, 3²) and optimised (Adam, lr 0.01, amsgrad,
    ``STEPS`` steps) to maximise their JSD from the model's attention and from each
    other while a hinge (weight 500, margin 0.01) holds the output near its own; of
    them and the model's own attention (JSD 0), the largest JSD whose output TVD is
    within ``EPSILON``. Every distribution kept is checked against the budget here,
    not assumed (``AdversarialOutcome.tvd``).

On the NLI model (two attentions, one per sentence) every operation acts within each
sentence, and a JSD compares the two sentences' weights together, each half the mass
(what ``model.attention`` reports); Jain & Wallace's NLI model attends over the premise
alone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch

from faithbench.benchmark.core.perturb import variant_probs
from faithbench.benchmark.debate import ops
from faithbench.metrics.agreement import kendall_per_instance

PERMUTATIONS = 100
ADVERSARIES = 5
STEPS = 500
LR = 0.01
HINGE_WEIGHT, HINGE_MARGIN = 500.0, 0.01
EPSILON = 0.05  # the output TVD an adversary may cause and still count
INIT_NOISE = 3.0
# float32 forwards of the same input differ by about 1e-7 (the model's own attention read
# on fixed states against the engine's output): the budget check allows that much
FLOAT_NOISE = 1e-6
SIGNIFICANT = 0.05


def row_generator(example_id: str, salt: str) -> torch.Generator:
    """A generator seeded by the example's id: an example's draws do not depend on the
    batch it came in or the run."""
    digest = hashlib.blake2b(f"{salt}\0{example_id}".encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") >> 1)


def gradient_importance(model, batch, target: torch.Tensor) -> torch.Tensor:
    """(B, T) |∇_e p_target · e| with the model's attention held fixed; 0 at padding."""
    weights = ops.attention_of(model, batch)
    with torch.enable_grad():
        embeds = model.embed(batch).detach().requires_grad_(True)
        logits = model.logits_fixed_attention(embeds, batch, weights.unsqueeze(1))
        p = torch.softmax(logits, dim=-1).gather(1, target.view(-1, 1).to(logits.device))
        (grads,) = torch.autograd.grad(p.sum(), embeds)
    return ((grads * embeds).sum(-1).abs() * batch.mask).detach()


def loo_importance(model, batch, base: torch.Tensor) -> torch.Tensor:
    """(B, T) TVD between the output of the example and of the example with one token
    deleted, per token; 0 at padding. ``base`` (B, C) the unperturbed output."""
    rows, drop = batch.mask.nonzero(as_tuple=True)
    keep = batch.mask.index_select(0, rows).clone()
    keep[torch.arange(len(rows)), drop] = False
    probs = variant_probs(model, batch, rows, keep, "delete").double()
    out = torch.zeros(batch.mask.shape, dtype=torch.float64)
    out[rows.cpu(), drop.cpu()] = ops.tvd(probs, base.double().cpu().index_select(0, rows.cpu()))
    return out


def correlations(model, batch, base: torch.Tensor) -> dict[str, list[float]]:
    """Per example: τ and p of attention against gradient and against leave-one-out
    (NaN where τ is undefined: fewer than 2 tokens or a constant vector)."""
    target = base.argmax(dim=-1)
    attention = ops.attention_of(model, batch)
    grads = gradient_importance(model, batch, target)
    loo = loo_importance(model, batch, base)
    out: dict[str, list[float]] = {}
    lengths = batch.mask.sum(dim=1).tolist()

    def real(x: torch.Tensor) -> list[list[float]]:
        return [[float(v) for v in x[b][batch.mask[b]].tolist()] for b in range(len(lengths))]

    att, grad_rows, loo_rows = real(attention), real(grads), real(loo)
    for name, first, other in (("gradient", att, grad_rows), ("loo", att, loo_rows),
                               ("gradient_loo", grad_rows, loo_rows)):
        taus, pvalues = kendall_per_instance(first, other)
        out[f"tau_{name}"] = [float(t) for t in taus]
        out[f"significant_{name}"] = [float("nan") if np.isnan(p) else float(p <= SIGNIFICANT)
                                      for p in pvalues]
    return out


def permutation(model, batch, base: torch.Tensor, permutations: int = PERMUTATIONS
                ) -> dict[str, list[float]]:
    """Per example: the median output TVD over ``permutations`` shuffles of its
    attention among its real tokens, and its largest attention weight."""
    group = ops.groups(batch)
    weights = ops.attention_of(model, batch)
    read = model.attention_readout(batch)
    gens = [row_generator(e, "jain_wallace permutation") for e in batch.example_ids]
    changes = torch.empty(len(batch), permutations, dtype=torch.float64)
    with torch.no_grad():
        for k in range(permutations):
            shuffled = ops.permuted(weights, group, gens)
            probs = torch.softmax(read(shuffled.unsqueeze(1)).double(), dim=-1).cpu()
            changes[:, k] = ops.tvd(probs, base.double().cpu())
    return {"median_tvd": changes.median(dim=1).values.tolist(),
            "max_attention": ops.max_weight(weights, group).tolist()}


@dataclass(frozen=True)
class AdversarialOutcome:
    """Per example: the JSD reached (nats), the output TVD of the distribution that
    reached it (≤ ``epsilon``: checked), the model's largest attention weight, and
    (B, T) the attention kept (the model's own where no adversary stayed in budget)."""

    jsd: list[float]
    tvd: list[float]
    max_attention: list[float]
    weights: torch.Tensor


def adversarial(model, batch, base: torch.Tensor, *, adversaries: int = ADVERSARIES,
                steps: int = STEPS, epsilon: float = EPSILON) -> AdversarialOutcome:
    """Jain & Wallace's adversarial attention search on one batch (see the module)."""
    group = ops.groups(batch)
    weights = ops.attention_of(model, batch)
    b, t = weights.shape
    rows = torch.arange(b).repeat_interleave(adversaries)
    wide = batch.select(rows.to(batch.ids.device))
    read = model.attention_readout(wide)
    wide_group = group.index_select(0, rows.to(group.device))
    sizes = ops.group_sums((group >= 0).double(), group).clamp(min=1)  # n of each group
    gens = [row_generator(e, "jain_wallace adversary") for e in batch.example_ids]
    noise = torch.stack([torch.randn(adversaries, t, generator=g, dtype=torch.float64)
                         for g in gens])  # (B, K, T)
    start = (-torch.log(sizes.cpu())).unsqueeze(1) + INIT_NOISE * noise
    logits = start.to(weights.device).requires_grad_(True)
    opt = torch.optim.Adam([logits], lr=LR, amsgrad=True)
    own = ops.row_distribution(weights.double(), group)  # (B, T)
    target = base.double().to(weights.device)
    wanted = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():  # only the adversaries' logits learn
        p.requires_grad_(False)
    try:
        for _ in range(steps):
            opt.zero_grad()
            alpha = ops.masked_softmax(logits.reshape(b * adversaries, t), wide_group)
            probs = torch.softmax(read(alpha.float().unsqueeze(1)).double(), dim=-1)
            change = ops.tvd(probs, target.index_select(0, rows.to(target.device)))
            dist = ops.row_distribution(alpha, wide_group).reshape(b, adversaries, t)
            away = ops.jsd(dist, own.unsqueeze(1)).sum()
            apart = ops.jsd(dist.unsqueeze(1), dist.unsqueeze(2)).sum() / adversaries ** 2
            hinge = HINGE_WEIGHT * torch.relu(change - HINGE_MARGIN).sum()
            (hinge - away - apart).backward()
            opt.step()
    finally:
        for p, flag in zip(model.parameters(), wanted, strict=True):
            p.requires_grad_(flag)
    with torch.no_grad():
        alpha = ops.masked_softmax(logits.reshape(b * adversaries, t), wide_group)
        probs = torch.softmax(read(alpha.float().unsqueeze(1)).double(), dim=-1)
        change = ops.tvd(probs, target.index_select(0, rows.to(target.device))).reshape(b, -1)
        dist = ops.row_distribution(alpha, wide_group).reshape(b, adversaries, t)
        reach = ops.jsd(dist, own.unsqueeze(1))  # (B, K)
        reach = torch.where(change <= epsilon, reach, torch.full_like(reach, -1.0))
        best, which = reach.max(dim=1)
        found = best >= 0
        kept = alpha.reshape(b, adversaries, t)[torch.arange(b), which]
        # none within budget: the model's own attention, JSD 0 and TVD 0
        kept = torch.where(found.unsqueeze(1), kept, weights.double())
        probs = torch.softmax(model.attention_readout(batch)(kept.float().unsqueeze(1)).double(),
                              dim=-1)
        tvd_out = ops.tvd(probs, target)  # measured again on what is returned
        jsd_out = ops.jsd(ops.row_distribution(kept, group), own)
    if bool((tvd_out > epsilon + FLOAT_NOISE).any()):
        raise AssertionError("an adversarial distribution outside the TVD budget was kept")
    return AdversarialOutcome(jsd_out.cpu().tolist(), tvd_out.cpu().tolist(),
                              ops.max_weight(weights, group).cpu().tolist(), kept.cpu())
