"""Metrics on a bag-of-words analytic model, with every expected value worked out
here in plain Python (math.exp over the weight table), never by the library.

Each hand-worked test runs at several perturber chunk sizes (Captum's
perturbations_per_eval idea); orderings are written out by hand from the scores.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import math
import re

import pytest
import torch

from faithbench.benchmark.core.api import (
    ALIGNMENT,
    CLASSIFICATION,
    PAIR_CLASSIFICATION,
    TASK_KINDS,
    MetricInput,
    MetricOutput,
    MetricSpec,
    SimpleMetric,
)
from faithbench.benchmark.core.errors import InputError, UnknownNameError
from faithbench.benchmark.core.ids import format_id
from faithbench.benchmark.core.perturb import Perturber
from faithbench.benchmark.core.ranking import tie_keys
from faithbench.metrics import REGISTRY, default_metrics, get_metric, with_params
from faithbench.metrics.rationale import bin_sizes
from tests.analytic import BagOfWords, make_batch

CHUNKS = (1, 2, 3, 512)
TOL = 1e-6

# token id -> (w_class0, w_class1); 0 = pad, 1 = the mask eraser's unknown word
WEIGHTS = {
    0: (0.0, 0.0),
    1: (0.3, -0.2),
    2: (1.0, 0.0),
    3: (0.0, 0.5),
    4: (0.8, 0.2),
    5: (-0.3, 0.4),
    6: (0.6, -0.1),
    7: (0.2, 0.25),
}
BIAS = (0.1, 0.0)
MODEL = BagOfWords(WEIGHTS, BIAS)

# x: logits (2.2, 1.0) -> ŷ = 0. Scores order positions 0, 4, 2, 3, 1.
X = [2, 3, 4, 5, 6]
X_SCORES = [0.9, 0.1, 0.5, 0.3, 0.7]
X_ORDER = [0, 4, 2, 3, 1]
Y = [2, 3]  # logits (1.1, 0.5) -> ŷ = 0; removing the 2 flips it
Z = [2, 6]  # logits (1.7, -0.1) -> ŷ = 0; the empty input (bias) is class 0 too: never flips
V = [3, 5, 2]  # logits (0.8, 0.9) -> ŷ = 1


@pytest.fixture(autouse=True)
def one_thread():
    """These tensors are tiny; on a busy CPU each multi-threaded softmax costs ~10 ms of
    thread wake-up, which made the 120-ordering tests take a minute. Restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---- hand computation (plain Python) -------------------------------------------------


def hand_logits(tokens):
    return [BIAS[c] + sum(WEIGHTS[t][c] for t in tokens) for c in range(2)]


def hand_p(tokens, cls):
    z = hand_logits(tokens)
    return math.exp(z[cls]) / (math.exp(z[0]) + math.exp(z[1]))


def hand_pred(tokens):
    z = hand_logits(tokens)
    return 0 if z[0] >= z[1] else 1


def without(tokens, positions):
    return [t for i, t in enumerate(tokens) if i not in set(positions)]


def only(tokens, positions):
    return [t for i, t in enumerate(tokens) if i in set(positions)]


def masked(tokens, positions):
    return [1 if i in set(positions) else t for i, t in enumerate(tokens)]


def hand_aopc(tokens, order, k_max, erase=without):
    y = hand_pred(tokens)
    steps = range(1, min(k_max, len(tokens)) + 1)
    return sum(hand_p(tokens, y) - hand_p(erase(tokens, order[:k]), y) for k in steps) / len(steps)


def hand_comp(tokens, order, ks, erase=without):
    y = hand_pred(tokens)
    return sum(hand_p(tokens, y) - hand_p(erase(tokens, order[:k]), y) for k in ks) / len(ks)


def hand_suff(tokens, order, ks, erase=None):
    """Keep only the top k: delete the rest, or (erase=masked) mask the rest."""
    y = hand_pred(tokens)

    def rationale(k):
        return only(tokens, order[:k]) if erase is None else erase(tokens, order[k:])

    return sum(hand_p(tokens, y) - hand_p(rationale(k), y) for k in ks) / len(ks)


# ---- library inputs ------------------------------------------------------------------


def make_input(rows, scores, *, chunk=512, reference=None, segments=None, model=MODEL):
    batch = make_batch(rows, segments=segments)
    perturber = Perturber(model, chunk_size=chunk)
    base = perturber.probs(batch)
    width = batch.ids.shape[1]
    s = torch.tensor([list(r) + [0.0] * (width - len(r)) for r in scores], dtype=torch.float32)
    ref = rate = None
    if reference is not None:
        ref = torch.tensor([list(r) + [False] * (width - len(r)) for r in reference])
        # the engine's dataset-level |R| / n, here over these rows (token_f1 cuts at it)
        rates = [sum(r) / len(r) for r in reference if len(r)]
        rate = sum(rates) / len(rates) if rates else None
    return MetricInput(batch, s, base.argmax(dim=1), base, perturber, ref, reference_rate=rate)


def value(metric, rows, scores, **kw):
    params = {k: kw.pop(k) for k in list(kw) if k not in ("chunk", "reference", "segments")}
    m = with_params(get_metric(metric), **params) if params else get_metric(metric)
    return m.compute(make_input(rows, scores, **kw))


def test_hand_setup_predictions():
    assert [hand_pred(r) for r in (X, Y, Z, V)] == [0, 0, 0, 1]
    inp = make_input([X, Y, Z, V], [X_SCORES, [0, 0], [0, 0], [0, 0, 0]])
    assert inp.target.tolist() == [0, 0, 0, 1]


# ---- erasure AOPC ----------------------------------------------------------------------


@pytest.mark.parametrize("chunk", CHUNKS)
def test_aopc_morf_lerf_hand(chunk):
    for k_max in (3, 10):  # 10 > n: averaged over the n = 5 steps, k = 0 never counted
        out = value("aopc_morf", [X], [X_SCORES], k_max=k_max, chunk=chunk).values
        assert out.item() == pytest.approx(hand_aopc(X, X_ORDER, k_max), abs=TOL)
        out = value("aopc_lerf", [X], [X_SCORES], k_max=k_max, chunk=chunk).values
        assert out.item() == pytest.approx(hand_aopc(X, X_ORDER[::-1], k_max), abs=TOL)
    # k_max = 3, written out: drops after removing {0}, {0, 4}, {0, 4, 2}
    p = hand_p(X, 0)
    three = (3 * p - hand_p([3, 4, 5, 6], 0) - hand_p([3, 4, 5], 0) - hand_p([3, 5], 0)) / 3
    assert value("aopc_morf", [X], [X_SCORES], k_max=3, chunk=chunk).values.item() == pytest.approx(
        three, abs=TOL
    )


@pytest.mark.parametrize("chunk", CHUNKS)
def test_aopc_erasers_hand(chunk):
    mask_morf = value("aopc_morf", [X], [X_SCORES], k_max=3, eraser="mask", chunk=chunk).values
    assert mask_morf.item() == pytest.approx(hand_aopc(X, X_ORDER, 3, erase=masked), abs=TOL)
    # pad adds the zero embedding, which for a bag of words is exactly deletion
    pad_lerf = value("aopc_lerf", [X], [X_SCORES], k_max=4, eraser="pad", chunk=chunk).values
    assert pad_lerf.item() == pytest.approx(hand_aopc(X, X_ORDER[::-1], 4), abs=TOL)
    assert mask_morf.item() != pytest.approx(hand_aopc(X, X_ORDER, 3), abs=1e-3)


@pytest.mark.parametrize("chunk", CHUNKS)
def test_aopc_ties_go_in_the_examples_seeded_order(chunk):
    # all scores equal: the order is that of the keys drawn for the row's id "ex0",
    # positions 0, 4, 1, 3, 2; MoRF removes 0, 4; LeRF takes the order reversed, 2, 3
    assert torch.argsort(tie_keys(["ex0"], 5), dim=1).tolist() == [[0, 4, 1, 3, 2]]
    flat = [[0.0] * 5]
    morf = value("aopc_morf", [X], flat, k_max=2, chunk=chunk).values.item()
    lerf = value("aopc_lerf", [X], flat, k_max=2, chunk=chunk).values.item()
    assert morf == pytest.approx(hand_aopc(X, [0, 4, 1, 3, 2], 2), abs=TOL)
    assert lerf == pytest.approx(hand_aopc(X, [2, 3, 1, 4, 0], 2), abs=TOL)
    assert morf != pytest.approx(hand_aopc(X, [0, 1, 2, 3, 4], 2), abs=1e-3)  # not by position


# ---- comprehensiveness / sufficiency -----------------------------------------------------


@pytest.mark.parametrize("chunk", CHUNKS)
def test_comp_suff_default_bins_hand(chunk):
    ks = [1, 1, 1, 1, 3]  # n = 5: ceil(.05), ceil(.25), ceil(.5), ceil(1), ceil(2.5)
    comp = value("comprehensiveness", [X], [X_SCORES], chunk=chunk).values.item()
    suff = value("sufficiency", [X], [X_SCORES], chunk=chunk).values.item()
    assert comp == pytest.approx(hand_comp(X, X_ORDER, ks), abs=TOL)
    assert suff == pytest.approx(hand_suff(X, X_ORDER, ks), abs=TOL)
    p = hand_p(X, 0)
    assert comp == pytest.approx(
        (4 * (p - hand_p([3, 4, 5, 6], 0)) + p - hand_p([3, 5], 0)) / 5, abs=TOL
    )
    assert suff == pytest.approx((4 * (p - hand_p([2], 0)) + p - hand_p([2, 4, 6], 0)) / 5, abs=TOL)


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize(
    "rounding, ks", [("ceil", [1, 2, 3]), ("round", [1, 1, 3]), ("floor", [1, 1, 2])]
)
def test_comp_suff_custom_bins_and_rounding(chunk, rounding, ks):
    # n = 5 and bins (.1, .25, .5): b·n = 0.5, 1.25, 2.5
    kw = {"bins": (0.1, 0.25, 0.5), "rounding": rounding, "chunk": chunk}
    comp = value("comprehensiveness", [X], [X_SCORES], **kw).values.item()
    suff = value("sufficiency", [X], [X_SCORES], **kw).values.item()
    assert comp == pytest.approx(hand_comp(X, X_ORDER, ks), abs=TOL)
    assert suff == pytest.approx(hand_suff(X, X_ORDER, ks), abs=TOL)


@pytest.mark.parametrize("chunk", CHUNKS)
def test_comp_suff_erasers_hand(chunk):
    kw = {"bins": (0.2, 0.6), "chunk": chunk}  # ks = 1, 3
    comp = value("comprehensiveness", [X], [X_SCORES], eraser="mask", **kw).values.item()
    suff = value("sufficiency", [X], [X_SCORES], eraser="mask", **kw).values.item()
    assert comp == pytest.approx(hand_comp(X, X_ORDER, [1, 3], erase=masked), abs=TOL)
    assert suff == pytest.approx(hand_suff(X, X_ORDER, [1, 3], erase=masked), abs=TOL)
    comp = value("comprehensiveness", [X], [X_SCORES], eraser="pad", **kw).values.item()
    suff = value("sufficiency", [X], [X_SCORES], eraser="pad", **kw).values.item()
    assert comp == pytest.approx(hand_comp(X, X_ORDER, [1, 3]), abs=TOL)
    assert suff == pytest.approx(hand_suff(X, X_ORDER, [1, 3]), abs=TOL)


@pytest.mark.parametrize("chunk", CHUNKS)
def test_comp_suff_ties_broken_by_position(chunk):
    scores = [[0.5, 0.9, 0.5, 0.9, 0.1]]  # order 1, 3, 0, 2, 4
    kw = {"bins": (0.2, 0.4, 0.6), "chunk": chunk}
    comp = value("comprehensiveness", [X], scores, **kw).values.item()
    suff = value("sufficiency", [X], scores, **kw).values.item()
    assert comp == pytest.approx(hand_comp(X, [1, 3, 0, 2, 4], [1, 2, 3]), abs=TOL)
    assert suff == pytest.approx(hand_suff(X, [1, 3, 0, 2, 4], [1, 2, 3]), abs=TOL)
    assert comp != pytest.approx(hand_comp(X, [3, 1, 2, 0, 4], [1, 2, 3]), abs=1e-3)


def test_bin_sizes_exact_arithmetic():
    assert math.ceil(0.07 * 100) == 8 and math.ceil(0.28 * 25) == 8  # why naive ceil(b·n) is wrong
    n = torch.tensor([30, 10, 5, 1, 100, 25])
    assert bin_sizes(n, (0.1, 0.07, 0.28), "ceil").tolist() == [
        [3, 3, 9],
        [1, 1, 3],
        [1, 1, 2],
        [1, 1, 1],
        [10, 7, 28],
        [3, 2, 7],
    ]
    assert bin_sizes(n, (0.05, 0.25), "round").tolist() == [
        [2, 8],
        [1, 3],
        [1, 1],
        [1, 1],
        [5, 25],
        [1, 6],
    ]
    assert bin_sizes(n, (0.05, 0.25), "floor").tolist() == [
        [1, 7],
        [1, 2],
        [1, 1],
        [1, 1],
        [5, 25],
        [1, 6],
    ]
    assert bin_sizes(n, (1.0,), "ceil").flatten().tolist() == n.tolist()


@pytest.mark.parametrize("chunk", CHUNKS)
def test_comp_suff_float_guard_on_the_metric(chunk):
    x30 = [2, 3, 4, 5, 6, 7, 2, 3, 4, 5] * 3
    desc = [[float(30 - i) for i in range(30)]]  # order = positions 0..29
    suff = value("sufficiency", [x30], desc, bins=(0.1,), chunk=chunk).values.item()
    y = hand_pred(x30)
    assert suff == pytest.approx(hand_p(x30, y) - hand_p(x30[:3], y), abs=TOL)  # k = 3
    x25 = x30[:25]
    comp = value("comprehensiveness", [x25], [desc[0][:25]], bins=(0.28,), chunk=chunk)
    y = hand_pred(x25)
    want = hand_p(x25, y) - hand_p(x25[7:], y)  # k = 7, where float ceil(0.28 * 25) gives 8
    assert comp.values.item() == pytest.approx(want, abs=TOL)
    assert want != pytest.approx(hand_p(x25, y) - hand_p(x25[8:], y), abs=1e-4)


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("bins", [(0.01, 0.05, 0.1, 0.2, 0.5), (0.2, 0.4, 0.6, 0.8, 1.0)])
def test_oracle_is_extremal_over_all_orderings(chunk, bins):
    inp0 = make_input([X], [X_SCORES])
    oracle = MODEL.contributions(inp0.batch, inp0.target)[0].tolist()
    assert oracle == pytest.approx([1.0, -0.5, 0.6, -0.7, 0.7])
    # every ordering of the 5 tokens, fed as scores (rank 0 = most important), in one batch
    perms = list(itertools.permutations(range(5)))
    scores = [[5.0 - perm.index(i) for i in range(5)] for perm in perms]
    rows = [X] * len(perms)
    for name, best, worst in [
        ("comprehensiveness", max, min),
        ("sufficiency", min, max),
        ("aopc_morf", max, min),
        ("aopc_lerf", min, max),
    ]:
        kw = {"bins": bins} if name in ("comprehensiveness", "sufficiency") else {}
        every = value(name, rows, scores, chunk=chunk, **kw).values.tolist()
        pair = value(
            name, [X, X], [oracle, [-s for s in oracle]], chunk=chunk, **kw
        ).values.tolist()
        assert pair[0] == pytest.approx(best(every), abs=TOL), name
        assert pair[1] == pytest.approx(worst(every), abs=TOL), name
    # and the oracle's comprehensiveness by hand: order 0 (1.0), 4 (.7), 2 (.6), 1, 3
    ks = bin_sizes(torch.tensor([5]), bins, "ceil")[0].tolist()
    comp = value("comprehensiveness", [X], [oracle], bins=bins, chunk=chunk).values.item()
    assert comp == pytest.approx(hand_comp(X, [0, 4, 2, 1, 3], ks), abs=TOL)


# ---- flips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", CHUNKS)
def test_flip_rate_hand(chunk):
    rows = [X, Y, Z, V]
    scores = [X_SCORES, [0.8, 0.2], [0.3, 0.6], [0.5, 0.7, -1.0]]
    top = [0, 0, 1, 1]
    want = [float(hand_pred(without(r, [t])) != hand_pred(r)) for r, t in zip(rows, top)]
    assert want == [0.0, 1.0, 0.0, 1.0]
    got = value("flip_rate", rows, scores, chunk=chunk).values.tolist()
    assert got == want


@pytest.mark.parametrize("chunk", CHUNKS)
def test_flip_rate_ties_broken_by_position(chunk):
    # equal scores: position 0 (the 2) goes first and Y flips; removing the 3 would not
    assert hand_pred(without(Y, [1])) == hand_pred(Y)
    assert value("flip_rate", [Y], [[0.4, 0.4]], chunk=chunk).values.tolist() == [1.0]


def hand_flip_fraction(tokens, order):
    y = hand_pred(tokens)
    for k in range(1, len(tokens) + 1):
        if hand_pred(without(tokens, order[:k])) != y:
            return k / len(tokens), False
    return 1.0, True


@pytest.mark.parametrize("chunk", CHUNKS)
def test_flip_fraction_hand_and_never_flipped(chunk):
    rows = [X, Y, Z, V]
    scores = [X_SCORES, [0.8, 0.2], [0.3, 0.6], [0.5, 0.7, -1.0]]
    orders = [X_ORDER, [0, 1], [1, 0], [1, 0, 2]]
    want = [hand_flip_fraction(r, o) for r, o in zip(rows, orders)]
    # X flips at k = 2 (2 and 6 gone), Y at k = 1, Z never (not even emptied), V at k = 1
    assert want == [(0.4, False), (0.5, False), (1.0, True), (pytest.approx(1 / 3), False)]
    out = value("flip_fraction", rows, scores, chunk=chunk)
    assert out.values.tolist() == pytest.approx([w[0] for w in want], abs=TOL)
    assert out.flags["never_flipped"].tolist() == [w[1] for w in want]


@pytest.mark.parametrize("chunk", CHUNKS)
def test_flip_erasers_hand(chunk):
    # mask: each removed token becomes id 1 (0.3, -0.2), which votes for class 0
    rows, scores = [X, V], [X_SCORES, [0.5, 0.7, -1.0]]
    orders = [X_ORDER, [1, 0, 2]]
    out = value("flip_fraction", rows, scores, eraser="mask", chunk=chunk)
    want = []
    for r, o in zip(rows, orders):
        ks = [k for k in range(1, len(r) + 1) if hand_pred(masked(r, o[:k])) != hand_pred(r)]
        want.append(ks[0] / len(r) if ks else 1.0)
    assert want == [1.0, pytest.approx(1 / 3)]  # X never flips: mask votes for class 0
    assert out.values.tolist() == pytest.approx(want, abs=TOL)
    assert out.flags["never_flipped"].tolist() == [True, False]
    rate = value("flip_rate", rows, scores, eraser="pad", chunk=chunk).values.tolist()
    assert rate == [0.0, 1.0]


# ---- plausibility --------------------------------------------------------------------------


def test_r_precision_hand():
    rows = [X, X, X]
    scores = [X_SCORES, X_SCORES, [0.0] * 5]
    reference = [
        [True, False, True, True, False],  # top 3 = {0, 4, 2}; hits {0, 2}: 2/3
        [False, True, False, False, False],  # top 1 = {0}: 0
        [True, True, False, False, False],  # ties, "ex2"'s keys: {3, 0}: 1/2 (by position: 1)
    ]
    out = value("r_precision", rows, scores, reference=reference).values.tolist()
    assert out == pytest.approx([2 / 3, 0.0, 0.5], abs=TOL)


def test_r_precision_ignores_reference_on_padding_and_needs_one():
    # row 1 is padded; a reference bit on its padding is ignored
    inp = make_input([X, Y], [X_SCORES, [0.1, 0.9]], reference=[[True] * 5, [True, False]])
    ref = inp.reference.clone()
    ref[1, 3] = True
    out = get_metric("r_precision").compute(dataclasses.replace(inp, reference=ref))
    assert out.values.tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="ex1"):
        value("r_precision", [X, Y], [X_SCORES, [0.1, 0.9]], reference=[[True] * 5, [False, False]])
    with pytest.raises(ValueError, match="reference"):
        value("r_precision", [X], [X_SCORES])


def test_token_f1_and_auprc_hand():
    # X_SCORES rank 0, 4, 2, 3, 1; R = {0, 2, 3}, |R| / n = 3/5 (make_input's rate)
    reference = [[True, False, True, True, False]]
    # rate 3/5: k = 3, S = {0, 4, 2}, 2 hits: 2 · 2 / (3 + 3) = 2/3
    assert value("token_f1", [X], [X_SCORES], reference=reference).values.tolist() == (
        pytest.approx([2 / 3], abs=TOL)
    )
    # k_frac 0.4: k = 2, S = {0, 4}, 1 hit: 2 · 1 / (2 + 3) = 2/5
    out = value("token_f1", [X], [X_SCORES], reference=reference, k_frac=0.4)
    assert out.values.tolist() == pytest.approx([2 / 5], abs=TOL)
    # (Rec, P) at 0.9, 0.7, 0.5, 0.3, 0.1: (1/3, 1), (1/3, 1/2), (2/3, 2/3), (1, 3/4), (1, 3/5)
    # area 1/3 + 0 + 1/3 · (1/2 + 2/3) / 2 + 1/3 · (2/3 + 3/4) / 2 + 0 = 55/72
    out = value("auprc", [X], [X_SCORES], reference=reference)
    assert out.values.tolist() == pytest.approx([55 / 72], abs=TOL)


# ---- batching, padding, chunking -------------------------------------------------------------

ROWS = [X, Y, Z, V, [7, 4, 3, 5, 6, 2]]
SCORES = [X_SCORES, [0.8, 0.2], [0.3, 0.3], [0.5, 0.7, -1.0], [0.1, 0.6, 0.6, 0.2, 0.9, 0.0]]
REFS = [
    [True, False, True, False, False],
    [False, True],
    [True, True],
    [False, True, False],
    [False, True, True, False, False, False],
]
VARIANTS = [
    ("aopc_morf", {}),
    ("aopc_morf", {"k_max": 2}),
    ("aopc_lerf", {}),
    ("comprehensiveness", {}),
    ("sufficiency", {"eraser": "mask"}),
    ("flip_rate", {}),
    ("flip_fraction", {}),
    ("flip_fraction", {"eraser": "pad"}),
    ("r_precision", {}),
    ("average_precision", {}),
    ("token_f1", {"k_frac": 0.4}),  # a fixed rate: the engine's varies with the rows scored
    ("auprc", {}),
]


def all_outputs(rows, scores, refs, chunk):
    return [
        value(name, rows, scores, reference=refs, chunk=chunk, **params)
        for name, params in VARIANTS
    ]


def test_chunk_sizes_give_identical_results():
    first = all_outputs(ROWS, SCORES, REFS, 512)
    for chunk in CHUNKS:
        for a, b in zip(first, all_outputs(ROWS, SCORES, REFS, chunk)):
            assert torch.equal(a.values, b.values)
            assert a.flags.keys() == b.flags.keys()
            assert all(torch.equal(a.flags[k], b.flags[k]) for k in a.flags)


@pytest.mark.parametrize("chunk", CHUNKS)
def test_mixed_lengths_equal_each_example_alone(chunk):
    together = all_outputs(ROWS, SCORES, REFS, chunk)
    for i in range(len(ROWS)):
        alone = all_outputs([ROWS[i]], [SCORES[i]], [REFS[i]], chunk)
        for (name, _), t, a in zip(VARIANTS, together, alone):
            assert t.values[i].item() == a.values.item(), name
            for k in t.flags:
                assert t.flags[k][i].item() == a.flags[k].item()


# metrics computed per batch; a retraining metric (ROAR) and the sanity checks, which run
# the explainer on other models, have their own tests (test_roar, test_sanity)
PER_BATCH = [name for name, m in REGISTRY.items()
             if not m.spec.needs_training and not m.spec.needs_explainer]
# soft erasure masks embedding dimensions, which no token-level variant can express: it
# forwards embeddings itself (test_soft), so the engine is not asked; NAOPC's beam search
# asks once per step, each step's beams built from the last one's answers (test_naopc)
EMBEDDING_LEVEL = {"soft_comprehensiveness", "soft_sufficiency"}
SEQUENTIAL = {"naopc_comprehensiveness", "naopc_sufficiency"}


class CountingPerturber(Perturber):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.calls = 0

    def probs_of_variants(self, *args, **kw):
        self.calls += 1
        return super().probs_of_variants(*args, **kw)


@pytest.mark.parametrize("name", PER_BATCH)
def test_each_metric_calls_the_perturber_once(name):
    inp = make_input(ROWS, SCORES, reference=REFS, chunk=2, segments=SEGMENTS)
    counting = CountingPerturber(MODEL, chunk_size=2)
    inp = dataclasses.replace(inp, perturber=counting)
    get_metric(name).compute(inp)
    if name in SEQUENTIAL:
        assert counting.calls == 1 + max(len(r) for r in ROWS)
        return
    token_level = get_metric(name).spec.family == "faithfulness" and name not in EMBEDDING_LEVEL
    assert counting.calls == (1 if token_level else 0)


# ---- contract over every registered metric ---------------------------------------------------

SEGMENTS = [[0] * (len(r) // 2) + [1] * (len(r) - len(r) // 2) for r in ROWS]
ID_RE = re.compile(r"^[a-z][a-z0-9_]*(\[[^\]]*\])?@[0-9A-Za-z.]+$")


@pytest.mark.parametrize("name", PER_BATCH)
def test_registered_metric_contract(name):
    metric = get_metric(name)
    spec = metric.spec
    assert isinstance(metric, SimpleMetric) and isinstance(spec, MetricSpec)
    assert spec.name == name and re.fullmatch(r"[a-z][a-z0-9_]*", name)
    assert isinstance(spec.version, str) and spec.version
    assert spec.direction in ("higher", "lower", "none")
    assert (spec.direction == "none") == (spec.family == "descriptive")
    assert spec.kinds and spec.kinds <= set(TASK_KINDS)
    assert spec.family in ("faithfulness", "plausibility", "descriptive")
    # a plausibility metric sees only rows with a reference; alignment metrics need every
    # row (an unaligned target word still adds its predicted link), gold grades on each
    assert spec.needs_reference == (spec.family == "plausibility" and ALIGNMENT not in spec.kinds)
    assert spec.citation
    hash(spec)  # frozen and hashable, usable as a key
    # params: (str, value) pairs that are exactly the fn's keyword-only arguments
    keys = [k for k, _ in spec.params]
    assert all(isinstance(k, str) for k in keys) and len(set(keys)) == len(keys)
    fn_params = list(inspect.signature(metric.fn).parameters.values())[1:]
    assert all(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in fn_params)
    assert sorted(p.name for p in fn_params) == sorted(keys)
    # canonical id: stable, well formed, round-trips through params
    assert spec.id == format_id(name, spec.params, spec.version) == get_metric(name).spec.id
    assert ID_RE.fullmatch(spec.id)
    same = with_params(metric, **dict(spec.params))
    assert same.spec.id == spec.id and same.spec == spec
    if "eraser" in keys:
        other = with_params(metric, eraser="mask")
        assert other.spec.id != spec.id and "eraser=mask" in other.spec.id
        assert with_params(other, eraser=spec.param("eraser")).spec.id == spec.id
        assert metric.spec.param("eraser") == "delete"  # the original is untouched
    # compute on a padded pair-classification batch (with segments) and a reference
    out = metric.compute(make_input(ROWS, SCORES, reference=REFS, segments=SEGMENTS))
    assert isinstance(out, MetricOutput)
    assert out.values.shape == (len(ROWS),) and out.values.dtype == torch.float64
    if name == "taucorr_loo":  # undefined (NaN) where the scores are constant: no ranking
        short = torch.tensor([len(set(s)) < 2 for s in SCORES])
        assert torch.isnan(out.values[short]).all() and torch.isfinite(out.values[~short]).all()
    else:
        assert torch.isfinite(out.values).all()
    for flag in out.flags.values():
        assert flag.shape == (len(ROWS),) and flag.dtype == torch.bool


@pytest.mark.parametrize("name", PER_BATCH)
def test_empty_batch_gives_empty_values(name):
    batch = make_batch([[2]], segments=[[0]]).select([])
    inp = MetricInput(
        batch,
        torch.zeros(0, 1),
        torch.zeros(0, dtype=torch.long),
        torch.zeros(0, 2),
        Perturber(MODEL),
        torch.zeros(0, 1, dtype=torch.bool),
    )
    out = get_metric(name).compute(inp)
    assert out.values.shape == (0,) and all(f.shape == (0,) for f in out.flags.values())


def test_registry_and_helpers():
    assert REGISTRY.names() == [
        "aopc_morf",
        "aopc_lerf",
        "comprehensiveness",
        "sufficiency",
        "flip_rate",
        "flip_fraction",
        "taucorr_loo",
        "naopc_comprehensiveness",
        "naopc_sufficiency",
        "soft_comprehensiveness",
        "soft_sufficiency",
        "r_precision",
        "average_precision",
        "token_f1",
        "auprc",
        "token_f1_micro",
        "mean_rank",
        "segment_share",
        "aer",
        "alignment_precision",
        "alignment_recall",
        "roar",
        "ffidelity_plus",
        "ffidelity_minus",
        "randomization_cascading",
        "randomization_independent",
        "randomization_data",
    ]
    with pytest.raises(UnknownNameError, match="did you mean 'sufficiency'"):
        get_metric("sufficency")
    plain = [m.spec.name for m in default_metrics(CLASSIFICATION, has_reference=False)]
    assert plain == REGISTRY.names()[:7]  # NAOPC, the soft metrics, mean_rank: by name only
    with_ref = [m.spec.name for m in default_metrics(CLASSIFICATION, has_reference=True)]
    assert with_ref == REGISTRY.names()[:7] + REGISTRY.names()[11:16]
    pairs = [m.spec.name for m in default_metrics(PAIR_CLASSIFICATION, has_reference=True)]
    assert pairs == with_ref + ["segment_share"]
    alignment = [m.spec.name for m in default_metrics(ALIGNMENT, has_reference=True)]
    # erasure per row and AER; taucorr_loo is for classifiers only
    assert alignment == REGISTRY.names()[:6] + REGISTRY.names()[18:21]
    assert "roar" not in plain + pairs  # retraining runs only when asked for
    assert not [n for n in plain + pairs + alignment if n.startswith("randomization")]
    with pytest.raises(UnknownNameError):
        default_metrics("regression", has_reference=False)
    with pytest.raises(InputError, match="did you mean 'k_max'"):
        with_params(get_metric("aopc_morf"), kmax=3)
    changed = with_params(get_metric("sufficiency"), bins=[0.1, 0.3])
    assert changed.spec.param("bins") == (0.1, 0.3) and changed.spec.id == (
        "sufficiency[bins=0.1,0.3;eraser=delete;rounding=ceil]@2"
    )
    assert get_metric("sufficiency").spec.param("bins") == (0.01, 0.05, 0.1, 0.2, 0.5)


@pytest.mark.parametrize(
    "name, params, match",
    [
        ("aopc_morf", {"k_max": 0}, "k_max"),
        ("aopc_lerf", {"eraser": "blank"}, "eraser"),
        ("comprehensiveness", {"rounding": "up"}, "rounding"),
        ("sufficiency", {"bins": (0.0, 0.5)}, "bin"),
        ("sufficiency", {"bins": ()}, "bins"),
        ("flip_fraction", {"eraser": "zero"}, "eraser"),
    ],
)
def test_bad_params_are_input_errors(name, params, match):
    with pytest.raises(InputError, match=match):
        value(name, [X], [X_SCORES], **params)


@pytest.mark.parametrize("name", PER_BATCH)
def test_empty_example_is_an_error_naming_it(name):
    with pytest.raises(InputError, match="ex1"):
        value(name, [X, []], [X_SCORES, []], segments=[[0] * len(X), []])


# ---- ferret's tie order (ties=stable / introsort / numpy) ----------------------------------

def _votes_input(ids, scores):
    from faithbench.benchmark.core.api import Batch
    from faithbench.testing import Votes
    batch = Batch(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.bool), ("a",))
    perturber = Perturber(Votes())
    return MetricInput(batch, torch.tensor([scores]), torch.tensor([0]),
                       perturber.probs(batch), perturber)


def test_stable_and_introsort_ties_put_the_later_equal_score_first():
    """x = [2, 2, 3, 3], every score 1.0, k = ceil(0.25 · 4) = 1; p0(x) = 3/6. By position
    the rationale is position 0 (a vote for class 0): erasing it leaves [2, 3, 3], p0 = 2/5,
    comprehensiveness 1/2 − 2/5 = 0.1. ferret's argsort()[::-1] with a stable sort (and
    numpy's own sort, stable up to 16 elements) takes position 3: [2, 2, 3], p0 = 3/5, −0.1."""
    inp = _votes_input([2, 2, 3, 3], [1.0, 1.0, 1.0, 1.0])
    comp = with_params(get_metric("comprehensiveness"), bins=(0.25,))
    got = {t: with_params(comp, ties=t).compute(inp).values.item()
           for t in (None, "stable", "introsort")}
    assert got[None] == pytest.approx(0.5 - 2 / 5, abs=1e-6)  # float32 probabilities
    assert got["stable"] == pytest.approx(0.5 - 3 / 5, abs=1e-6)
    assert got["introsort"] == pytest.approx(0.5 - 3 / 5, abs=1e-6)


def test_argsort_top_k_orders_ties_as_worked_by_hand():
    from faithbench.metrics.variants import argsort_top_k
    scores = torch.tensor([[2.0, 1.0, 2.0, 1.0, 0.5]])
    mask = torch.tensor([[True, True, True, True, False]])
    # ascending stable argsort of the 4 real scores: 1, 3, 0, 2; reversed: 2, 0, 3, 1
    got = argsort_top_k(scores, mask, torch.tensor([[1, 2, 3, 4]]), "stable")[0].int().tolist()
    assert got == [[0, 0, 1, 0, 0], [1, 0, 1, 0, 0], [1, 0, 1, 1, 0], [1, 1, 1, 1, 0]]


# numpy's default argsort of these arrays, taken from numpy 1.26.4 and 2.4.6 with their SIMD
# sorts switched off (NPY_DISABLE_CPU_FEATURES): the answers ``introsort`` must reproduce
INTROSORT_17 = ([0.75, 0.5, 0.75, 0.0, 0.0, 0.75, 0.75, 0.75, 0.25, 0.75, 0.0, 0.75, 0.75,
                 0.25, 0.25, 0.0, 0.5],
                [3, 4, 10, 15, 8, 14, 13, 16, 1, 6, 9, 5, 11, 12, 2, 7, 0])
# organ pipe min(i, 256 − i): value v sits at v and 256 − v; 'e' where numpy puts the
# earlier one first, for v = 1..127 (this array sends numpy's quicksort into heapsort)
ORGAN_PIPE_FIRST = ("leeeellllllllleeeeeeellleeleeeellelleellllleleleeeeeeeeelllllleeeelelllell"
                    "eelllleelleellelleeeellleleeleeellelellleelelelelllee")


def test_introsort_is_numpys_own_argsort():
    from faithbench.metrics.variants import introsort_argsort
    values, want = INTROSORT_17
    assert introsort_argsort(values) == want
    assert introsort_argsort(values) != sorted(range(17), key=lambda i: values[i])  # not stable
    pipe = [float(min(i, 256 - i)) for i in range(256)]
    order = introsort_argsort(pipe)
    assert [pipe[i] for i in order] == sorted(pipe)
    first = "".join("e" if order.index(v) < order.index(256 - v) else "l" for v in range(1, 128))
    assert first == ORGAN_PIPE_FIRST


def test_ferret_preset_uses_the_machine_free_order_and_unknown_ties_are_refused():
    from faithbench.metrics import resolve
    assert resolve("comprehensiveness[preset=ferret]").spec.param("ties") == "introsort"
    with pytest.raises(InputError, match=re.escape("ties='quick' is not None | stable | introsort")):
        with_params(get_metric("comprehensiveness"), ties="quick")  # refused before any work


# ---- grow-diag-final's direction convention -------------------------------------------------

def test_grow_diag_final_adds_forward_links_before_reverse_ones():
    """2 source and 2 target words. The source→target model links (0, 0) and (1, 1); the
    target→source model links its word 1 (our target 1) to its word 0 (our source 0):
    (1, 0) in its frame, (0, 1) transposed. The intersection is empty, so nothing grows.
    Final step, forward first: (0, 0) and (1, 1) enter (their words were unaligned); then
    (0, 1) has source 0 and target 1 aligned already and stays out. Reverse first: (0, 1)
    enters, then (0, 0) (target 0 unaligned) and (1, 1) (source 1 unaligned): all three."""
    from faithbench.benchmark.core.links import symmetrize, transpose
    forward, reverse_own_frame = {(0, 0), (1, 1)}, {(1, 0)}
    reverse = transpose(reverse_own_frame)
    assert reverse == {(0, 1)}
    assert symmetrize(forward, reverse, 2, 2, "grow-diag-final") == {(0, 0), (1, 1)}
    assert symmetrize(reverse, forward, 2, 2, "grow-diag-final") == {(0, 0), (0, 1), (1, 1)}
    assert symmetrize(forward, reverse, 2, 2, "intersect") == set()
