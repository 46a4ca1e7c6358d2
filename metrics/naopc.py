"""Normalized AOPC (NAOPC): comprehensiveness and sufficiency rescaled by the lowest
and highest AOPC any ordering of the example's units can reach.

Metric card
-----------
Formula. For an example x with n units (tokens, or whole words on a subword model),
explained class ŷ, and a removal order π = (u₁ … uₙ) of its units, let S_k = {u₁ … u_k}
and g(S) = p_ŷ(x) − p_ŷ(x ∖ S). The AOPC of π is::

    aopc(π) = 1/n · Σ_{k=1..n} g(S_k)

(k = 0 adds nothing; k = n, every unit gone, is kept). Comprehensiveness removes units in
the explainer's order, most important first (π_comp); sufficiency least important first
(π_suff, the same order reversed). With the bounds over all n! orderings::

    lower(x) = min_π aopc(π),   upper(x) = max_π aopc(π)
    naopc_comprehensiveness(x) = (aopc(π_comp) − lower) / (upper − lower)
    naopc_sufficiency(x)       = (aopc(π_suff) − lower) / (upper − lower)

Both metrics share the same two bounds. The factor 1/n, the k = n term and p_ŷ(x) cancel
in the ratio, so the value does not depend on those conventions (1/(n+1) with a k = 0
term gives the same number). Where upper = lower (every ordering scores the same, e.g.
n = 1) the ratio is undefined: the value is NaN (left out of the mean and counted as
undefined) and the flag ``flat`` is True; ``if_flat=0`` puts 0 there, as the authors'
scripts do.
Units are ordered by ``faithbench.benchmark.core.ranking`` (equal scores in a random
order seeded by the example's id; sufficiency takes the k least important as ``aopc_lerf`` does).

Search. ``search="exact"``: g is computed for all 2ⁿ subsets and the bounds are found by a
dynamic programme over the subset lattice: F(∅) = 0, F(S) = g(S) + max (min) over u ∈ S of
F(S ∖ {u}), so upper = F_max(all units)/n, lower = F_min(all units)/n; sums are taken in
chain order, so the explainer's own AOPC is never outside [lower, upper] by rounding and
the value lies in [0, 1]. ``search="beam"``: the authors' beam search, one beam that
maximizes and one that minimizes the running sum Σ g(S_k): each of the ``beam_size``
partial orders is extended by every unit not yet removed (units in position order),
candidates are sorted by running sum (stable: ties keep beam rank, then unit order) and
the best ``beam_size`` kept, for n steps; the best complete order of each beam gives
upper and lower. Beam bounds are approximations, inside the exact ones
(lower_beam ≥ lower, upper_beam ≤ upper), so a beam NAOPC approximates the exact one and
can fall outside [0, 1] when the explainer's order beats a beam.

Direction. ``naopc_comprehensiveness``: higher is more faithful (1 = no ordering drops
p_ŷ sooner). ``naopc_sufficiency``: lower is more faithful (0 = no ordering keeps p_ŷ
higher while units go).

Range. [0, 1] with exact search; about [0, 1] with beam search (see above).

Parameters. ``search`` ("beam" default, or "exact"), ``beam_size`` (default 5, as in
the authors' experiments), ``max_exact`` (default 12: with search="exact" an example
with more units is an error naming it), ``if_flat`` (the value where upper = lower;
default None = NaN, undefined; the authors use 0), ``eraser`` (default "delete"; the authors replace a removed word by
[MASK]: ``eraser=mask``), ``segment``, ``granularity`` (whole words by default on
subword models, as the authors do).

Cost. Exact: 2ⁿ − 1 erased variants per example (4,095 at n = 12), all forwarded in one
trip per group of rows; the DP itself is n·2ⁿ⁻¹ additions. Beam: n sequential trips per
batch, each with at most 2·beam_size·(n − k + 1) variants per example at step k, about
beam_size·n(n + 1) in all (variants asked twice are forwarded once), plus the n variants
of the explainer's order. The engine shares variants between the two metrics, so the
second of the pair costs almost no forward passes.

OOD caveat. The bounds come from heavily erased inputs like AOPC's own: a high or low
bound can reflect the model's reaction to off-distribution inputs rather than evidence.
NAOPC removes differences in the bounds between models and examples; it does not make
the erased inputs more natural.

Citation. Edin, Motzfeldt, Christensen, Ruotsalo, Maaløe & Maistro (2025), "Normalized
AOPC: Fixing Misleading Faithfulness Metrics for Feature Attribution Explainability",
ACL 2025 (arXiv:2408.08137); code github.com/JoakimEdin/naopc.

Hand-worked case. Voting model p(c) ∝ 1 + (votes for c); token 2 votes class 0, token 3
class 1. x = [2, 2, 3] (units a, b, c), ŷ = 0, p₀(x) = 3/5, deleting. Drops:
g(a) = g(b) = 3/5 − 2/4 = 0.1, g(c) = 3/5 − 3/4 = −0.15, g(ab) = 3/5 − 1/3 = 0.2667,
g(ac) = g(bc) = 3/5 − 2/3 = −0.0667, g(abc) = 3/5 − 1/2 = 0.1. The 6 orderings::

    a b c, b a c:  (0.1 + 0.2667 + 0.1)/3     =  0.1556  (upper)
    a c b, b c a:  (0.1 − 0.0667 + 0.1)/3     =  0.0444
    c a b, c b a:  (−0.15 − 0.0667 + 0.1)/3   = −0.0389  (lower)

Scores (0.9, 0.5, 0.1): comprehensiveness removes a b c (upper, 1.0), sufficiency
c b a (lower, 0.0). Scores (0.9, 0.1, 0.5): a c b and b c a, both 0.0444, so both are
(0.0444 + 0.0389)/(0.1556 + 0.0389) = 3/7 = 0.4286. Beam search with beam_size = 1
finds the same bounds here.

>>> import torch
>>> from faithbench.benchmark.core.api import Batch, MetricInput
>>> from faithbench.benchmark.core.perturb import Perturber
>>> from faithbench.testing import Votes  # p(c) ∝ 1 + real tokens voting for c
>>> batch = Batch(torch.tensor([[2, 2, 3], [2, 2, 3]]), torch.ones(2, 3, dtype=torch.bool),
...               ("a", "b"))
>>> perturber = Perturber(Votes())
>>> inp = MetricInput(batch, torch.tensor([[0.9, 0.5, 0.1], [0.9, 0.1, 0.5]]),
...                   torch.tensor([0, 0]), perturber.probs(batch), perturber)
>>> exact = with_search(NAOPC_COMP, "exact")
>>> [round(v, 4) for v in exact.compute(inp).values.tolist()]
[1.0, 0.4286]
>>> [round(v, 4) for v in with_search(NAOPC_SUFF, "exact").compute(inp).values.tolist()]
[0.0, 0.4286]
>>> [round(v, 4) for v in with_search(NAOPC_COMP, "beam", 1).compute(inp).values.tolist()]
[1.0, 0.4286]
>>> [round(v, 4) for v in aopc_bounds(inp, search="exact")[1][0].tolist()]  # lower, upper
[-0.0389, 0.1556]
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import torch

from faithbench.benchmark.core.api import (
    CLASSIFICATION,
    PAIR_CLASSIFICATION,
    MetricInput,
    MetricOutput,
    SimpleMetric,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.metrics.variants import (
    Candidates,
    base_target_prob,
    candidates,
    check_eraser,
    faithfulness_spec,
    of_target,
    variant_probs,
)

CITATION = (
    "Edin, Motzfeldt, Christensen, Ruotsalo, Maaløe & Maistro (2025). Normalized AOPC: "
    "Fixing Misleading Faithfulness Metrics for Feature Attribution Explainability. "
    "ACL 2025 (arXiv:2408.08137)."
)
SEARCHES = ("beam", "exact")
MAX_EXACT_LIMIT = 20  # 2^20 variants per example: the most exact search may be asked for
FLAT_TOL = 1e-12  # upper − lower (as a sum of n drops) at or below this counts as equal
EXACT_VARIANTS_PER_TRIP = 1 << 17  # rows of a group of examples sent to the engine at once


def naopc_comprehensiveness(inp: MetricInput, *, search: str, beam_size: int, max_exact: int,
                            if_flat: float | None, eraser: str, segment: int | None,
                            granularity: str | None) -> MetricOutput:
    """(B,) AOPC of the most-important-first order, rescaled by the example's AOPC bounds."""
    return _naopc(inp, "naopc_comprehensiveness", False, search, beam_size, max_exact,
                  if_flat, eraser, segment, granularity)


def naopc_sufficiency(inp: MetricInput, *, search: str, beam_size: int, max_exact: int,
                      if_flat: float | None, eraser: str, segment: int | None,
                      granularity: str | None) -> MetricOutput:
    """(B,) AOPC of the least-important-first order, rescaled by the example's AOPC bounds."""
    return _naopc(inp, "naopc_sufficiency", True, search, beam_size, max_exact,
                  if_flat, eraser, segment, granularity)


def aopc_bounds(inp: MetricInput, *, search: str = "exact", beam_size: int = 5,
                max_exact: int = 12, eraser: str = "delete", segment: int | None = None,
                granularity: str | None = None, least: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(B,) AOPC of the explainer's order (most important first, ``least``: least
    important first) and (B, 2) the lower and upper AOPC over all orders (exact, or the
    beam search's). For tests and reports; the metrics use the same code."""
    name = "naopc_sufficiency" if least else "naopc_comprehensiveness"
    aopc, low, high, n = _sums(inp, name, least, search, beam_size, max_exact, eraser,
                               segment, granularity)
    nf = n.to(torch.float64)
    return aopc / nf, torch.stack([low / nf, high / nf], dim=1)


def _naopc(inp, name, least, search, beam_size, max_exact, if_flat, eraser, segment,
           granularity) -> MetricOutput:
    if len(inp.batch) == 0:
        _check(name, search, beam_size, max_exact, eraser)
        return MetricOutput(torch.zeros(0, dtype=torch.float64),
                            flags={"flat": torch.zeros(0, dtype=torch.bool)})
    aopc, low, high, _ = _sums(inp, name, least, search, beam_size, max_exact, eraser,
                               segment, granularity)
    span = high - low
    flat = span.abs() <= FLAT_TOL
    values = (aopc - low) / torch.where(flat, torch.ones_like(span), span)
    fill = float("nan") if if_flat is None else float(if_flat)
    values = torch.where(flat, torch.full_like(values, fill), values)
    return MetricOutput(values.double(), flags={"flat": flat})


def _check(name: str, search, beam_size, max_exact, eraser) -> None:
    if search not in SEARCHES:
        raise InputError(f"metric {name}: unknown search {search!r}; choose beam or exact")
    for key, value, high in (("beam_size", beam_size, None),
                             ("max_exact", max_exact, MAX_EXACT_LIMIT)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (
                high is not None and value > high):
            top = f" and <= {high}" if high is not None else ""
            raise InputError(f"metric {name}: {key} must be an integer >= 1{top}, got {value!r}")
    check_eraser(name, eraser)


def _sums(inp, name, least, search, beam_size, max_exact, eraser, segment, granularity):
    """(B,) float64 Σ_k g(S_k) of the explainer's order and of the lowest and highest
    orders found, and (B,) n. Sums are accumulated k = 1, 2, ... in that order."""
    _check(name, search, beam_size, max_exact, eraser)
    cand = candidates(name, inp, segment, granularity)
    n = cand.n.cpu()
    local = _local_units(cand, int(n.max()))  # (B, N, T)
    base = base_target_prob(inp)
    order = _explainer_chain(inp, cand, local, least)  # (B, N, N) units gone after k steps
    if search == "exact":
        too_long = (n > max_exact).nonzero().flatten().tolist()
        if too_long:
            ids = ", ".join(f"{inp.batch.example_ids[i]} ({int(n[i])} units)" for i in too_long)
            raise InputError(
                f"metric {name}: search=exact forwards 2^n variants per example and allows "
                f"at most max_exact={max_exact} units; too long: {ids}. Use search=beam "
                f"(e.g. {name}[search=beam]) or raise max_exact (at most {MAX_EXACT_LIMIT})")
        g = _subset_drops(inp, local, n, base, eraser)  # (B, 2^N)
        low, high = _lattice_bounds(g, n)
        aopc = _chain_sum(g.gather(1, _subset_ids(order)), n)
    else:
        low, high = _beam_bounds(inp, local, n, base, eraser, beam_size)
        drops = base.unsqueeze(1) - of_target(
            variant_probs(inp, _keeps(inp, local, order), _steps_valid(n, order), eraser),
            inp.target)
        aopc = _chain_sum(drops, n)
    return aopc, low, high, n


def _local_units(cand: Candidates, width: int) -> torch.Tensor:
    """(B, N, T) bool: row b's j-th unit (units in position order; j >= n_b: empty)."""
    masks, exists = cand.units()  # (B, W, T), (B, W)
    b, _, t = masks.shape
    first = torch.sort((~exists).to(torch.uint8), dim=1, stable=True).indices[:, :width]
    local = masks.gather(1, first.unsqueeze(2).expand(b, width, t))
    return local & exists.gather(1, first).unsqueeze(2)


def _keeps(inp: MetricInput, local: torch.Tensor, gone: torch.Tensor) -> torch.Tensor:
    """(B, V, T) keep masks: the batch's real tokens minus the units ``gone`` (B, V, N)."""
    removed = torch.einsum("bvn,bnt->bvt", gone.to(local.device, torch.float32),
                           local.to(torch.float32)) > 0
    return inp.batch.mask.unsqueeze(1) & ~removed


def _explainer_chain(inp, cand: Candidates, local, least: bool) -> torch.Tensor:
    """(B, N, N) bool: the units removed after k = 1..N steps of the explainer's order
    (as ``aopc_morf`` / ``aopc_lerf`` remove them); steps past n_b repeat all units."""
    b, width, _ = local.shape
    k = torch.arange(1, width + 1, device=cand.n.device).expand(b, width)
    k = torch.minimum(k, cand.n.unsqueeze(1))
    chosen = cand.ranked(inp.scores, k, least=least)  # (B, N, T) positions
    return (chosen.unsqueeze(2) & local.unsqueeze(1)).any(dim=3).cpu()


def _steps_valid(n: torch.Tensor, chain: torch.Tensor) -> torch.Tensor:
    return torch.arange(1, chain.shape[1] + 1).unsqueeze(0) <= n.unsqueeze(1)


def _chain_sum(drops: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """(B,) Σ_{k<=n} drops[:, k-1], added left to right (as the DP and beam add)."""
    total = torch.zeros(drops.shape[0], dtype=torch.float64)
    for k in range(drops.shape[1]):
        total = torch.where(k < n, total + drops[:, k], total)
    return total


def _subset_ids(gone: torch.Tensor) -> torch.Tensor:
    """(B, V) long: the subset index Σ_j 2^j of each (B, V, N) unit set."""
    powers = 2 ** torch.arange(gone.shape[2], dtype=torch.long)
    return (gone.long() * powers).sum(dim=2)


@lru_cache(maxsize=8)
def _subset_bits(width: int) -> torch.Tensor:
    """(2^N, N) bool: the units of subset s (bit j = unit j)."""
    s = torch.arange(1 << width, dtype=torch.long)
    return ((s.unsqueeze(1) >> torch.arange(width)) & 1).bool()


@lru_cache(maxsize=8)
def _layers(width: int) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """For k = 1..N: the subsets of k units (L,) and each one's k subsets of k − 1 (L, k)."""
    bits = _subset_bits(width)
    size = bits.sum(dim=1)
    out = []
    for k in range(1, width + 1):
        subsets = (size == k).nonzero().flatten()
        members = bits[subsets].nonzero()[:, 1].view(-1, k)  # the k units of each, ascending
        out.append((subsets, subsets.unsqueeze(1) - (1 << members)))
    return tuple(out)


def _subset_drops(inp, local, n, base, eraser) -> torch.Tensor:
    """(B, 2^N) float64 g(S) for every subset S of each row's units (g(∅) = 0; NaN for
    subsets naming units a row does not have). One engine trip per group of rows."""
    b, width, _ = local.shape
    g = torch.full((b, 1 << width), float("nan"), dtype=torch.float64)
    g[:, 0] = 0.0
    start = 0
    while start < b:  # groups of rows whose variants fit one trip
        stop, room = start, EXACT_VARIANTS_PER_TRIP
        while stop < b and (stop == start or (1 << int(n[stop])) <= room):
            room -= 1 << int(n[stop])
            stop += 1
        rows = torch.arange(start, stop)
        top = int(n[rows].max())
        bits = _subset_bits(top)  # (V, top)
        valid = torch.arange(1 << top).unsqueeze(0) < (1 << n[rows]).unsqueeze(1)
        valid[:, 0] = False
        sub = dataclasses.replace(inp, batch=inp.batch.select(rows.to(inp.batch.ids.device)),
                                  scores=inp.scores[rows.to(inp.scores.device)],
                                  target=inp.target[rows.to(inp.target.device)],
                                  base_probs=inp.base_probs[rows.to(inp.base_probs.device)])
        gone = bits.unsqueeze(0).expand(len(rows), -1, -1)
        keeps = _keeps(sub, local[rows.to(local.device), :top], gone)
        p = of_target(variant_probs(sub, keeps, valid.to(keeps.device), eraser), sub.target)
        g[start:stop, 1 : 1 << top] = (base[rows].unsqueeze(1) - p)[:, 1:]
        g[start:stop, 1 : 1 << top].masked_fill_(~valid[:, 1:], float("nan"))
        start = stop
    return g


def _lattice_bounds(g: torch.Tensor, n: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B,) lowest and highest Σ_k g(S_k) over chains ∅ ⊂ S_1 ⊂ … ⊂ S_n = all units:
    a longest (shortest) path through the subset lattice, layer by layer."""
    width = (g.shape[1] - 1).bit_length()
    best_low, best_high = g.clone(), g.clone()
    for subsets, below in _layers(width):
        best_low[:, subsets] = g[:, subsets] + best_low[:, below].amin(dim=2)
        best_high[:, subsets] = g[:, subsets] + best_high[:, below].amax(dim=2)
    full = ((1 << n) - 1).unsqueeze(1)
    return best_low.gather(1, full).squeeze(1), best_high.gather(1, full).squeeze(1)


def _beam_bounds(inp, local, n, base, eraser, beam_size) -> tuple[torch.Tensor, torch.Tensor]:
    """(B,) Σ_k g(S_k) of the best order kept by a minimizing and by a maximizing beam
    (the authors' procedure: extend every kept order by every unit left, keep the
    ``beam_size`` best running sums, stable order on ties)."""
    b, width, _ = local.shape
    beam = beam_size
    eye = torch.eye(width, dtype=torch.bool)
    exists = torch.arange(width).unsqueeze(0) < n.unsqueeze(1)  # (B, N)
    gone = torch.zeros(b, 2, beam, width, dtype=torch.bool)  # direction 0: min, 1: max
    total = torch.zeros(b, 2, beam, dtype=torch.float64)
    alive = torch.zeros(b, 2, beam, dtype=torch.bool)
    alive[:, :, 0] = True
    for step in range(1, width + 1):
        active = step <= n  # (B,)
        new_gone = gone.unsqueeze(3) | eye  # (B, 2, K, N: unit added, N)
        ok = alive.unsqueeze(3) & ~gone & exists[:, None, None, :] & active[:, None, None, None]
        flat_gone = new_gone.reshape(b, 2 * beam * width, width)
        p = of_target(variant_probs(inp, _keeps(inp, local, flat_gone),
                                    ok.reshape(b, -1).to(local.device), eraser), inp.target)
        running = total.unsqueeze(3) + (base.view(b, 1, 1, 1) - p.view(b, 2, beam, width))
        running = running.reshape(b, 2, beam * width)
        ok = ok.reshape(b, 2, beam * width)
        picks = []
        for d, descending in ((0, False), (1, True)):
            key = running[:, d].masked_fill(~ok[:, d], float("-inf" if descending else "inf"))
            picks.append(torch.sort(key, dim=1, descending=descending, stable=True)
                         .indices[:, :beam])
        pick = torch.stack(picks, dim=1)  # (B, 2, K') with K' = min(K, K·N)
        kept = pick.shape[2]
        cand_gone = new_gone.reshape(b, 2, beam * width, width)
        chosen_gone = cand_gone.gather(2, pick.unsqueeze(3).expand(-1, -1, -1, width))
        chosen_total = running.gather(2, pick)
        chosen_alive = ok.gather(2, pick)
        act = active.view(b, 1, 1)
        gone[:, :, :kept] = torch.where(act.unsqueeze(3), chosen_gone, gone[:, :, :kept])
        total[:, :, :kept] = torch.where(act, chosen_total, total[:, :, :kept])
        alive[:, :, :kept] = torch.where(act, chosen_alive, alive[:, :, :kept])
    return total[:, 0, 0], total[:, 1, 0]


def _spec(name: str, direction: str):
    return faithfulness_spec(
        name, direction,
        (("search", "beam"), ("beam_size", 5), ("max_exact", 12), ("if_flat", None)),
        CITATION, version="2",  # 2: equal scores in a seeded random order
        kinds=frozenset({CLASSIFICATION, PAIR_CLASSIFICATION}))


def with_search(metric: SimpleMetric, search: str, beam_size: int | None = None
                ) -> SimpleMetric:
    """``metric`` with another ``search`` (and ``beam_size``), for the examples above;
    a run sets them as ``naopc_comprehensiveness[search=exact]``."""
    changes = {"search": search, **({} if beam_size is None else {"beam_size": beam_size})}
    spec = dataclasses.replace(metric.spec, params=tuple(
        {**dict(metric.spec.params), **changes}.items()))
    return dataclasses.replace(metric, spec=spec)


NAOPC_COMP = SimpleMetric(spec=_spec("naopc_comprehensiveness", "higher"),
                          fn=naopc_comprehensiveness)
NAOPC_SUFF = SimpleMetric(spec=_spec("naopc_sufficiency", "lower"), fn=naopc_sufficiency)
