"""Serrano & Smith (ACL 2019), "Is Attention Interpretable?": erasure of attention
weights inside the model, after their released code (serrano-s/attn-tests).

This erases attended *representations* (a weight set to zero and the rest
renormalised, the encoder's states fixed), not input tokens: the input-erasure metrics
(``comprehensiveness``, ``aopc_morf``, ...) remove a token, and with it its influence on
every other state. A decision flip is a change of the argmax from the model's own
prediction; a divergence is the JSD (nats) between output distributions.

(1) ``single``: zero the largest weight, renormalise; zero one other weight drawn at
    random, renormalise. Per example: both JSDs, their difference ΔJS = JS(max) −
    JS(random), and whether each flips the decision.
(2) ``multiple``: zero weights one at a time in a ranked order, renormalising after
    each, until the decision flips. Orders: by attention, by the gradient of the
    predicted class's probability wrt the attention weights (signed), by attention ×
    that gradient, and at random. Per example and order: the fraction of the weights
    zeroed when it first flips (NaN where it never does; ``never`` counts those).

On the NLI model one order runs over the weights of both sentences; each sentence's
weights are renormalised within it (a sentence whose weights are all zeroed reads as
an empty context).
"""

from __future__ import annotations

import torch

from faithbench.benchmark.debate import ops
from faithbench.benchmark.debate.jain_wallace import row_generator

ORDERS = ("attention", "gradient", "attention_x_gradient", "random")


def _probs(read, weights: torch.Tensor) -> torch.Tensor:
    return torch.softmax(read(weights.unsqueeze(1)).double(), dim=-1).cpu()


def single(model, batch, base: torch.Tensor) -> dict[str, list[float]]:
    """Per example: JSD and flip after zeroing the largest weight, and after zeroing a
    random other real weight (of the same row, drawn uniformly by the example's own
    generator); rows with one real token give NaN."""
    group = ops.groups(batch)
    weights = ops.attention_of(model, batch)
    read = model.attention_readout(batch)
    base = base.double().cpu()
    predicted = base.argmax(dim=-1)
    real = group >= 0
    top = weights.masked_fill(~real, float("-inf")).argmax(dim=1)
    other = torch.empty_like(top)
    for b, example in enumerate(batch.example_ids):
        choices = [t for t in real[b].nonzero().flatten().tolist() if t != int(top[b])]
        pick = torch.randint(len(choices), (1,), generator=row_generator(
            example, "serrano_smith random weight")) if choices else torch.tensor([0])
        other[b] = choices[int(pick)] if choices else top[b]
    out: dict[str, list[float]] = {}
    with torch.no_grad():
        for name, where in (("max", top), ("random", other)):
            erased = weights.clone()
            erased[torch.arange(len(batch)), where] = 0.0
            probs = _probs(read, ops.renormalise(erased, group))
            out[f"js_{name}"] = ops.jsd(probs, base).tolist()
            out[f"flip_{name}"] = (probs.argmax(dim=-1) != predicted).double().tolist()
    single_token = (real.sum(dim=1) < 2).cpu()
    for key, vals in out.items():
        out[key] = [float("nan") if single_token[b] else v for b, v in enumerate(vals)]
    out["delta_js"] = [a - r for a, r in zip(out["js_max"], out["js_random"])]
    return out


def attention_gradient(model, batch, weights: torch.Tensor, predicted: torch.Tensor
                       ) -> torch.Tensor:
    """(B, T) d p_ŷ / d α_t: the gradient of the predicted class's probability wrt the
    attention weights, the weights taken as a leaf."""
    read = model.attention_readout(batch)
    with torch.enable_grad():
        leaf = weights.detach().clone().requires_grad_(True)
        p = torch.softmax(read(leaf.unsqueeze(1)), dim=-1)
        picked = p.gather(1, predicted.view(-1, 1).to(p.device)).sum()
        (grad,) = torch.autograd.grad(picked, leaf)
    return grad.detach()


def rankings(model, batch, weights: torch.Tensor, predicted: torch.Tensor
             ) -> dict[str, torch.Tensor]:
    """(B, T) importance of each position under every order (higher goes first)."""
    grad = attention_gradient(model, batch, weights, predicted)
    draws = torch.stack([torch.rand(weights.shape[1], generator=row_generator(
        e, "serrano_smith random order")) for e in batch.example_ids]).to(weights.device)
    return {"attention": weights, "gradient": grad, "attention_x_gradient": weights * grad,
            "random": draws}


def multiple(model, batch, base: torch.Tensor) -> dict[str, list[float]]:
    """Per example and order: the fraction of real weights zeroed when the decision
    first flips (NaN: never, all zeroed)."""
    group = ops.groups(batch)
    real = group >= 0
    weights = ops.attention_of(model, batch)
    read = model.attention_readout(batch)
    predicted = base.double().cpu().argmax(dim=-1)
    n = real.sum(dim=1).cpu()
    out: dict[str, list[float]] = {}
    for name, score in rankings(model, batch, weights, predicted).items():
        order = torch.sort(score.masked_fill(~real, float("-inf")), dim=1, descending=True,
                           stable=True).indices
        first = torch.full((len(batch),), -1, dtype=torch.long)
        erased = weights.clone()
        with torch.no_grad():
            for k in range(int(n.max())):
                alive = (k < n).to(erased.device)
                rows = torch.arange(len(batch), device=erased.device)[alive]
                erased[rows, order[rows, k]] = 0.0
                flipped = _probs(read, ops.renormalise(erased, group)).argmax(dim=-1) != predicted
                newly = flipped & (first < 0) & (k < n)
                first[newly] = k + 1
        out[f"fraction_{name}"] = [float(f) / float(m) if f > 0 else float("nan")
                                   for f, m in zip(first.tolist(), n.tolist())]
    return out
