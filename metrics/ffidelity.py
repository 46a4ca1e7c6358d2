"""F-Fidelity (Zheng, Shirani, Chen, Lin, Cheng, Guo & Luo, ICLR 2025): fidelity measured on
a surrogate model trained with random masking, removing only a random, bounded share of
the tokens an explanation ranks.

Metric card
-----------
Formula. A surrogate f_r is obtained once per (task, model configuration, seed), without
looking at any explanation: the task's model trained with random masking
(``--masked-training``, ``TaskOptions.masked_training``). For an example x with n real
tokens (words on a subword model), gold label y, explanation size s from the grid
``bins`` and the top k = ⌈s·n⌉ tokens T_s of the explainer's ranking (ties in a random order
seeded by the example, ``faithbench.benchmark.core.ranking``), let R be the region randomly erased:
R = T_s for FFid⁺ (the explanation removed), R = the other n − k tokens for FFid⁻ (the
explanation kept). Each token of R is erased (``eraser``, default the unknown-word id)
independently with probability

    q = min(α, β·n / |R|)       (so at most β·n tokens are erased on average)

giving x'. With m(·) = 1(argmax f_r(·) = y) (``measure=accuracy``, the paper's) or
f_r(·)_y (``measure=probability``)::

    ffidelity_plus(x)  = 1/|S| · Σ_{s∈S} ( m(x) − E[ m(x') | R = T_s ] )
    ffidelity_minus(x) = 1/|S| · Σ_{s∈S} ( m(x) − E[ m(x') | R = rest of T_s ] )

E is estimated by the mean over ``samples`` draws (a torch.Generator seeded by the run
seed and the example id, salted, so the draws do not depend on the batch and are the
same for every explainer: common random numbers); ``stochastic_removal(...,
samples=None)`` computes it exactly by enumerating every subset of R. Where R is empty
(FFid⁻ when k = n) nothing is erased and the term is 0. The explanation is the
explainer's scores on the *evaluated* model; only the forward passes use f_r.

Direction. ``ffidelity_plus``: higher is more faithful (erasing a share of the top tokens
changes the surrogate's answer). ``ffidelity_minus``: lower is more faithful (erasing a
share of the rest should hardly matter).

Range. [−1, 1] (accuracy: per example; an example the surrogate misclassifies can score
below 0, as in the paper's Table 11). Undefined (NaN) for an example without a gold label.

Parameters. ``alpha`` (0.5) the erasure rate inside R; ``beta`` (0.1) the cap, as a share
of n, on the expected number erased; ``samples`` (50) draws N per explanation size;
``bins`` (0.05, 0.10, …, 0.95) the explanation sizes s; ``measure`` (``accuracy`` |
``probability``); ``eraser`` (``mask``: the unknown-word id, what masked training
substitutes); ``granularity`` (words on subword models, as every erasure metric).

Cost. One training of the surrogate per (task, configuration, seed), shared by every
explainer and by both metrics (cached under its content key like every model; the
synthetic task trains in seconds). Then per example and metric |S|·N erased variants
(19 × 50 = 950 by default) and the unperturbed input, through one perturbation engine
that forwards each distinct variant once; on short texts most draws coincide.

Where we differ from the paper (and from the authors' code, github.com/AslanDing/Finetune-Fidelity).
(a) Surrogate: the paper fine-tunes a copy of the trained model with random deletion
(``RandomPixelRemoval``: exactly ⌊β·n⌋ features of every training input; "up to β" in the
paper's figure). We train the task's model from scratch with faithbench's masked
training (Madsen et al.'s scheme: half of each batch masked, each chosen example at a
ratio r ~ U(0, 1), tokens replaced by the unknown-word id), which covers every ratio up
to β and beyond. Where the evaluated model was itself trained with ``--masked-training``
the surrogate is that same model (the same cache key). (b) Text: a removed token is
replaced by the unknown-word id (``eraser=mask``; images: the pixel set to 0). (c)
Explanations: we score the evaluated model's explanations on f_r (as ROAR does); the
authors' released evaluation script explains the fine-tuned model itself. (d) Sizes:
the paper's curves run over explanation sizes 5 %–95 % and its tables average them; the
code keeps ⌊(s + 0.01)·n⌋ pixels, we keep ⌈s·n⌉ (≥ 1) tokens; FFid⁻ at size s keeps the
top s and erases from the rest (the code's LeRF at s erases from the bottom s: over the
symmetric default grid the same set of regions). (e) Draws: per token Bernoulli(q), as
the authors' code (not a fixed-size subset), with q = min(α, β·n/|R|) as its
``use_max`` branch. (f) The values are per example and averaged over examples by the
run (the paper's dataset means are the same numbers).

Citation. Zheng, Shirani, Chen, Lin, Cheng, Guo & Luo (2025), "F-Fidelity: A Robust
Framework for Faithfulness Evaluation of Explainable AI", ICLR 2025 (arXiv:2410.02970).

Hand-worked case. The voting model (token 2 votes class 0, token 3 class 1, p(c) ∝ 1 +
votes); x = [2, 2, 2, 3], y = 0, p₀(x) = 4/6; scores (0.9, 0.8, 0.1, 0.5), so the
ranking is positions 0, 1, 3, 2. One size s = 0.5: T = {0, 1}; α = 0.5, β = 0.25, so
q = min(0.5, 0.25·4/2) = 0.5. FFid⁺ erases positions 0 and 1 each with probability 1/2:
none (1/4) p₀ = 4/6, one (1/2) p₀ = 3/5, both (1/4) p₀ = 2/4, E = 71/120, and
FFid⁺ = 4/6 − 71/120 = 9/120 = 0.075. FFid⁻ erases from {2, 3}: none 4/6, position 2 only
3/5, position 3 only 4/5, both 3/4, each 1/4: E = 169/240, FFid⁻ = −9/240 = −0.0375 (erasing
the counter-vote raises p₀). With ``measure=accuracy`` every variant still predicts
class 0: both are 0.

>>> import torch
>>> from faithbench.benchmark.core.api import Batch, MetricInput
>>> from faithbench.benchmark.core.perturb import Perturber
>>> from faithbench.testing import Votes
>>> batch = Batch(torch.tensor([[2, 2, 2, 3]]), torch.ones(1, 4, dtype=torch.bool), ("a",))
>>> perturber = Perturber(Votes())
>>> inp = MetricInput(batch, torch.tensor([[0.9, 0.8, 0.1, 0.5]]), torch.tensor([0]),
...                   perturber.probs(batch), perturber)
>>> args = {"bins": (0.5,), "alpha": 0.5, "beta": 0.25, "samples": None, "eraser": "mask"}
>>> plus = stochastic_removal(inp, torch.tensor([0]), minus=False, measure="probability", **args)
>>> round(plus.values.item(), 6), round(9 / 120, 6)
(0.075, 0.075)
>>> minus = stochastic_removal(inp, torch.tensor([0]), minus=True, measure="probability", **args)
>>> round(minus.values.item(), 6), round(-9 / 240, 6)
(-0.0375, -0.0375)
>>> stochastic_removal(inp, torch.tensor([0]), minus=False, measure="accuracy", **args).values
tensor([0.], dtype=torch.float64)

Sampled (the metric's way), N = 4000 draws: within 3 standard errors of the exact 0.075
(p₀ over the draws has standard deviation 0.0595).

>>> sampled = stochastic_removal(inp, torch.tensor([0]), minus=False, measure="probability",
...                              generators=[removal_generator(0, "a")], **{**args, "samples": 4000})
>>> abs(sampled.values.item() - 0.075) < 3 * 0.0595 / 4000 ** 0.5
True
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Sequence

import torch

from faithbench.benchmark.core.api import (
    CLASSIFICATION,
    PAIR_CLASSIFICATION,
    MetricInput,
    MetricOutput,
    MetricSpec,
    TrainingInput,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.perturb import Perturber
from faithbench.metrics.variants import candidates, check_eraser, ranked_mask, variant_probs

CITATION = ("Zheng, Shirani, Chen, Lin, Cheng, Guo & Luo (2025). F-Fidelity: A Robust "
            "Framework for Faithfulness Evaluation of Explainable AI. ICLR 2025 "
            "(arXiv:2410.02970).")
SIZES = tuple(round(0.05 * i, 2) for i in range(1, 20))  # 0.05, 0.10, ..., 0.95
MEASURES = ("accuracy", "probability")
EXACT_LIMIT = 16  # exhaustive expectation: at most 2^16 subsets of one region

def removal_generator(seed: int, example_id: str) -> torch.Generator:
    """The generator of one example's removal draws: seeded by the run seed and the
    example id (salted, so the draws are not the ``random`` explainer's own)."""
    digest = hashlib.blake2b(f"ffidelity\x00{seed}\x00{example_id}".encode(),
                             digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") >> 1)


def sizes_k(n: torch.Tensor, bins: Sequence[float]) -> torch.Tensor:
    """(B, S) long: ⌈s·n⌉ per size, at least 1 and at most n (a float guard keeps
    0.15·20 at 3)."""
    s = torch.tensor([float(b) for b in bins], dtype=torch.float64)
    k = torch.ceil(n.double().cpu().unsqueeze(1) * s.unsqueeze(0) - 1e-9).long()
    return torch.minimum(k.clamp(min=1), n.cpu().unsqueeze(1))


def stochastic_removal(inp: MetricInput, labels: torch.Tensor, *, bins: Sequence[float],
                       alpha: float, beta: float, samples: int | None, minus: bool,
                       eraser: str, measure: str, granularity: str | None = None,
                       generators: Sequence[torch.Generator] | None = None) -> MetricOutput:
    """(B,) FFid⁺ (``minus=False``) or FFid⁻ per example of ``inp`` (whose perturber is
    the surrogate's), and its (B, S) curve over the sizes ``bins``. ``samples=None``:
    the exact expectation over every subset of each region (at most 16 units);
    otherwise the mean of ``samples`` draws from ``generators`` (one per example)."""
    name = "ffidelity_minus" if minus else "ffidelity_plus"
    if measure not in MEASURES:
        raise InputError(f"metric {name}: measure must be one of {', '.join(MEASURES)}")
    check_eraser(name, eraser)
    cand = candidates(name, inp, None, granularity)
    unit_scores = cand.unit_scores(inp.scores.float())
    unit_mask = cand.eligible if cand.words is None else cand.pool(inp.scores.float())[1]
    b, s = len(inp.batch), len(bins)
    k = sizes_k(cand.n, bins)  # (B, S)
    top = ranked_mask(unit_scores.cpu(), unit_mask.cpu(), k,
                      cand.unit_ties(unit_scores).cpu())  # (B, S, W)
    region = (unit_mask.cpu().unsqueeze(1) & ~top) if minus else top
    size = region.sum(2)  # (B, S)
    rate = torch.where(size > 0, torch.clamp(beta * cand.n.cpu().double().unsqueeze(1)
                                             / size.clamp(min=1), max=alpha),
                       torch.zeros((), dtype=torch.float64))  # (B, S)
    if samples is None:
        removed, weight = _every_subset(region, rate, name)
    else:
        if generators is None or len(generators) != b:
            raise ValueError("sampled removal needs one generator per example")
        removed = _draws(region, rate, unit_mask.cpu(), samples, generators)
        weight = torch.full(removed.shape[:3], 1.0 / samples, dtype=torch.float64)
    v = removed.shape[2]  # (B, S, V, W) removed units, (B, S, V) weights
    flat = removed.reshape(b, s * v, -1)
    if cand.words is not None:
        flat = cand.expand(flat)  # units -> their positions
    keeps = inp.batch.mask.cpu().unsqueeze(1) & ~flat
    valid = weight.reshape(b, s * v) > 0
    probs = variant_probs(inp, keeps.to(inp.batch.mask.device), valid.to(inp.batch.mask.device),
                          eraser)  # (B, S·V, C)
    base = inp.base_probs.detach().to("cpu", torch.float64)
    labels = labels.cpu().long()
    known = labels >= 0
    pick = labels.clamp(min=0)
    if measure == "accuracy":
        m0 = (base.argmax(1) == pick).double()
        m = (probs.argmax(2) == pick.unsqueeze(1)).double()
    else:
        m0 = base.gather(1, pick.unsqueeze(1)).squeeze(1)
        m = probs.gather(2, pick.view(b, 1, 1).expand(b, s * v, 1)).squeeze(2)
    m = torch.where(valid, m, torch.zeros((), dtype=torch.float64)).reshape(b, s, v)
    expected = (m * weight).sum(2)  # (B, S)
    curve = m0.unsqueeze(1) - expected
    curve = torch.where(known.unsqueeze(1), curve, torch.full((), float("nan"),
                                                              dtype=torch.float64))
    return MetricOutput(curve.mean(1), curve=curve)


def _draws(region: torch.Tensor, rate: torch.Tensor, unit_mask: torch.Tensor, samples: int,
           generators: Sequence[torch.Generator]) -> torch.Tensor:
    """(B, S, N, W) units erased in each of N draws: each unit of the region with
    probability ``rate``. Example b draws (S, N, n_b) uniforms from its own generator,
    laid over its units in order, so its draws do not depend on the batch."""
    b, s, w = region.shape
    u = torch.ones(b, s, samples, w, dtype=torch.float64)
    for row, gen in enumerate(generators):
        units = unit_mask[row].nonzero().flatten()
        u[row][:, :, units] = torch.rand((s, samples, len(units)), generator=gen,
                                         dtype=torch.float64)
    return region.unsqueeze(2) & (u < rate.view(b, s, 1, 1))


def _every_subset(region: torch.Tensor, rate: torch.Tensor, name: str
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S, V, W) every subset A of each region and (B, S, V) its probability
    q^|A|·(1 − q)^(|R| − |A|) (0 for padding variants)."""
    b, s, w = region.shape
    widest = int(region.sum(2).max()) if region.numel() else 0
    if widest > EXACT_LIMIT:
        raise InputError(f"metric {name}: exact expectation over a region of {widest} "
                         f"units (at most {EXACT_LIMIT}); draw samples instead")
    v = 2 ** widest
    removed = torch.zeros(b, s, v, w, dtype=torch.bool)
    weight = torch.zeros(b, s, v, dtype=torch.float64)
    for i, j in itertools.product(range(b), range(s)):
        units = region[i, j].nonzero().flatten().tolist()
        q = float(rate[i, j])
        for c, bits in enumerate(itertools.product((False, True), repeat=len(units))):
            chosen = [u for u, bit in zip(units, bits) if bit]
            removed[i, j, c, chosen] = True
            weight[i, j, c] = q ** len(chosen) * (1 - q) ** (len(units) - len(chosen))
    return removed, weight


def _padded(rows: Sequence[Sequence[float]], shape: torch.Size) -> torch.Tensor:
    out = torch.zeros(shape, dtype=torch.float32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(list(row), dtype=torch.float32)
    return out


@dataclasses.dataclass(frozen=True)
class FFidelity:
    """FFid⁺ or FFid⁻ of the evaluated model's explanations, on the masked-training
    surrogate (``inp.retrain(None, seed, masked_training=True)``)."""

    spec: MetricSpec
    minus: bool

    def evaluate(self, inp: TrainingInput) -> MetricOutput:
        p = dict(self.spec.params)
        if p["measure"] not in MEASURES:
            raise InputError(f"metric {self.spec.name}: measure must be one of "
                             f"{', '.join(MEASURES)}, got {p['measure']!r}")
        check_eraser(self.spec.name, p["eraser"])
        session, seed = inp.session, inp.options.seed
        # explanation-agnostic: the same data, no transform; cached under its own key,
        # so every explainer (and both metrics) share one trained surrogate
        surrogate = inp.retrain(None, seed, masked_training=True)
        model = surrogate.model
        model.eval()
        perturber = Perturber(model, eraser=p["eraser"])
        examples, by_id = session.examples, dict(zip((e.id for e in session.examples),
                                                     inp.scores))
        size = min(64, getattr(model, "max_rows_per_pass", 64))
        values, curves = [], []
        for batch, labels, _ in surrogate.batches(examples, size):
            scores = _padded([by_id[i] for i in batch.example_ids], batch.ids.shape)
            with torch.no_grad():
                mi = MetricInput(batch, scores, labels, perturber.probs(batch), perturber)
                out = stochastic_removal(
                    mi, labels, bins=p["bins"], alpha=float(p["alpha"]), beta=float(p["beta"]),
                    samples=None if p["samples"] is None else int(p["samples"]),
                    minus=self.minus, eraser=p["eraser"],
                    measure=p["measure"], granularity=p["granularity"],
                    generators=[removal_generator(seed, i) for i in batch.example_ids])
            values.append(out.values)
            curves.append(out.curve)
        if not values:
            return MetricOutput(torch.zeros(0, dtype=torch.float64))
        return MetricOutput(torch.cat(values), curve=torch.cat(curves))


def _spec(name: str, direction: str) -> MetricSpec:
    return MetricSpec(
        name=name, version="2", direction=direction,  # 2: ties in a seeded random order
        kinds=frozenset({CLASSIFICATION, PAIR_CLASSIFICATION}),
        params=(("alpha", 0.5), ("beta", 0.1), ("samples", 50), ("bins", SIZES),
                ("measure", "accuracy"), ("eraser", "mask"), ("granularity", None)),
        family="faithfulness", citation=CITATION, needs_training=True)


FFIDELITY_PLUS = FFidelity(_spec("ffidelity_plus", "higher"), minus=False)
FFIDELITY_MINUS = FFidelity(_spec("ffidelity_minus", "lower"), minus=True)

__all__ = ["FFIDELITY_MINUS", "FFIDELITY_PLUS", "removal_generator",
           "stochastic_removal"]
