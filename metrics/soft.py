"""Soft comprehensiveness and soft sufficiency: erasure of embedding dimensions in
proportion to importance (Zhao & Aletras 2023).

Metric card
-----------
Formula. For an example x whose eligible units i = 1..n (real tokens; whole words on
a subword model) carry explainer scores a_i, and predicted class ŷ:

1. Scores to [0, 1] (``score_map``)::

       s_i = (a_i − min_j a_j) / (max_j a_j − min_j a_j)        "minmax" (default)
       s_i = 1/2 for every i when all a_i are equal (n = 1 included)
       s_i = sigmoid(a_i)                                      "sigmoid"

   Min-max keeps only the order and the relative spacing of the scores: the sign of a
   score is lost (a negative score is not "evidence against", only "low").
2. Keep probability of each embedding dimension of unit i::

       q_i = s_i          soft sufficiency       (important units are kept)
       q_i = 1 − s_i      soft comprehensiveness (important units are dropped)

   With ``kept = f`` (faithbench's variant, below) q_i ← min(1, c · q_i), c chosen so
   that Σ_i q_i = f · n (the expected number of kept units; where the units with
   q_i > 0 cannot reach it even at 1, the rest is spread evenly over the units with
   q_i = 0).
3. Draw j = 1..N (``n_samples``): every dimension d of the input embedding e_t of
   every position t of unit i is kept independently, m_{j,t,d} ~ Bernoulli(q_i), and
   x'_j has embeddings e_t ⊙ m_{j,t} (dropped dimensions are 0; kept ones are *not*
   rescaled by 1/q, unlike training dropout). Padding, special tokens and the other
   sentence under ``segment`` are never touched. The null input x₀ has every eligible
   embedding set to 0 (the limit of the perturbation: q_i = 0 everywhere).
4. With Δ(z) = max(0, p_ŷ(x) − p_ŷ(z)) and, for ``normalized=True`` (default; the
   paper's Soft-NC and Soft-NS, normalised as Carton et al.'s NS / NC)::

       soft_comprehensiveness(x) = 1/N · Σ_j clip( Δ(x'_j) / Δ(x₀), 0, 1 )
       soft_sufficiency(x)       = 1/N · Σ_j clip( 1 − Δ(x'_j) / Δ(x₀), 0, 1 )

   (the paper's S = 1 − Δ gives (S(x') − S(x₀)) / (1 − S(x₀)) = 1 − Δ(x')/Δ(x₀)).
   ``normalized=False``: the per-draw values are Δ(x'_j) and 1 − Δ(x'_j).
   An example whose null input does not lower p_ŷ (Δ(x₀) = 0) has no normalised value:
   NaN, counted as undefined, and flagged ``null_not_lower``.

The paper's value is one draw (N = 1); averaging N draws estimates the same
expectation with 1/N of the variance, so N only trades cost for noise.

Direction. Higher is more faithful for both. Note the sign: faithbench's hard
``sufficiency`` (ERASER) is p(x) − p(r), lower is better; soft sufficiency follows the
paper (1 − that drop, normalised), so higher is better.

Range. [0, 1] each (normalised or not). soft_comprehensiveness ≈ 1: dropping
dimensions of the units the explainer calls important loses as much of p_ŷ as
blanking the whole input; ≈ 0: it costs nothing. soft_sufficiency ≈ 1: keeping
dimensions of the important units (and dropping the rest) keeps p_ŷ; ≈ 0: no better
than the blank input.

Parameters. ``n_samples`` (default 10; the paper draws 1), ``seed`` (default 0: each
example's masks come from a generator seeded by ``seed`` and the example id, so a value
is the same alone or in any batch), ``kept`` (None or a fraction in (0, 1]),
``normalized`` (True), ``score_map`` ("minmax" or "sigmoid"), ``segment`` (None, 0 or
1: only that sentence of a pair is perturbed) and ``granularity`` (None/"word": a
word's pieces share the word's summed score and keep probability, each piece's
dimensions drawn on their own; "subword": pieces are the units).

The ``kept`` variant is faithbench's, not the paper's. Without it the expected amount
of input that survives, Σ_i q_i, is fixed by the *shape* of each explainer's score
distribution: min-max scores that are mostly near 0 (one spike) keep little under
soft sufficiency and nearly all under soft comprehensiveness, while flat scores do the
opposite. Two explainers are then compared on inputs blanked to different degrees,
and the amount blanked alone moves p_ŷ, which confounds the comparison (the same
reason hard erasure compares explainers at equal k). ``kept=f`` fixes that amount at
f · n for every explainer and leaves only *where* it is kept to the scores.

Cost. Per example N forward passes on perturbed embeddings, + 1 for the null input
when ``normalized`` (the unperturbed p_ŷ(x) is the session's). Soft masks never
coincide, so nothing is shared with other metrics; the rows are added to the
engine's ``rows_requested`` and ``rows_forwarded`` counts.

OOD caveat. The argument for soft erasure is that hard deletion yields short,
ungrammatical inputs the model never saw, while dropping some dimensions of a token
vector resembles the dropout the model was trained with and keeps length, order and
every position. That argument has limits: the model trained with inverted dropout at
a small rate on a different layer (BERT: after the LayerNorm of word + position +
type embeddings; here the word embeddings the model surface exposes, before
position embeddings), so vectors with half their dimensions zeroed and not rescaled
are still off-distribution; the effect of losing dimensions depends on how the model
uses them, not only on how many; and the null input (all-zero embeddings) is itself
an input no model was trained on. Compare against a random explainer.

Citation. Zhao & Aletras (2023), "Incorporating Attribution Importance for Improving
Faithfulness Metrics", ACL 2023 (arXiv 2305.10496); the normalisation of Carton,
Rathore & Tan (2020), "Evaluating and Characterizing Human Rationales", EMNLP.

Hand-worked case. A linear model, logits = Σ of the real tokens' 2-d embeddings:
token 2 embeds (ln 2, 0), token 3 (ln 3, ln 2). x = [2, 3] has odds 2 · 3/2 = 3 for
class 0, p₀(x) = 3/4; the null input has p₀ = 1/2, so Δ(x₀) = 1/4. Scores (0.7, −0.3)
min-max to s = (1, 0), so every mask is certain. Soft sufficiency keeps token 2 whole
and zeroes token 3: odds 2, p₀ = 2/3, Δ = 1/12, value 1 − (1/12)/(1/4) = 2/3
(unnormalised 1 − 1/12 = 11/12). Soft comprehensiveness keeps token 3 only: odds 3/2,
p₀ = 3/5, Δ = 3/20, value (3/20)/(1/4) = 3/5 (unnormalised 0.15).

>>> import math, torch
>>> from faithbench.benchmark.core.api import Batch, MetricInput
>>> from faithbench.benchmark.core.perturb import Perturber
>>> class Linear:  # logits = sum of the real tokens' embeddings (rows of ``table``)
...     pad_id, mask_id, baseline_id = 0, 1, 0
...     table = torch.tensor([[0., 0.], [0., 0.], [math.log(2), 0.],
...                           [math.log(3), math.log(2)]], dtype=torch.float64)
...     def embed(self, batch): return self.table[batch.ids]
...     def logits_from_embeddings(self, e, batch): return (e * batch.mask[..., None]).sum(1)
...     def logits(self, batch): return self.logits_from_embeddings(self.embed(batch), batch)
>>> batch = Batch(torch.tensor([[2, 3]]), torch.ones(1, 2, dtype=torch.bool), ("a",))
>>> perturber = Perturber(Linear())
>>> inp = MetricInput(batch, torch.tensor([[0.7, -0.3]]), torch.tensor([0]),
...                   perturber.probs(batch), perturber)
>>> round(SOFT_SUFFICIENCY.compute(inp).values.item(), 4)
0.6667
>>> round(SOFT_COMPREHENSIVENESS.compute(inp).values.item(), 4)
0.6
>>> plain = dict(SOFT_SUFFICIENCY.spec.params, normalized=False)
>>> round(soft_sufficiency(inp, **plain).values.item(), 4)
0.9167
>>> round(soft_comprehensiveness(inp, **plain).values.item(), 4)
0.15
"""

from __future__ import annotations

import torch

from faithbench.benchmark.core.api import (
    CLASSIFICATION,
    EMBEDDINGS,
    PAIR_CLASSIFICATION,
    MetricInput,
    MetricOutput,
    MetricSpec,
    SimpleMetric,
    capabilities,
    example_generator,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.metrics.variants import Candidates, base_target_prob, candidates

CITATION = (
    "Zhao & Aletras (2023). Incorporating Attribution Importance for Improving Faithfulness "
    "Metrics. ACL 2023 (arXiv 2305.10496); normalisation of Carton, Rathore & Tan (2020). "
    "Evaluating and Characterizing Human Rationales. EMNLP 2020."
)
SCORE_MAPS = ("minmax", "sigmoid")
FLAT = 0.5  # s_i of every unit when a row's scores are all equal


def soft_comprehensiveness(inp: MetricInput, *, n_samples: int, seed: int, kept: float | None,
                           normalized: bool, score_map: str, segment: int | None,
                           granularity: str | None) -> MetricOutput:
    """(B,) mean over draws of the (normalised) drop of p_ŷ when each eligible unit's
    embedding dimensions are kept with probability 1 − s_i."""
    return _soft(inp, "soft_comprehensiveness", False, n_samples, seed, kept, normalized,
                 score_map, segment, granularity)


def soft_sufficiency(inp: MetricInput, *, n_samples: int, seed: int, kept: float | None,
                     normalized: bool, score_map: str, segment: int | None,
                     granularity: str | None) -> MetricOutput:
    """(B,) mean over draws of 1 − the (normalised) drop of p_ŷ when each eligible
    unit's embedding dimensions are kept with probability s_i."""
    return _soft(inp, "soft_sufficiency", True, n_samples, seed, kept, normalized,
                 score_map, segment, granularity)


def embedding_model(metric: str, inp: MetricInput):
    """The model behind the perturbation engine, if it offers ``embed`` and
    ``logits_from_embeddings`` (the ``embeddings`` capability); else an InputError."""
    model = inp.perturber.model
    has = all(callable(getattr(model, m, None)) for m in ("embed", "logits_from_embeddings"))
    if not has or EMBEDDINGS not in capabilities(model):
        raise InputError(f"metric {metric} masks input embeddings: it needs a model with the "
                         f"{EMBEDDINGS!r} capability (embed() / logits_from_embeddings()); "
                         f"{type(model).__name__} has none")
    return model


def check_params(metric: str, n_samples, seed, kept, normalized, score_map) -> None:
    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    if not is_int(n_samples) or n_samples < 1:
        raise InputError(f"metric {metric}: n_samples must be an integer >= 1, got {n_samples!r}")
    if not is_int(seed) or seed < 0:
        raise InputError(f"metric {metric}: seed must be an integer >= 0, got {seed!r}")
    if kept is not None and (isinstance(kept, bool) or not isinstance(kept, (int, float))
                             or not 0 < kept <= 1):
        raise InputError(f"metric {metric}: kept must be None or a fraction in (0, 1], "
                         f"got {kept!r}")
    if not isinstance(normalized, bool):
        raise InputError(f"metric {metric}: normalized must be True or False, got {normalized!r}")
    if score_map not in SCORE_MAPS:
        raise InputError(f"metric {metric}: unknown score_map {score_map!r}; choose one of "
                         f"{', '.join(SCORE_MAPS)}")


def unit_scores_01(scores: torch.Tensor, exists: torch.Tensor, score_map: str) -> torch.Tensor:
    """(B, W) float64 scores mapped to [0, 1] over each row's existing units (0 elsewhere):
    min-max (``FLAT`` where a row's scores are all equal) or the logistic sigmoid."""
    s = scores.double()
    if score_map == "sigmoid":
        return torch.where(exists, torch.sigmoid(s), 0.0)
    lo = torch.where(exists, s, float("inf")).min(dim=1, keepdim=True).values
    hi = torch.where(exists, s, float("-inf")).max(dim=1, keepdim=True).values
    span = hi - lo
    scaled = (s - lo) / torch.where(span > 0, span, 1.0)
    return torch.where(exists, torch.where(span > 0, scaled, FLAT), 0.0)


def rescale_to(q: torch.Tensor, total: float) -> torch.Tensor:
    """(n,) probabilities min(1, c · q) with c such that they sum to ``total``
    (0 < total <= n). Where the units with q > 0 cannot reach it even at 1, they are
    set to 1 and the remainder is spread evenly over the units with q = 0.

    >>> rescale_to(torch.tensor([1.0, 0.5, 0.0, 0.0], dtype=torch.float64), 1.0).tolist()
    [0.6666666666666666, 0.3333333333333333, 0.0, 0.0]
    >>> rescale_to(torch.tensor([1.0, 0.5, 0.0, 0.0], dtype=torch.float64), 3.0).tolist()
    [1.0, 1.0, 0.5, 0.5]
    """
    n = q.numel()
    positive = q > 0
    m = int(positive.sum())
    if total >= m:  # every unit with q > 0 at 1, the rest spread over the others
        rest = (total - m) / (n - m) if n > m else 0.0
        return torch.where(positive, torch.ones_like(q), torch.full_like(q, rest))
    ordered = torch.sort(q, descending=True).values
    tails = ordered.flip(0).cumsum(0).flip(0)  # tails[j] = sum of ordered[j:]
    for j in range(m):  # j units capped at 1, c fitted to the others
        c = (total - j) / float(tails[j])
        if c * float(ordered[j]) <= 1.0:
            return torch.clamp(c * q, max=1.0)
    raise AssertionError("unreachable: total < m always has a solution")


def keep_probabilities(scores: torch.Tensor, cand: Candidates, *, keep_important: bool,
                       score_map: str, kept: float | None) -> torch.Tensor:
    """(B, T) float64 probability that each embedding dimension at a position is kept:
    q_i = s_i (``keep_important``, sufficiency) or 1 − s_i (comprehensiveness) of the
    position's unit, rescaled to sum to kept · n per row where ``kept`` is set; 1 at
    every position that is not eligible (padding, the other sentence)."""
    if cand.words is None:
        unit_scores, exists = scores, cand.eligible
    else:
        unit_scores, exists = cand.pool(scores)
    s = unit_scores_01(unit_scores, exists, score_map)
    q = s if keep_important else 1.0 - s
    q = torch.where(exists, q, 0.0)
    if kept is not None:
        rows = []
        for row in range(q.shape[0]):
            where = exists[row].nonzero().flatten()
            out = torch.zeros_like(q[row])
            out[where] = rescale_to(q[row, where], kept * len(where))
            rows.append(out)
        q = torch.stack(rows) if rows else q
    if cand.words is not None:
        q = q.gather(1, torch.where(cand.eligible, cand.words, 0))
    return torch.where(cand.eligible, q, 1.0)


def draw_keeps(inp: MetricInput, probs: torch.Tensor, n_samples: int, seed: int,
               dim: int) -> torch.Tensor:
    """(N, B, T, D) bool: dimension d of position t kept in draw j, Bernoulli(probs[b, t])
    at real positions (always kept elsewhere). Example b's draws come from
    ``example_generator`` seeded by ``seed`` and its id: n_samples x (its real
    positions, in order) x dim uniforms, so they do not depend on the batch around it."""
    batch = inp.batch
    b, t = batch.mask.shape
    keeps = torch.ones(n_samples, b, t, dim, dtype=torch.bool)
    mask = batch.mask.cpu()
    p = probs.cpu()
    root = torch.Generator().manual_seed(seed)
    for row in range(b):
        where = mask[row].nonzero().flatten()
        g = example_generator(root, batch.example_ids[row])
        u = torch.rand(n_samples, len(where), dim, generator=g, dtype=torch.float64)
        keeps[:, row, where] = u < p[row, where].view(1, -1, 1)
    return keeps


def _forward(inp: MetricInput, model, embeds: torch.Tensor, keeps: torch.Tensor
             ) -> torch.Tensor:
    """(N, B, C) float64 probabilities of the N x B masked embeddings, in chunks."""
    n, b = keeps.shape[:2]
    rows = n * b
    chunk = max(1, min(getattr(inp.perturber, "chunk_size", 512),
                       getattr(model, "max_rows_per_pass", rows) or rows))
    out = []
    for start in range(0, rows, chunk):
        idx = torch.arange(start, min(start + chunk, rows))
        which = idx % b  # flattened (draw, row): row = index mod B
        part = inp.batch.select(which.to(inp.batch.ids.device))
        masks = keeps.reshape(rows, *keeps.shape[2:])[idx].to(embeds.device)
        logits = model.logits_from_embeddings(embeds[which.to(embeds.device)] * masks, part)
        out.append(torch.softmax(logits.double(), dim=-1).cpu())
    _count(inp, rows)
    return torch.cat(out).view(n, b, -1)


def _count(inp: MetricInput, rows: int) -> None:
    """Add the rows forwarded here to the engine's counts (what records report)."""
    engine = inp.perturber
    for name in ("rows_requested", "rows_forwarded"):
        if isinstance(getattr(engine, name, None), int):
            setattr(engine, name, getattr(engine, name) + rows)


def _soft(inp: MetricInput, name: str, sufficiency: bool, n_samples: int, seed: int,
          kept: float | None, normalized: bool, score_map: str, segment, granularity
          ) -> MetricOutput:
    check_params(name, n_samples, seed, kept, normalized, score_map)
    model = embedding_model(name, inp)
    if not len(inp.batch):
        return MetricOutput(torch.zeros(0, dtype=torch.float64),
                            {"null_not_lower": torch.zeros(0, dtype=torch.bool)})
    cand = candidates(name, inp, segment, granularity)
    scores = inp.scores.detach().to(torch.float64)
    bad = (~torch.isfinite(scores) & cand.eligible).any(dim=1).nonzero().flatten().tolist()
    if bad:
        ids = ", ".join(inp.batch.example_ids[i] for i in bad)
        raise InputError(f"metric {name}: non-finite scores in examples {ids}")
    q = keep_probabilities(scores, cand, keep_important=sufficiency, score_map=score_map,
                           kept=kept)
    target = inp.target.to(torch.long).cpu()
    rows = torch.arange(len(inp.batch))
    with torch.no_grad():
        embeds = model.embed(inp.batch)
        keeps = draw_keeps(inp, q, n_samples, seed, embeds.shape[-1])
        probs = _forward(inp, model, embeds, keeps)  # (N, B, C)
        p_draws = probs[:, rows, target].T  # (B, N)
        p = base_target_prob(inp)  # (B,)
        drop = (p.unsqueeze(1) - p_draws).clamp(min=0)
        if not normalized:
            per = 1.0 - drop if sufficiency else drop
            return MetricOutput(per.mean(dim=1))
        blank = (~cand.eligible.cpu()).unsqueeze(0).unsqueeze(-1).expand(
            1, *cand.eligible.shape, embeds.shape[-1])
        p_null = _forward(inp, model, embeds, blank)[0, rows, target]  # (B,)
    null_drop = (p - p_null).clamp(min=0)
    defined = null_drop > 0
    ratio = drop / torch.where(defined, null_drop, 1.0).unsqueeze(1)
    per = (1.0 - ratio if sufficiency else ratio).clamp(0.0, 1.0)
    values = torch.where(defined, per.mean(dim=1), float("nan"))
    return MetricOutput(values, {"null_not_lower": ~defined})


def _spec(name: str) -> MetricSpec:
    return MetricSpec(
        name=name,
        version="1",
        direction="higher",
        kinds=frozenset({CLASSIFICATION, PAIR_CLASSIFICATION}),
        params=(("n_samples", 10), ("seed", 0), ("kept", None), ("normalized", True),
                ("score_map", "minmax"), ("segment", None), ("granularity", None)),
        citation=CITATION,
    )


SOFT_COMPREHENSIVENESS = SimpleMetric(spec=_spec("soft_comprehensiveness"),
                                      fn=soft_comprehensiveness)
SOFT_SUFFICIENCY = SimpleMetric(spec=_spec("soft_sufficiency"), fn=soft_sufficiency)
