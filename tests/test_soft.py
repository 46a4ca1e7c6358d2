"""Soft comprehensiveness and soft sufficiency (``faithbench.metrics.soft``).

The expected values are computed by a route that shares nothing with the metric but
the model: every one of the 2^(n·D) dimension masks is enumerated, weighted by its
Bernoulli probability, and pushed through the bag-of-words model by hand (float64,
``math.exp``); the metric's Monte Carlo estimate must fall within 4.5 standard errors
(the exact standard deviation, from the same enumeration, over sqrt(N)).
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from faithbench.benchmark.core.api import Batch, MetricInput
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.perturb import Perturber
from faithbench.metrics.soft import (
    SOFT_COMPREHENSIVENESS,
    SOFT_SUFFICIENCY,
    draw_keeps,
    keep_probabilities,
    rescale_to,
    soft_comprehensiveness,
    soft_sufficiency,
)
from faithbench.metrics.variants import candidates
from faithbench.testing import Votes
from tests.analytic import BagOfWords, make_batch

# three classes, so D = 3 embedding dimensions per token
WEIGHTS = {2: (1.2, -0.3, 0.1), 3: (0.4, 0.9, -0.6), 4: (-0.2, 0.3, 0.8), 5: (0.7, 0.2, -0.1)}
BIAS = (0.1, 0.0, -0.2)
PLAIN = dict(SOFT_SUFFICIENCY.spec.params)


def make_input(model, rows, scores, segments=None, example_ids=None) -> MetricInput:
    batch = make_batch(rows, example_ids=example_ids, segments=segments)
    width = batch.ids.shape[1]
    s = torch.zeros(len(rows), width)
    for i, row in enumerate(scores):
        s[i, : len(row)] = torch.tensor(row)
    perturber = Perturber(model)
    base = perturber.probs(batch)
    return MetricInput(batch, s, base.argmax(dim=1), base, perturber)


def softmax(z):
    m = max(z)
    e = [math.exp(v - m) for v in z]
    return [v / sum(e) for v in e]


def minmax(a):
    lo, hi = min(a), max(a)
    return [0.5] * len(a) if hi == lo else [(v - lo) / (hi - lo) for v in a]


def scaled(q, total):
    """min(1, c·q) summing to ``total``, c found by bisection (not the metric's route)."""
    lo, hi = 0.0, 1e9
    for _ in range(200):
        c = (lo + hi) / 2
        if sum(min(1.0, c * v) for v in q) < total:
            lo = c
        else:
            hi = c
    return [min(1.0, hi * v) for v in q]


def exact(row, q, *, sufficiency, normalized, weights=WEIGHTS, bias=BIAS):
    """(mean, sd) of the per-draw value over every dimension mask, by enumeration."""
    w = [weights[t] for t in row]
    d = len(bias)
    full = softmax([bias[c] + sum(v[c] for v in w) for c in range(d)])
    y = max(range(d), key=lambda c: full[c])
    p, p0 = full[y], softmax(list(bias))[y]
    null_drop = max(0.0, p - p0)
    mean = second = 0.0
    for bits in itertools.product((0, 1), repeat=len(row) * d):
        prob = 1.0
        for k, m in enumerate(bits):
            qi = q[k // d]
            prob *= qi if m else 1 - qi
        if prob == 0:
            continue
        z = [bias[c] + sum(w[t][c] * bits[t * d + c] for t in range(len(row))) for c in range(d)]
        drop = max(0.0, p - softmax(z)[y])
        if normalized:
            r = drop / null_drop
            value = min(1.0, max(0.0, 1 - r if sufficiency else r))
        else:
            value = 1 - drop if sufficiency else drop
        mean += prob * value
        second += prob * value * value
    return mean, math.sqrt(max(second - mean * mean, 0.0))


CASES = [  # (row, scores, score_map, kept)
    ([2, 3, 4], [1.0, -0.5, 0.3], "sigmoid", None),
    ([2, 3, 5, 4], [2.0, 0.5, 0.0, 1.0], "minmax", None),
    ([3, 2, 4, 5], [0.1, 0.9, 0.3, -0.4], "minmax", 0.4),
]


def hand_q(scores, score_map, kept, sufficiency):
    s = minmax(scores) if score_map == "minmax" else [1 / (1 + math.exp(-a)) for a in scores]
    q = s if sufficiency else [1 - v for v in s]
    return q if kept is None else scaled(q, kept * len(q))


@pytest.mark.parametrize("row, scores, score_map, kept", CASES)
@pytest.mark.parametrize("sufficiency", [True, False])
@pytest.mark.parametrize("normalized", [True, False])
def test_estimate_matches_enumeration(row, scores, score_map, kept, sufficiency, normalized):
    model = BagOfWords(WEIGHTS, BIAS)
    inp = make_input(model, [row], [scores])
    n = 20_000
    fn = soft_sufficiency if sufficiency else soft_comprehensiveness
    params = dict(PLAIN, n_samples=n, seed=3, kept=kept, normalized=normalized,
                  score_map=score_map)
    got = fn(inp, **params).values.item()
    q = hand_q(scores, score_map, kept, sufficiency)
    mean, sd = exact(row, q, sufficiency=sufficiency, normalized=normalized)
    tol = 4.5 * sd / math.sqrt(n) + 1e-6
    assert abs(got - mean) <= tol, (got, mean, tol)
    # the test can fail: keeping with the other orientation (q ↔ 1 − q) is far outside it
    other, _ = exact(row, hand_q(scores, score_map, kept, not sufficiency),
                     sufficiency=sufficiency, normalized=normalized)
    assert abs(other - mean) > 5 * tol


def test_min_max_zero_one_equals_hard_erasure():
    """Scores that min-max to 0 and 1 make every mask certain: dropping all of a token's
    dimensions is deleting it from the bag of words, so the values are the hard
    ones of the erasure engine, at any seed and any number of draws."""
    model = BagOfWords(WEIGHTS, BIAS)
    inp = make_input(model, [[2, 3, 4]], [[3.0, -1.0, -1.0]])  # s = (1, 0, 0)
    p = inp.base_probs[0, inp.target[0]].double().item()
    keep_top = torch.tensor([[True, False, False]])
    rows = torch.tensor([0, 0])
    hard = inp.perturber.probs_of_variants(inp.batch, rows, torch.cat([keep_top, ~keep_top]))
    p_top, p_rest = (hard[:, inp.target[0]].double()).tolist()
    p_null = softmax(list(BIAS))[inp.target[0].item()]
    for seed, n in ((0, 1), (7, 5)):
        plain = dict(PLAIN, seed=seed, n_samples=n, normalized=False)
        suff = soft_sufficiency(inp, **plain).values.item()
        comp = soft_comprehensiveness(inp, **plain).values.item()
        assert suff == pytest.approx(1 - max(0.0, p - p_top), abs=1e-6)
        assert comp == pytest.approx(max(0.0, p - p_rest), abs=1e-6)
        normed = dict(plain, normalized=True)
        assert soft_comprehensiveness(inp, **normed).values.item() == pytest.approx(
            min(1.0, max(0.0, p - p_rest) / (p - p_null)), abs=1e-6)
        assert soft_sufficiency(inp, **normed).values.item() == pytest.approx(
            min(1.0, max(0.0, 1 - max(0.0, p - p_top) / (p - p_null))), abs=1e-6)


def test_kept_all_keeps_everything():
    """kept = 1: every keep probability is 1, so the input is unchanged: soft
    sufficiency 1 and soft comprehensiveness 0 whatever the scores."""
    model = BagOfWords(WEIGHTS, BIAS)
    inp = make_input(model, [[2, 3, 4], [5, 2]], [[0.3, -2.0, 1.0], [1.0, 0.0]])
    for normalized in (True, False):
        params = dict(PLAIN, kept=1.0, normalized=normalized)
        assert soft_sufficiency(inp, **params).values.tolist() == pytest.approx([1, 1], abs=1e-6)
        assert soft_comprehensiveness(inp, **params).values.tolist() == pytest.approx(
            [0, 0], abs=1e-6)


def test_flat_scores_give_complementary_values():
    """Equal scores map to s = 1/2: both metrics draw the same masks (same seed, same
    q), and per draw clip(1 − r) = 1 − clip(r), so soft_suff = 1 − soft_comp."""
    model = BagOfWords(WEIGHTS, BIAS)
    inp = make_input(model, [[2, 3, 4]], [[0.4, 0.4, 0.4]])
    q = keep_probabilities(inp.scores, candidates("t", inp, None), keep_important=True,
                           score_map="minmax", kept=None)
    assert q[0].tolist() == [0.5, 0.5, 0.5]
    suff = SOFT_SUFFICIENCY.compute(inp).values.item()
    comp = SOFT_COMPREHENSIVENESS.compute(inp).values.item()
    assert 0 < comp < 1
    assert suff == pytest.approx(1 - comp, abs=1e-12)


def test_null_input_that_does_not_lower_p_is_undefined():
    """A bias for class 0 that the tokens weaken: the blank input is *more* confident,
    so nothing normalises the drop; the value is NaN and flagged."""
    model = BagOfWords({2: (0.0, 0.5), 3: (0.0, 0.3)}, bias=(2.0, 0.0))
    inp = make_input(model, [[2, 3]], [[1.0, 0.0]])
    assert inp.target.item() == 0
    out = SOFT_COMPREHENSIVENESS.compute(inp)
    assert math.isnan(out.values.item()) and out.flags["null_not_lower"].tolist() == [True]
    plain = soft_comprehensiveness(inp, **dict(PLAIN, normalized=False))
    assert not math.isnan(plain.values.item())


def test_values_reproducible_and_independent_of_the_batch():
    model = BagOfWords(WEIGHTS, BIAS)
    rows = [[2, 3, 4, 5], [3, 4], [5, 2, 3]]
    scores = [[0.2, 0.9, 0.4, 0.1], [0.3, 0.8], [0.5, 0.1, 0.7]]
    inp = make_input(model, rows, scores, example_ids=["a", "b", "c"])
    for metric in (SOFT_SUFFICIENCY, SOFT_COMPREHENSIVENESS):
        together = metric.compute(inp).values
        assert torch.equal(together, metric.compute(inp).values)  # same seed, same draws
        alone = make_input(model, [rows[2]], [scores[2]], example_ids=["c"])
        assert metric.compute(alone).values.item() == pytest.approx(together[2].item(),
                                                                    abs=1e-12)
        other = soft_sufficiency if metric is SOFT_SUFFICIENCY else soft_comprehensiveness
        reseeded = other(inp, **dict(metric.spec.params, seed=1)).values
        assert not torch.equal(together, reseeded)


def test_only_eligible_tokens_are_masked():
    """Padding, the other sentence under ``segment``, and positions outside the mask
    are always kept; pieces of one word share the word's keep probability."""
    model = BagOfWords(WEIGHTS, BIAS)
    inp = make_input(model, [[2, 3, 4], [5, 2]], [[0.9, 0.1, 0.5], [0.2, 0.6]],
                     segments=[[0, 0, 1], [0, 1]])
    q = keep_probabilities(inp.scores, candidates("t", inp, 0), keep_important=True,
                           score_map="minmax", kept=None)
    assert q.tolist() == [[1.0, 0.0, 1.0], [0.5, 1.0, 1.0]]
    keeps = draw_keeps(inp, q, 4, 0, 3)
    assert keeps[:, 0, 0].all() and not keeps[:, 0, 1].any() and keeps[:, 0, 2].all()
    assert keeps[:, 1, 1:].all()  # hypothesis token and padding
    worded = Batch(torch.tensor([[2, 3, 4]]), torch.ones(1, 3, dtype=torch.bool), ("w",),
                   words=torch.tensor([[0, 0, 1]]))
    base = Perturber(model).probs(worded)
    winp = MetricInput(worded, torch.tensor([[0.2, 0.3, 0.1]]), base.argmax(1), base,
                       Perturber(model))
    q = keep_probabilities(winp.scores, candidates("t", winp, None), keep_important=False,
                           score_map="minmax", kept=None)
    assert q.tolist() == [[0.0, 0.0, 1.0]]  # word 0 (0.5) is the top: dropped whole


@pytest.mark.parametrize("kept", [0.1, 0.3, 0.5, 0.9])
@pytest.mark.parametrize("keep_important", [True, False])
def test_kept_fixes_the_expected_number_of_kept_tokens(kept, keep_important):
    model = BagOfWords(WEIGHTS, BIAS)
    gen = torch.Generator().manual_seed(0)
    rows = [[2, 3, 4, 5, 2, 3, 4], [3, 4], [5, 2, 3, 4, 5], [2, 3, 4, 5]]
    scores = [torch.randn(len(r), generator=gen).tolist() for r in rows]
    scores[3] = [5.0, 0.0, 0.0, 0.0]  # one spike: most q at one end
    inp = make_input(model, rows, scores)
    for score_map in ("minmax", "sigmoid"):
        q = keep_probabilities(inp.scores, candidates("t", inp, None),
                               keep_important=keep_important, score_map=score_map, kept=kept)
        n = inp.batch.mask.sum(1).double()
        real = torch.where(inp.batch.mask, q, 0.0)
        assert real.sum(1).tolist() == pytest.approx((kept * n).tolist(), abs=1e-9)
        assert ((q >= 0) & (q <= 1)).all()
        for row in range(len(rows)):  # the order of the scores is kept (weakly)
            m = len(rows[row])
            order = sorted(range(m), key=lambda t: scores[row][t], reverse=keep_important)
            got = [q[row, t].item() for t in order]
            assert all(a >= b - 1e-12 for a, b in itertools.pairwise(got))
    # and the masks drawn keep that many tokens' worth of dimensions on average
    q = keep_probabilities(inp.scores, candidates("t", inp, None),
                           keep_important=keep_important, score_map="minmax", kept=kept)
    draws = 4000
    keeps = draw_keeps(inp, q, draws, 5, 3).double()  # (N, B, T, D)
    per_draw = (keeps.mean(-1) * inp.batch.mask).sum(-1)  # kept token-equivalents (N, B)
    n = inp.batch.mask.sum(1).double()
    sd = per_draw.std(0)
    assert ((per_draw.mean(0) - kept * n).abs() <= 4.5 * sd / math.sqrt(draws) + 1e-9).all()


def test_rescale_to_by_hand():
    q = torch.tensor([0.9, 0.3, 0.0], dtype=torch.float64)
    assert rescale_to(q, 0.6).tolist() == pytest.approx([0.45, 0.15, 0.0])
    assert rescale_to(q, 1.6).tolist() == pytest.approx([1.0, 0.6, 0.0])  # 0.9 capped
    assert rescale_to(q, 2.5).tolist() == pytest.approx([1.0, 1.0, 0.5])  # deficit spread
    assert rescale_to(torch.zeros(4, dtype=torch.float64), 2.0).tolist() == [0.5] * 4


def test_model_without_embeddings_is_refused():
    batch = Batch(torch.tensor([[2, 2, 3]]), torch.ones(1, 3, dtype=torch.bool), ("a",))
    perturber = Perturber(Votes())
    inp = MetricInput(batch, torch.tensor([[0.9, 0.5, 0.1]]), torch.tensor([0]),
                      perturber.probs(batch), perturber)
    for metric in (SOFT_SUFFICIENCY, SOFT_COMPREHENSIVENESS):
        with pytest.raises(InputError, match="embeddings"):
            metric.compute(inp)

    class Declared(BagOfWords):  # has embed(), but does not declare the capability
        capabilities = frozenset({"gradients"})

    with pytest.raises(InputError, match="embeddings"):
        SOFT_SUFFICIENCY.compute(make_input(Declared(WEIGHTS, BIAS), [[2, 3]], [[1.0, 0.0]]))


@pytest.mark.parametrize("bad", [{"n_samples": 0}, {"seed": -1}, {"kept": 0.0},
                                 {"kept": 1.5}, {"score_map": "softmax"},
                                 {"normalized": 1}])
def test_bad_parameters(bad):
    inp = make_input(BagOfWords(WEIGHTS, BIAS), [[2, 3]], [[1.0, 0.0]])
    with pytest.raises(InputError):
        soft_sufficiency(inp, **dict(PLAIN, **bad))


def test_bilstm_runs_in_range(one_thread):
    """The task models' surface: a seeded BiLSTM, padded rows, values in [0, 1]."""
    from faithbench.testing import three_row_batch, tiny_classifier

    model = tiny_classifier()
    batch, _ = three_row_batch()
    perturber = Perturber(model)
    base = perturber.probs(batch)
    scores = torch.randn(batch.ids.shape, generator=torch.Generator().manual_seed(1))
    inp = MetricInput(batch, scores, base.argmax(1), base, perturber)
    for fn in (soft_sufficiency, soft_comprehensiveness):
        out = fn(inp, **dict(PLAIN, normalized=False, n_samples=8))
        assert ((out.values >= 0) & (out.values <= 1)).all()
    before = perturber.rows_forwarded
    SOFT_SUFFICIENCY.compute(inp)
    assert perturber.rows_forwarded - before == len(batch) * (10 + 1)  # N draws + null
