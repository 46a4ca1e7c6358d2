"""Normalized AOPC (metrics/naopc.py) against an independent brute force: every one of
the n! removal orders forwarded through the model directly, not through the subset DP,
the beam or the perturbation engine's masks."""

import itertools
import math

import pytest
import torch

from faithbench.benchmark.core.api import Batch, MetricInput
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.perturb import Perturber
from faithbench.benchmark.core.vocab import collate
from faithbench.metrics.naopc import NAOPC_COMP, NAOPC_SUFF, aopc_bounds, with_search
from faithbench.testing import Votes, tiny_classifier
from tests.analytic import hand_keys


def _param(metric, **changes):
    import dataclasses
    spec = dataclasses.replace(metric.spec, params=tuple({**dict(metric.spec.params),
                                                          **changes}.items()))
    return dataclasses.replace(metric, spec=spec)


def _input(model, rows, scores, target, words=None, segments=None):
    batch = collate(rows, [f"ex{i}" for i in range(len(rows))], pad_id=model.pad_id,
                    words=words, segments=segments)
    width = batch.ids.shape[1]
    s = torch.zeros(len(rows), width)
    for i, row in enumerate(scores):
        s[i, : len(row)] = torch.tensor(row)
    # one row a pass: a row's float32 output is then bit-identical to the brute force's
    perturber = Perturber(model, chunk_size=1)
    return MetricInput(batch, s, torch.tensor(target), perturber.probs(batch), perturber)


def _prob(model, tokens, target):
    """p_target of the input made of ``tokens`` alone (deleting = dropping them)."""
    if tokens:
        batch = Batch(torch.tensor([tokens]), torch.ones(1, len(tokens), dtype=torch.bool), ("x",))
    else:
        batch = Batch(torch.tensor([[model.pad_id]]), torch.zeros(1, 1, dtype=torch.bool), ("x",))
    with torch.no_grad():
        return torch.softmax(model.logits(batch).float(), dim=-1)[0, target].item()


def _brute(model, tokens, units, scores, target, eraser="delete", example_id="ex0"):
    """(aopc of most-important-first, of least-important-first, min, max) over all
    orders of ``units`` (lists of positions), each variant forwarded on its own;
    ``eraser="mask"`` puts the model's mask id where a unit was."""
    n = len(units)
    full = _prob(model, tokens, target)
    memo = {}

    def drop(gone):
        key = frozenset(gone)
        if key not in memo:
            positions = {p for u in key for p in units[u]}
            if eraser == "mask":
                left = [model.mask_id if i in positions else t for i, t in enumerate(tokens)]
            else:
                left = [t for i, t in enumerate(tokens) if i not in positions]
            memo[key] = full - _prob(model, left, target)
        return memo[key]

    def aopc(order):
        return math.fsum(drop(order[:k]) for k in range(1, n + 1)) / n

    every = [aopc(p) for p in itertools.permutations(range(n))]
    keys = hand_keys(example_id, n)  # unit u takes the example's u-th tie key
    order = sorted(range(n), key=lambda u: (-scores[u], keys[u]))
    return aopc(order), aopc(order[::-1]), min(every), max(every)


def _expected(aopc, low, high):
    return (aopc - low) / (high - low)


@pytest.mark.parametrize("search", ["exact", "beam"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_brute_force_over_all_orders(seed, search):
    gen = torch.Generator().manual_seed(seed)
    model = tiny_classifier(seed)
    lengths = [2, 3, 4, 5, 6, 7] if search == "exact" else [2, 3, 4, 5]
    rows = [torch.randint(4, 50, (n,), generator=gen).tolist() for n in lengths]
    scores = [torch.randn(len(r), generator=gen).tolist() for r in rows]
    target = [int(torch.randint(0, 2, (1,), generator=gen)) for _ in rows]
    inp = _input(model, rows, scores, target)
    beam = math.factorial(max(lengths))  # no order ever pruned: the beam is exhaustive
    comp = with_search(NAOPC_COMP, search, beam).compute(inp)
    suff = with_search(NAOPC_SUFF, search, beam).compute(inp)
    for i, row in enumerate(rows):
        units = [[p] for p in range(len(row))]
        a_comp, a_suff, low, high = _brute(model, row, units, scores[i], target[i])
        assert high - low > 1e-6  # the comparison below is meaningful
        assert comp.values[i].item() == pytest.approx(_expected(a_comp, low, high), abs=1e-9)
        assert suff.values[i].item() == pytest.approx(_expected(a_suff, low, high), abs=1e-9)
        assert 0.0 <= comp.values[i].item() <= 1.0 and 0.0 <= suff.values[i].item() <= 1.0
    assert not comp.flags["flat"].any()


def test_ties_follow_the_examples_keys_as_everywhere():
    """Scores with ties: comprehensiveness removes equal scores lower tie key first,
    sufficiency (least important first) the reverse, as aopc_morf / aopc_lerf do."""
    model = tiny_classifier(3)
    rows = [[11, 23, 5, 41, 17, 30]]
    scores = [[1.0, 2.0, 1.0, 2.0, 0.0, 1.0]]
    inp = _input(model, rows, scores, [1])
    a_comp, a_suff, low, high = _brute(model, rows[0], [[p] for p in range(6)], scores[0], 1)
    exact = with_search(NAOPC_COMP, "exact").compute(inp).values.item()
    assert exact == pytest.approx(_expected(a_comp, low, high), abs=1e-9)
    exact = with_search(NAOPC_SUFF, "exact").compute(inp).values.item()
    assert exact == pytest.approx(_expected(a_suff, low, high), abs=1e-9)


def test_words_are_the_units():
    """On a batch with words every piece of a word goes together; the orders permuted
    are the words' (4 words out of 6 pieces)."""
    model = tiny_classifier(4)
    rows, words = [[12, 7, 33, 8, 19, 44]], [[0, 0, 1, 2, 2, 3]]
    scores = [[0.3, -0.1, 0.9, 0.05, 0.1, -0.4]]  # word sums: 0.2, 0.9, 0.15, -0.4
    inp = _input(model, rows, scores, [0], words=words)
    units = [[0, 1], [2], [3, 4], [5]]
    word_scores = [sum(scores[0][p] for p in u) for u in units]
    a_comp, a_suff, low, high = _brute(model, rows[0], units, word_scores, 0)
    got = with_search(NAOPC_COMP, "exact").compute(inp).values.item()
    assert got == pytest.approx(_expected(a_comp, low, high), abs=1e-9)
    got = with_search(NAOPC_SUFF, "exact").compute(inp).values.item()
    assert got == pytest.approx(_expected(a_suff, low, high), abs=1e-9)


@pytest.mark.parametrize("seed", [0, 5])
def test_small_beams_stay_inside_the_exact_bounds(seed):
    gen = torch.Generator().manual_seed(seed)
    model = tiny_classifier(seed)
    rows = [torch.randint(4, 50, (n,), generator=gen).tolist() for n in (6, 7, 8, 8)]
    scores = [torch.randn(len(r), generator=gen).tolist() for r in rows]
    inp = _input(model, rows, scores, [0, 1, 0, 1])
    _, exact = aopc_bounds(inp, search="exact")
    for beam in (1, 2, 3):
        _, approx = aopc_bounds(inp, search="beam", beam_size=beam)
        assert (approx[:, 0] >= exact[:, 0]).all()  # lower bound never below the true min
        assert (approx[:, 1] <= exact[:, 1]).all()  # upper bound never above the true max
        assert (approx[:, 0] <= approx[:, 1]).all()


class Either:
    """Class 0 logit 3 while token 2 or token 3 is there, plus 1 while token 4 is: taking
    4 first is the best single step, taking 2 and 3 first the best pair."""

    pad_id, mask_id, baseline_id = 0, 1, 0

    def logits(self, batch):
        has = lambda t: ((batch.ids == t) & batch.mask).any(1).float()
        either = torch.maximum(has(2), has(3))
        return torch.stack([3 * either + has(4), torch.zeros_like(either)], 1)


def test_a_greedy_beam_misses_the_upper_bound_a_wider_one_finds():
    inp = _input(Either(), [[2, 3, 4, 9]], [[3.0, 2.0, 1.0, 0.0]], [0])
    _, exact = aopc_bounds(inp, search="exact")
    _, greedy = aopc_bounds(inp, search="beam", beam_size=1)
    _, wide = aopc_bounds(inp, search="beam", beam_size=4)
    assert greedy[0, 1] < exact[0, 1] - 0.04  # greedy takes 4 first: 0.2557 < 0.3037
    assert wide[0, 1] == exact[0, 1]
    # the explainer's order 2, 3, 4, 9 is the best one: 1 exactly, above 1 against greedy
    assert with_search(NAOPC_COMP, "exact").compute(inp).values.item() == 1.0
    assert with_search(NAOPC_COMP, "beam", 1).compute(inp).values.item() > 1.0


def test_an_exhaustive_beam_is_exact_to_the_last_bit():
    gen = torch.Generator().manual_seed(7)
    model = tiny_classifier(7)
    rows = [torch.randint(4, 50, (n,), generator=gen).tolist() for n in (3, 5, 6)]
    scores = [torch.randn(len(r), generator=gen).tolist() for r in rows]
    inp = _input(model, rows, scores, [1, 0, 1])
    a_exact, exact = aopc_bounds(inp, search="exact")
    a_beam, beam = aopc_bounds(inp, search="beam", beam_size=math.factorial(6))
    assert torch.equal(beam, exact) and torch.equal(a_beam, a_exact)


def test_exact_search_refuses_long_examples_and_names_them():
    model = tiny_classifier(0)
    inp = _input(model, [[5, 6, 7], [8, 9, 10, 11, 12]], [[1, 2, 3], [1, 2, 3, 4, 5]], [0, 1])
    metric = _param(with_search(NAOPC_COMP, "exact"), max_exact=4)
    with pytest.raises(InputError, match=r"ex1 \(5 units\).*search=beam"):
        metric.compute(inp)
    assert _param(metric, max_exact=5).compute(inp).values.shape == (2,)
    _param(NAOPC_COMP, max_exact=4).compute(inp)  # beam search has no such limit


@pytest.mark.parametrize(("key", "value"), [("search", "greedy"), ("beam_size", 0),
                                            ("max_exact", 21), ("beam_size", True)])
def test_bad_parameters_are_input_errors(key, value):
    inp = _input(Votes(), [[2, 3]], [[1.0, 0.0]], [0])
    with pytest.raises(InputError, match=key):
        _param(NAOPC_COMP, **{key: value}).compute(inp)


@pytest.mark.parametrize("search", ["exact", "beam"])
def test_votes_ground_truth_order_is_1_and_its_reverse_0(search):
    """Votes, target 0: removing class-0 voters first, then neutral tokens, then class-1
    voters lowers p0 the most at *every* k, so that order is the upper bound and its
    reverse the lower bound (beam_size=1, greedy, finds both)."""
    rows = [[2, 3, 7, 2, 3, 2], [3, 2, 2, 9, 3], [2, 5, 3]]
    truth = [[{2: 1.0, 3: -1.0}.get(t, 0.0) + 0.01 * i for i, t in enumerate(r)] for r in rows]
    reverse = [[-s for s in r] for r in truth]
    for scores, comp_want, suff_want in ((truth, 1.0, 0.0), (reverse, 0.0, 1.0)):
        inp = _input(Votes(), rows, scores, [0, 0, 0])
        comp = with_search(NAOPC_COMP, search, 1).compute(inp).values
        suff = with_search(NAOPC_SUFF, search, 1).compute(inp).values
        assert comp.tolist() == [comp_want] * 3
        assert suff.tolist() == [suff_want] * 3


def test_flat_examples_are_undefined_or_as_the_authors_set_them():
    """n = 1, or only tokens the model ignores: every order scores the same, upper =
    lower. By default NaN (undefined, counted); if_flat=0.0 is the authors' 0."""
    inp = _input(Votes(), [[2], [7, 7, 7], [2, 3]], [[1.0], [3.0, 2.0, 1.0], [1.0, 0.0]],
                 [0, 0, 0])
    for search in ("exact", "beam"):
        out = with_search(NAOPC_SUFF, search).compute(inp)
        assert out.flags["flat"].tolist() == [True, True, False]
        assert math.isnan(out.values[0]) and math.isnan(out.values[1])
        assert out.values[2].item() == 0.0
        out = _param(with_search(NAOPC_COMP, search), if_flat=0.0).compute(inp)
        assert out.flags["flat"].tolist() == [True, True, False]
        assert out.values.tolist() == [0.0, 0.0, 1.0]


def test_an_empty_batch_gives_empty_values():
    inp = _input(Votes(), [[2]], [[1.0]], [0])
    empty = MetricInput(inp.batch.select([]), inp.scores[:0], inp.target[:0],
                        inp.base_probs[:0], inp.perturber)
    for search in ("exact", "beam"):
        out = with_search(NAOPC_COMP, search).compute(empty)
        assert out.values.shape == (0,) and out.flags["flat"].shape == (0,)


def test_the_hand_worked_orderings():
    """The card's six orders of x = [2, 2, 3]: bounds −7/180 and 7/45."""
    inp = _input(Votes(), [[2, 2, 3]], [[0.9, 0.1, 0.5]], [0])
    aopc, bounds = aopc_bounds(inp, search="exact")
    assert bounds[0].tolist() == pytest.approx([-7 / 180, 7 / 45], abs=1e-6)
    assert aopc.item() == pytest.approx(2 / 45, abs=1e-6)
    assert with_search(NAOPC_COMP, "exact").compute(inp).values.item() == pytest.approx(3 / 7)


@pytest.mark.parametrize("search", ["exact", "beam"])
def test_segment_and_mask_eraser_against_the_brute_force(search):
    """segment=1: only the hypothesis' tokens are ordered, the premise always stays;
    eraser=mask (the authors' choice): removed tokens become the mask id."""
    model = tiny_classifier(9)
    rows = [[12, 7, 33, 8, 19, 44, 21], [5, 9, 40, 3]]
    segments = [[0, 0, 0, 1, 1, 1, 1], [0, 1, 1, 1]]
    scores = [[0.5, 0.1, -0.2, 0.3, -0.6, 0.8, 0.05], [0.0, -0.3, 0.4, 0.2]]
    inp = _input(model, rows, scores, [0, 1], segments=segments)
    for eraser in ("delete", "mask"):
        comp = _param(with_search(NAOPC_COMP, search, 24), segment=1, eraser=eraser)
        suff = _param(with_search(NAOPC_SUFF, search, 24), segment=1, eraser=eraser)
        got_comp, got_suff = comp.compute(inp).values, suff.compute(inp).values
        for i, row in enumerate(rows):
            units = [[p] for p, seg in enumerate(segments[i]) if seg == 1]
            unit_scores = [scores[i][u[0]] for u in units]
            a_comp, a_suff, low, high = _brute(model, row, units, unit_scores, i, eraser)
            assert got_comp[i].item() == pytest.approx(_expected(a_comp, low, high), abs=1e-9)
            assert got_suff[i].item() == pytest.approx(_expected(a_suff, low, high), abs=1e-9)


@pytest.mark.parametrize("search", ["exact", "beam"])
def test_a_batch_gives_each_example_its_value_alone(search):
    gen = torch.Generator().manual_seed(11)
    model = tiny_classifier(11)
    rows = [torch.randint(4, 50, (n,), generator=gen).tolist() for n in (7, 2, 5, 9, 4)]
    scores = [torch.randn(len(r), generator=gen).tolist() for r in rows]
    target = [0, 1, 1, 0, 1]
    metric = with_search(NAOPC_COMP, search, 2)
    together = metric.compute(_input(model, rows, scores, target)).values
    alone = [metric.compute(_input(model, [r], [s], [t])).values.item()
             for r, s, t in zip(rows, scores, target)]
    assert together.tolist() == alone
