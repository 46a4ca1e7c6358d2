"""Plausibility against human rationales: the four metrics of ``faithbench.metrics.plausibility``
on hand-worked rankings, and the rules that turn SST phrase labels and e-SNLI
highlights into token masks.

Expected values are worked out here by hand (or by plain-Python definitions written
from the formulas: AP step by step, scikit-learn's PR curve + trapezoid, the top-k F1),
never by the library; expected masks are written out literally after reading the
spans / highlights by hand.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path

import pytest
import torch

from faithbench.benchmark.core.api import (
    ALIGNMENT,
    CLASSIFICATION,
    PAIR_CLASSIFICATION,
    MetricInput,
)
from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.metrics import REGISTRY, default_metrics, get_metric, resolve, with_params
from faithbench.metrics.plausibility import EmptyReferenceError
from faithbench.tasks.rationales import (
    RationaleError,
    esnli_highlights,
    load_esnli_csv,
    load_sst_rationales,
    nli_tokenize,
    sst_phrase_rationale,
)
from tests.analytic import hand_keys, make_batch

ESNLI_SAMPLE = Path(__file__).parent / "fixtures" / "esnli" / "esnli_dev_sample.csv"
F, T = False, True
PLAUSIBILITY = ("r_precision", "average_precision", "token_f1", "auprc")


def metric_of(name, scores, reference, *, example_ids=None, rate=None, **params):
    """Run a registered metric on right-padded rows. No perturber is given: a
    plausibility metric must not make a forward pass. ``rate`` is the engine's
    dataset-level |R| / n (``MetricInput.reference_rate``)."""
    batch = make_batch([[5] * len(s) for s in scores], example_ids=example_ids)
    width = batch.ids.shape[1]

    def pad(row, value):
        return list(row) + [value] * (width - len(row))

    s = torch.tensor([pad(r, 99.0) for r in scores], dtype=torch.float32)  # padding scores high
    ref = torch.tensor([pad(r, True) for r in reference])  # and is marked: both must be ignored
    inp = MetricInput(
        batch,
        s,
        torch.zeros(len(scores), dtype=torch.long),
        torch.full((len(scores), 2), 0.5),
        None,
        ref,
        reference_rate=rate,
    )
    metric = with_params(get_metric(name), **params) if params else get_metric(name)
    return metric.compute(inp).values.tolist()


def hand_order(scores, example_id):
    """Positions by (−score, tie key): equal scores in the example's seeded order."""
    keys = hand_keys(example_id, len(scores))
    return sorted(range(len(scores)), key=lambda i: (-scores[i], keys[i]))


def hand_ap(scores, reference, example_id):
    """Σ_k (R_k − R_{k−1}) P_k over the ranking by (−score, tie key), in plain Python."""
    order = hand_order(scores, example_id)
    total = sum(reference)
    ap, hits, recall_before = 0.0, 0, 0.0
    for k, i in enumerate(order, start=1):
        hits += reference[i]
        recall = hits / total
        ap += (recall - recall_before) * (hits / k)
        recall_before = recall
    return ap


def hand_auprc(scores, reference):
    """precision_recall_curve + auc written out: one point per distinct score, from the
    highest down, after the point (recall 0, precision 1); trapezoids over recall."""
    total = sum(reference)
    points = [(0.0, 1.0)]
    for theta in sorted(set(scores), reverse=True):
        chosen = [i for i, s in enumerate(scores) if s >= theta]
        hits = sum(reference[i] for i in chosen)
        points.append((hits / total, hits / len(chosen)))
    return sum((r1 - r0) * (p1 + p0) / 2 for (r0, p0), (r1, p1) in itertools.pairwise(points))


def hand_token_f1(scores, reference, rate, example_id="ex0"):
    """F1 of the top ceil(rate · n) tokens (ties by tie key) against the reference."""
    n = len(scores)
    k = min(max(math.ceil(round(rate * n, 9)), 1), n)
    top = hand_order(scores, example_id)[:k]
    hits = sum(reference[i] for i in top)
    if hits == 0:
        return 0.0
    precision, recall = hits / k, hits / sum(reference)
    return 2 * precision * recall / (precision + recall)


def random_rows(seed, count=40):
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        n = rng.randint(1, 12)
        scores = [float(rng.randint(0, 4)) for _ in range(n)]  # many ties on purpose
        reference = [rng.random() < 0.3 for _ in range(n)]
        reference[rng.randrange(n)] = True
        rows.append((scores, reference))
    return rows


# ---- r_precision ---------------------------------------------------------------------------


def test_r_precision_hand_worked():
    rows = [
        ([0.9, 0.1, 0.5, 0.7], [T, F, T, F]),  # k = 2, top {0, 3}: 1/2
        ([0.1, 0.7, 0.8, 0.2], [F, T, T, F]),  # top {2, 1}: 1
        ([0.5, 0.5, 0.5, 0.5], [F, F, T, T]),  # all tied, keys of "ex2" order 3 0 2 1: {3, 0}: 1/2
        ([3.0, -1.0, 2.0, 0.0, 1.0], [F, F, T, F, T]),  # top {0, 2}: 1/2
    ]
    got = metric_of("r_precision", [r[0] for r in rows], [r[1] for r in rows])
    assert got == pytest.approx([0.5, 1.0, 0.5, 0.5], abs=1e-12)


# ---- average_precision (step-wise, ties in the seeded order) ---------------------------------------


def test_average_precision_hand_worked():
    rows = [
        ([0.9, 0.5, 0.1], [T, F, T]),  # relevant, irrelevant, relevant: (1/1 + 2/3) / 2
        ([0.1, 0.5, 0.9], [T, F, F]),  # the one relevant token ranked last: 1/3
        (
            [0.2, 0.8, 0.6, 0.4],
            [F, T, F, T],
        ),  # order 1, 2, 3, 0: hits at ranks 1, 3 -> (1 + 2/3) / 2
        ([3.0, -1.0, 2.0, 0.0, 1.0], [F, F, T, F, T]),  # order 0, 2, 4, 3, 1: (1/2 + 2/3) / 2
    ]
    got = metric_of("average_precision", [r[0] for r in rows], [r[1] for r in rows])
    assert got == pytest.approx([5 / 6, 1 / 3, 5 / 6, 7 / 12], abs=1e-12)
    assert got == pytest.approx([hand_ap(s, r, f"ex{i}") for i, (s, r) in enumerate(rows)],
                                abs=1e-12)


def test_average_precision_perfect_ranking_is_one():
    rows = [
        ([0.9, 0.1], [T, F]),
        ([0.1, 0.7, 0.8, 0.2], [F, T, T, F]),
        ([1.0, 2.0, 3.0], [T, T, T]),
        ([5.0], [T]),
    ]
    got = metric_of("average_precision", [r[0] for r in rows], [r[1] for r in rows])
    assert got == [1.0, 1.0, 1.0, 1.0]


def test_average_precision_orders_ties_by_the_examples_keys():
    """Keys (``hand_keys``) of "ex0" 0.104 0.583 0.738; "ex1" 0.850 0.329 0.397; "ex2"
    0.153 0.524 0.235 0.089: lower key first among equal scores."""
    rows = [
        ([0.5, 0.5, 0.5], [F, T, T]),  # order 0, 1, 2: (1/2 + 2/3) / 2; pooled ties would give 2/3
        ([0.5, 0.5, 0.5], [T, T, F]),  # order 1, 2, 0: hits at ranks 1, 3: (1 + 2/3) / 2
        ([0.5, 0.9, 0.5, 0.1], [F, F, T, F]),  # order 1, 0, 2, 3: hit at rank 3 -> 1/3 (not 1/2)
    ]
    got = metric_of("average_precision", [r[0] for r in rows], [r[1] for r in rows])
    assert got == pytest.approx([7 / 12, 5 / 6, 1 / 3], abs=1e-12)
    assert [hand_order(r[0], f"ex{i}") for i, r in enumerate(rows)] == [
        [0, 1, 2], [1, 2, 0], [1, 0, 2, 3]]


def test_average_precision_matches_the_definition_alone_and_in_a_batch():
    rows = random_rows(0)
    batched = metric_of("average_precision", [r[0] for r in rows], [r[1] for r in rows])
    alone = [metric_of("average_precision", [s], [r], example_ids=[f"ex{i}"])[0]
             for i, (s, r) in enumerate(rows)]
    assert batched == pytest.approx([hand_ap(s, r, f"ex{i}") for i, (s, r) in enumerate(rows)],
                                    abs=1e-12)
    assert batched == alone


# ---- auprc (ERASER: trapezoid over scikit-learn's PR curve, ties pooled) -------------------

# Each row: scores, reference, and the area worked out by hand. (Rec, P) points are one
# per distinct score, highest first, after the start (0, 1); area = Σ ΔRec · (P + P_prev) / 2.
AUPRC_ROWS = [
    # order 0, 3, 2, 1: (1/2, 1), (1/2, 1/2), (1, 2/3), (1, 1/2)
    # area 1/2 · 1 + 0 + 1/2 · (1/2 + 2/3) / 2 + 0 = 12/24 + 7/24 = 19/24
    ([0.9, 0.1, 0.5, 0.7], [T, F, T, F], 19 / 24),
    # 0.9 and 0.5 miss: (0, 0), (0, 0), then (1, 1/3): 1 · (0 + 1/3) / 2 = 1/6 (AP: 1/3)
    ([0.1, 0.5, 0.9], [T, F, F], 1 / 6),
    # order 0, 2, 4, 3, 1: (0, 0), (1/2, 1/2), (1, 2/3), (1, 1/2), (1, 2/5)
    # area 0 + 1/2 · (0 + 1/2) / 2 + 1/2 · (1/2 + 2/3) / 2 = 3/24 + 7/24 = 5/12 (AP: 7/12)
    ([3.0, -1.0, 2.0, 0.0, 1.0], [F, F, T, F, T], 5 / 12),
    # perfect: (1/2, 1), (1, 1), (1, 2/3), (1, 1/2): 1
    ([0.1, 0.7, 0.8, 0.2], [F, T, T, F], 1.0),
    # the reference last of two: (0, 0), (1, 1/2): 1 · (0 + 1/2) / 2 = 1/4 (AP: 1/2)
    ([0.9, 0.1], [F, T], 1 / 4),
    ([5.0], [T], 1.0),  # (1, 1): 1
]

# Tied scores form one threshold. Each row also gives the area that ordering the tied
# block by position (the rule of every other metric) would give, to show they differ.
AUPRC_TIES = [
    # one threshold, (1, 2/3): (1 + 2/3) / 2 = 5/6
    # by position: (0, 0), (1/2, 1/2), (1, 2/3) -> 1/8 + 7/24 = 5/12
    ([0.5, 0.5, 0.5], [F, T, T], 5 / 6, 5 / 12),
    # 0.9: (1/2, 1); block {1, 2}: (1, 2/3); 0.1: (1, 1/2) -> 1/2 + 1/2 · (1 + 2/3) / 2 = 11/12
    # by position: (1/2, 1), (1/2, 1/2), (1, 2/3) -> 1/2 + 7/24 = 19/24
    ([0.9, 0.5, 0.5, 0.1], [T, F, T, F], 11 / 12, 19 / 24),
    # 0.9 misses: (0, 0); block {0, 2}: (1, 1/3) -> 1 · (0 + 1/3) / 2 = 1/6
    # by position (order 1, 0, 2, 3): (0, 0), (1, 1/2) -> 1/4
    ([0.5, 0.9, 0.5, 0.1], [T, F, F, F], 1 / 6, 1 / 4),
    # constant scores: (1, 2/4) -> (1 + 1/2) / 2 = 3/4 (position order: AP-like 5/6 -> 19/24)
    ([1.0, 1.0, 1.0, 1.0], [T, F, T, F], 3 / 4, 19 / 24),
    ([2.0, 2.0, 2.0], [T, T, T], 1.0, 1.0),  # a reference covering everything: 1
]


def test_auprc_hand_worked():
    got = metric_of("auprc", [r[0] for r in AUPRC_ROWS], [r[1] for r in AUPRC_ROWS])
    assert got == pytest.approx([r[2] for r in AUPRC_ROWS], abs=1e-12)
    assert got == pytest.approx([hand_auprc(s, r) for s, r, _ in AUPRC_ROWS], abs=1e-12)


def test_auprc_pools_tied_scores_into_one_threshold():
    got = metric_of("auprc", [r[0] for r in AUPRC_TIES], [r[1] for r in AUPRC_TIES])
    assert got == pytest.approx([r[2] for r in AUPRC_TIES], abs=1e-12)
    # the position order differs on the first four rows: this is no tie-by-position metric
    assert [abs(g - r[3]) > 1e-3 for g, r in zip(got, AUPRC_TIES)] == [T, T, T, T, F]
    # ties at the same score in float32 only: 0.1 + 0.2 and 0.3 round to one float32 value
    assert metric_of("auprc", [[0.1 + 0.2, 0.3, 0.0]], [[F, T, F]]) == pytest.approx([0.75])


def test_auprc_same_alone_and_in_a_padded_batch():
    rows = AUPRC_ROWS + [(s, r, want) for s, r, want, _ in AUPRC_TIES]
    # mixed lengths 1..5 in one batch: padding scores 99 and is marked, and must be ignored
    batched = metric_of("auprc", [r[0] for r in rows], [r[1] for r in rows])
    alone = [metric_of("auprc", [s], [r])[0] for s, r, _ in rows]
    assert batched == pytest.approx([r[2] for r in rows], abs=1e-12)
    assert batched == alone


def test_auprc_matches_the_definition_alone_and_in_a_batch():
    rows = random_rows(1)
    batched = metric_of("auprc", [r[0] for r in rows], [r[1] for r in rows])
    alone = [metric_of("auprc", [s], [r])[0] for s, r in rows]
    assert batched == pytest.approx([hand_auprc(s, r) for s, r in rows], abs=1e-12)
    assert batched == alone


def test_auprc_matches_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")
    rows = random_rows(2, count=60)
    got = metric_of("auprc", [r[0] for r in rows], [r[1] for r in rows])
    want = []
    for scores, reference in rows:
        precision, recall, _ = metrics.precision_recall_curve([int(x) for x in reference], scores)
        want.append(metrics.auc(recall, precision))
    assert got == pytest.approx(want, abs=1e-12)


# ---- token_f1 (ERASER: top ceil(rate · n) tokens, one dataset-level rate) ------------------


def test_token_f1_hand_worked_at_fixed_rates():
    # scores [0.9, 0.1, 0.5, 0.7] rank 0, 3, 2, 1; R = {0, 2}; F1 = 2 |S ∩ R| / (k + |R|)
    scores, reference = [0.9, 0.1, 0.5, 0.7], [T, F, T, F]
    cases = [
        (0.1, 2 / 3),  # k = ceil(0.4) = 1: S = {0}, P = 1, R = 1/2: 2 · 1/2 / (3/2) = 2/3
        (0.25, 2 / 3),  # k = 1
        (0.3, 1 / 2),  # k = ceil(1.2) = 2: S = {0, 3}, P = R = 1/2
        (0.5, 1 / 2),  # k = 2
        (0.75, 4 / 5),  # k = 3: S = {0, 3, 2}, P = 2/3, R = 1: 2 · (2/3) / (5/3) = 4/5
        (1.0, 2 / 3),  # k = 4: P = 1/2, R = 1: 2 · (1/2) / (3/2) = 2/3
    ]
    for k_frac, want in cases:
        got = metric_of("token_f1", [scores], [reference], k_frac=k_frac)
        assert got == pytest.approx([want], abs=1e-12), k_frac
        assert got == pytest.approx([hand_token_f1(scores, reference, k_frac)], abs=1e-12)


def test_token_f1_cuts_every_example_at_one_dataset_level_rate():
    rows = [
        ([0.9, 0.1, 0.5, 0.7], [T, F, T, F]),  # |R| / n = 2/4
        ([0.2, 0.8], [F, T]),  # 1/2
        ([0.1, 0.2, 0.3, 0.4, 0.5], [F, F, F, T, F]),  # 1/5
    ]
    # the engine's rate: (1/2 + 1/2 + 1/5) / 3 = 0.4, so k = ceil(1.6), ceil(0.8), ceil(2.0)
    # row 0: k = 2, S = {0, 3}: 2 · 1 / 4 = 1/2
    # row 1: k = 1, S = {1}: 2 · 1 / 2 = 1
    # row 2: k = 2, S = {4, 3}: 2 · 1 / 3 = 2/3 — where r_precision (k = |R| = 1, S = {4}) gives 0
    rate = (2 / 4 + 1 / 2 + 1 / 5) / 3
    scores, reference = [r[0] for r in rows], [r[1] for r in rows]
    got = metric_of("token_f1", scores, reference, rate=rate)
    assert got == pytest.approx([1 / 2, 1.0, 2 / 3], abs=1e-12)
    assert metric_of("r_precision", scores, reference) == pytest.approx([1 / 2, 1.0, 0.0])
    # k_frac, when set, wins over the engine's rate
    assert metric_of("token_f1", scores, reference, rate=rate, k_frac=0.4) == got
    # k_frac = 1/4: k = 1, 1, 2: {0} -> 2/3, {1} -> 1, {4, 3} -> 2/3
    assert metric_of("token_f1", scores, reference, rate=rate, k_frac=0.25) == pytest.approx(
        [2 / 3, 1.0, 2 / 3], abs=1e-12
    )


def test_token_f1_float_noise_never_adds_a_token():
    # 0.07 · 100 = 7.000000000000001 in floating point; k is 7, so the top 7 are exactly R
    scores = [float(100 - i) for i in range(100)]
    reference = [T] * 7 + [F] * 93
    assert 0.07 * 100 > 7
    assert metric_of("token_f1", [scores], [reference], k_frac=0.07) == [1.0]
    assert metric_of("token_f1", [scores], [reference], rate=0.07) == [1.0]
    # the engine's mean carries the same noise: rates 1/100 and 5/100 average to
    # 0.030000000000000002, and k = 3 (not 4, which would give 2 · 3 / 7)
    noisy = (0.01 + 0.05) / 2
    assert noisy * 100 > 3
    reference = [T] * 3 + [F] * 97
    assert metric_of("token_f1", [scores], [reference], rate=noisy) == [1.0]


def test_token_f1_orders_ties_by_the_examples_keys_and_bounds_k():
    rows = [
        ([1.0, 1.0, 1.0, 1.0], [F, F, T, T]),  # k = 2, "ex0" orders 0 1 3 2: S = {0, 1}: 0
        ([1.0, 1.0, 1.0, 1.0], [T, T, F, F]),  # "ex1" orders 1 2 3 0: S = {1, 2}: 1/2
        ([0.3], [T]),  # k = ceil(0.5) = 1 = n: 1
        ([0.1, 0.9], [T, F]),  # k = 1, S = {1}: 0
    ]
    got = metric_of("token_f1", [r[0] for r in rows], [r[1] for r in rows], k_frac=0.5)
    assert got == [0.0, 0.5, 1.0, 0.0]
    assert hand_order(rows[0][0], "ex0") == [0, 1, 3, 2]
    assert hand_order(rows[1][0], "ex1") == [1, 2, 3, 0]
    # at least one token: k = max(1, ceil(0.01 · 4)) = 1, S = {0}: 2 · 1 / 3 = 2/3
    assert metric_of("token_f1", [[0.9, 0.1, 0.5, 0.7]], [[T, F, T, F]], k_frac=0.01) == (
        pytest.approx([2 / 3], abs=1e-12)
    )


def test_token_f1_same_alone_and_in_a_padded_batch():
    rows = random_rows(3)
    rate = 0.3  # one fixed dataset-level rate for both runs
    batched = metric_of("token_f1", [r[0] for r in rows], [r[1] for r in rows], rate=rate)
    alone = [metric_of("token_f1", [s], [r], rate=rate, example_ids=[f"ex{i}"])[0]
             for i, (s, r) in enumerate(rows)]
    assert batched == pytest.approx(
        [hand_token_f1(s, r, rate, f"ex{i}") for i, (s, r) in enumerate(rows)], abs=1e-12)
    assert batched == alone
    # the hand-worked rows of different lengths (1..5) in one batch, padding scored 99
    fixed = [r[:2] for r in AUPRC_ROWS]
    batched = metric_of("token_f1", [r[0] for r in fixed], [r[1] for r in fixed], k_frac=0.5)
    # k = 2, 2, 3, 2, 1, 1: {0, 3} -> 1/2; {2, 1} vs {0} -> 0; {0, 2, 4} vs {2, 4} -> 4/5;
    # {2, 1} -> 1; {0} vs {1} -> 0; {0} -> 1
    assert batched == pytest.approx([1 / 2, 0.0, 4 / 5, 1.0, 0.0, 1.0], abs=1e-12)
    alone = [metric_of("token_f1", [s], [r], k_frac=0.5, example_ids=[f"ex{i}"])[0]
             for i, (s, r) in enumerate(fixed)]
    assert batched == alone


def test_token_f1_needs_a_rate():
    with pytest.raises(InputError, match="token_f1 needs a rationale rate.*examples ex0, ex1"):
        metric_of("token_f1", [[0.1, 0.2], [0.3, 0.4]], [[T, F], [F, T]])
    for bad in (0, 0.0, 1.5, -0.1, "0.2", True):
        with pytest.raises(InputError, match=r"k_frac=.+ is not None \| a fraction in \(0, 1\]"):
            metric_of("token_f1", [[0.1, 0.2]], [[T, F]], k_frac=bad)
    with pytest.raises(InputError, match="reference_rate must be a fraction"):
        metric_of("token_f1", [[0.1, 0.2]], [[T, F]], rate=0.0)


def test_plausibility_ids_do_not_collide_with_earlier_versions():
    """token_f1 / auprc: version 1 was the rank-based r_precision / average_precision;
    versions before 2 (3 for token_f1, auprc) counted pieces on a subword model, and
    before 3 (4 for token_f1) ordered ties by position."""
    assert get_metric("token_f1").spec.id == "token_f1@4"
    assert get_metric("auprc").spec.id == "auprc@3"
    assert get_metric("token_f1").spec.params == (("k_frac", None), ("granularity", None))
    assert with_params(get_metric("token_f1"), k_frac=0.2).spec.id == "token_f1[k_frac=0.2]@4"
    assert resolve("token_f1[k_frac=0.2]").spec.param("k_frac") == 0.2
    for old, registered in (("token_f1@1", 4), ("token_f1@3", 4), ("auprc@2", 3)):
        with pytest.raises(InputError, match=f"version [123] requested, {registered} registered"):
            resolve(old)
    assert get_metric("r_precision").spec.id == "r_precision@3"
    assert get_metric("average_precision").spec.id == "average_precision@3"
    assert get_metric("token_f1_micro").spec.id == "token_f1_micro@3"
    assert resolve("auprc[granularity=subword]").spec.id == "auprc[granularity=subword]@3"


# ---- subword models: words are the unit ------------------------------------------------------
# Pieces un ##funny | film | ok: words (0, 0, 1, 2); the reference marks word 0 (both of its
# pieces); piece scores 0.3, 0.3, 0.5, 0.1, so word scores 0.6, 0.5, 0.1 and the words rank
# 0, 1, 2 while the pieces rank 2, 1, 0, 3 (the tie keys of "x" put 1 before 0; either
# order gives the values below).
#   r_precision        words: k = 1, top {0}: 1.       pieces: k = 2, top {2, 0}: 1/2
#   average_precision  words: hit at rank 1: 1.        pieces: hits at 2, 3: (1/2 + 2/3)/2 = 7/12
#   auprc              words: (1, 1) at once: 1.       pieces: θ = .5 gives (0, 0), θ = .3
#                      (tied pair) (1, 2/3): trapezoid from (0, 1): 0 + (0 + 2/3)/2 = 1/3
#   token_f1, ρ = 0.5  words: n = 3, k = 2, {0, 1}: 2·1/(2+1) = 2/3.
#                      pieces: n = 4, k = 2, {2, 0}: 2·1/(2+2) = 1/2
WORDS_EXPECTED = {"r_precision": (1.0, 0.5), "average_precision": (1.0, 7 / 12),
                  "auprc": (1.0, 1 / 3)}


def word_input(rate=None):
    from faithbench.benchmark.core.api import Batch
    batch = Batch(torch.tensor([[5, 6, 7, 8, 0]]), torch.tensor([[T, T, T, T, F]]), ("x",),
                  words=torch.tensor([[0, 0, 1, 2, 0]]))
    return MetricInput(batch, torch.tensor([[0.3, 0.3, 0.5, 0.1, 9.0]]), torch.tensor([0]),
                       torch.full((1, 2), 0.5), None, torch.tensor([[T, T, F, F, T]]),
                       reference_rate=rate)


@pytest.mark.parametrize("name", sorted(WORDS_EXPECTED))
def test_plausibility_counts_words_on_a_subword_model(name):
    words, pieces = WORDS_EXPECTED[name]
    metric = get_metric(name)
    assert metric.compute(word_input()).values.item() == pytest.approx(words, abs=1e-12)
    sub = with_params(metric, granularity="subword").compute(word_input())
    assert sub.values.item() == pytest.approx(pieces, abs=1e-12)


def test_token_f1_counts_words_and_needs_k_frac_for_pieces():
    got = get_metric("token_f1").compute(word_input(rate=0.5)).values.item()
    assert got == pytest.approx(2 / 3, abs=1e-12)
    micro = get_metric("token_f1_micro").compute(word_input(rate=0.5))
    assert micro.stats.tolist() == [[1.0, 2.0, 1.0]]  # |S ∩ R|, |S|, |R| in words
    sub = with_params(get_metric("token_f1"), granularity="subword", k_frac=0.5)
    assert sub.compute(word_input()).values.item() == pytest.approx(0.5, abs=1e-12)
    with pytest.raises(InputError, match="needs k_frac: the engine's rationale rate counts words"):
        with_params(get_metric("token_f1"), granularity="subword").compute(word_input(rate=0.5))


def test_engine_reference_rate_counts_words():
    """un ##funny | film | ok with word 0 marked: 1 of 3 words (2 of 4 pieces); a word-level
    example [T, F] gives 1/2; the mean is (1/3 + 1/2) / 2 = 5/12."""
    from faithbench.benchmark.core.api import Example
    from faithbench.benchmark.session import reference_rate
    sub = Example("a", ("un", "##funny", "film", "ok"), 0, reference=(T, T, F, F),
                  words=(0, 0, 1, 2))
    plain = Example("b", ("good", "film"), 1, reference=(T, F))
    assert reference_rate([sub, plain]) == pytest.approx(5 / 12, abs=1e-12)


# ---- common to the four --------------------------------------------------------------------


@pytest.mark.parametrize("name", PLAUSIBILITY)
def test_plausibility_needs_a_non_empty_reference(name):
    params = {"k_frac": 0.5} if name == "token_f1" else {}
    with pytest.raises(
        EmptyReferenceError, match=f"{name}: empty reference rationale for examples ex1"
    ):
        metric_of(name, [[0.1, 0.2], [0.3, 0.4]], [[T, F], [F, F]], **params)
    batch = make_batch([[5, 6]])
    inp = MetricInput(
        batch,
        torch.zeros(1, 2),
        torch.zeros(1, dtype=torch.long),
        torch.full((1, 2), 0.5),
        None,
        None,
        reference_rate=0.5,
    )
    with pytest.raises(
        ValueError, match=f"{name} needs a reference rationale; none given for examples ex0"
    ):
        get_metric(name).compute(inp)


@pytest.mark.parametrize("name", PLAUSIBILITY)
def test_plausibility_metric_is_registered_as_plausibility(name):
    spec = get_metric(name).spec
    assert (spec.family, spec.direction, spec.needs_reference) == ("plausibility", "higher", True)
    assert spec.kinds == {CLASSIFICATION, PAIR_CLASSIFICATION} and "ERASER" in spec.citation
    assert name in [m.spec.name for m in default_metrics(PAIR_CLASSIFICATION, True)]
    assert name in [m.spec.name for m in default_metrics(CLASSIFICATION, True)]
    assert name not in [m.spec.name for m in default_metrics(CLASSIFICATION, False)]
    assert name not in [m.spec.name for m in default_metrics(ALIGNMENT, True)]


def test_plausibility_registration_order():
    names = [name for name, _ in REGISTRY.items()]
    start = names.index("r_precision")
    assert names[start : start + 4] == list(PLAUSIBILITY)


# ---- SST-2 phrase rationales -------------------------------------------------------------

# "a not bad film 8_1/2": a 6-token sentence whose last leaf holds two tokens (4, 5)
TREE = [
    [0, 1, 2],
    [1, 2, 2],
    [2, 3, 0],
    [1, 3, 3],
    [3, 4, 2],
    [1, 4, 3],
    [0, 4, 3],
    [4, 6, 4],
    [0, 6, 3],
]


def test_sst_rule_on_a_hand_made_tree():
    # positive: ≥3 below the root are "not bad" [1,3), "not bad film" [1,4), [0,4) and the
    # two-token leaf [4,6); the minimal ones are [1,3) (its children are 2 and 0) and [4,6)
    assert sst_phrase_rationale(6, 1, TREE) == (F, T, T, F, T, T)
    # negative: only "bad" (0) is ≤1
    assert sst_phrase_rationale(6, 0, TREE) == (F, F, T, F, F, F)
    assert sst_phrase_rationale(6, 1, list(reversed(TREE))) == (F, T, T, F, T, T)
    # very polar only at the root: never the whole sentence, so nothing
    assert sst_phrase_rationale(2, 0, [[0, 1, 2], [1, 2, 2], [0, 2, 0]]) == (F, F)
    assert sst_phrase_rationale(1, 1, [[0, 1, 4]]) == (F,)
    # a neutral leaf inside a polar phrase stays out; ≥3 means 3 counts
    assert sst_phrase_rationale(3, 1, [[0, 1, 3], [1, 2, 2], [2, 3, 2], [1, 3, 2], [0, 3, 3]]) == (
        T,
        F,
        F,
    )


def test_sst_rule_rejects_bad_spans():
    with pytest.raises(RationaleError, match="outside the sentence's 2 tokens"):
        sst_phrase_rationale(2, 1, [[0, 3, 2]])
    with pytest.raises(RationaleError, match="fine label 5"):
        sst_phrase_rationale(2, 1, [[0, 1, 5]])
    with pytest.raises(RationaleError, match="not \\[start, end, fine_label\\]"):
        sst_phrase_rationale(2, 1, [[0, 1]])
    with pytest.raises(RationaleError, match="label must be 0 or 1"):
        sst_phrase_rationale(2, 2, [[0, 2, 2]])


def sst_tokens(shared_data, split):
    rows = [json.loads(line) for line in (shared_data / "sst2" / f"{split}.jsonl").open()]
    return {r["idx"]: tuple(r["sentence"].lower().split()) for r in rows}


# Read by hand from the spans of sst_phrase_annotations/validation.jsonl:
# idx 0 (neg): ≤1 below the root: "of cliches" [3,5) and [0,5), which contains it.
# idx 2 (neg): "holocaust" [8,9) (0) inside "nuclear holocaust" (1); "cheap" [11,12) (0)
#              inside [11,14), [10,14), [9,14) (1); [1,15) contains both.
# idx 4 (pos): "complex" [5,6) (3) inside [2,7), [2,9), [2,10); "profoundly" [12,13) (3)
#              inside "profoundly deepen them" (4) and [10,15), [2,15), [1,15), [1,16).
REAL = {
    0: ["of", "cliches"],
    2: ["holocaust", "cheap"],
    4: ["complex", "profoundly"],
}
REAL_POSITIONS = {0: [3, 4], 2: [8, 11], 4: [5, 12]}


def test_sst_rule_on_real_rows(shared_data):
    path = shared_data / "sst_phrase_annotations" / "validation.jsonl"
    rows = {r["idx"]: r for r in map(json.loads, path.open()) if r["idx"] in REAL}
    loaded = load_sst_rationales(shared_data, "validation", sst_tokens(shared_data, "validation"))
    for idx, words in REAL.items():
        row = rows[idx]
        mask = sst_phrase_rationale(len(row["tokens"]), row["label"], row["spans"])
        assert [t for t, bit in zip(row["tokens"], mask) if bit] == words
        assert [i for i, bit in enumerate(mask) if bit] == REAL_POSITIONS[idx]
        assert loaded[idx] == mask


def test_sst_rationale_counts(shared_data):
    for split, rows, non_empty in (("validation", 872, 859), ("test", 1821, 1791)):
        masks = load_sst_rationales(shared_data, split, sst_tokens(shared_data, split))
        assert len(masks) == rows
        assert sum(any(m) for m in masks.values()) == non_empty
        assert sum(all(m) for m in masks.values()) == (0 if split == "validation" else 1)


def test_sst_train_no_break_space_leaf(shared_data):
    # train idx 2668: "... contempt and 8\xa01\/2 ." — one annotation token, two task tokens
    masks = load_sst_rationales(shared_data, "train", sst_tokens(shared_data, "train"))
    assert len(masks) == 6920
    # negative: "better films" [4,6) (1; children 4 and 2) and "contempt" [7,8) (0)
    assert [i for i, bit in enumerate(masks[2668]) if bit] == [4, 5, 7]
    assert len(masks[2668]) == 12


def test_sentiment_examples_carry_the_rationale(shared_data):
    from faithbench.tasks.classification import TaskOptions
    from faithbench.tasks.sentiment import SPEC, read

    assert SPEC.has_reference and SPEC.version == "1"
    splits = read(TaskOptions(data_dir=str(shared_data), variant="sentences"))
    val = {e.id: e for e in splits["validation"]}
    assert [
        t for t, bit in zip(val["validation-2"].tokens, val["validation-2"].reference) if bit
    ] == ["holocaust", "cheap"]
    assert sum(any(e.reference) for e in splits["validation"]) == 859
    assert all(len(e.reference) == len(e.tokens) for e in splits["test"])
    assert all(e.reference is None for e in splits["train"])


def write_annotations(folder: Path, rows) -> Path:
    path = folder / "sst_phrase_annotations" / "validation.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_load_sst_rationales_spreads_a_split_token(tmp_path):
    rows = [
        {
            "idx": 7,
            "tokens": ["not", "bad", "8\xa01\\/2"],
            "label": 1,
            "spans": [[0, 1, 2], [1, 2, 1], [0, 2, 3], [2, 3, 3], [0, 3, 3]],
        }
    ]
    write_annotations(tmp_path, rows)
    got = load_sst_rationales(tmp_path, "validation", {7: ("not", "bad", "8", "1\\/2")})
    assert got == {7: (T, T, T, T)}


def test_load_sst_rationales_token_mismatch_names_file_and_line(tmp_path):
    rows = [
        {"idx": 0, "tokens": ["good"], "label": 1, "spans": [[0, 1, 3]]},
        {
            "idx": 1,
            "tokens": ["a", "dull", "film"],
            "label": 0,
            "spans": [[0, 1, 2], [1, 2, 1], [2, 3, 2], [1, 3, 1], [0, 3, 1]],
        },
    ]
    path = write_annotations(tmp_path, rows)
    with pytest.raises(DataFileError) as err:
        load_sst_rationales(tmp_path, "validation", {0: ("good",), 1: ("a", "dull", "movie")})
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 2, "tokens")
    assert str(err.value).startswith(f"{path}, line 2: field 'tokens': idx 1:")
    with pytest.raises(DataFileError, match="line 1: field 'idx': idx 0 is not an sst2 validation"):
        load_sst_rationales(tmp_path, "validation", {1: ("a", "dull", "film")})


def test_load_sst_rationales_bad_rows_name_line_and_field(tmp_path):
    good = {"idx": 0, "tokens": ["good"], "label": 1, "spans": [[0, 1, 3]]}
    path = write_annotations(tmp_path, [good, {"idx": 1, "tokens": ["x"], "label": 1}])
    with pytest.raises(DataFileError, match=f"{path}, line 2: field 'spans': missing column"):
        load_sst_rationales(tmp_path, "validation", {0: ("good",), 1: ("x",)})
    write_annotations(tmp_path, [good, {**good, "idx": 1, "spans": [[0, 2, 3]]}])
    with pytest.raises(DataFileError, match="line 2: field 'spans': idx 1: span \\[0, 2, 3\\]"):
        load_sst_rationales(tmp_path, "validation", {0: ("good",), 1: ("good",)})
    write_annotations(tmp_path, [good, good])
    with pytest.raises(DataFileError, match="line 2: field 'idx': duplicate idx 0"):
        load_sst_rationales(tmp_path, "validation", {0: ("good",)})


# ---- e-SNLI highlights -------------------------------------------------------------------

# Masks read by hand from the fixture (premise, hypothesis), over nli_tokenize tokens.
ESNLI_MASKS = {
    # hypothesis "... just *eating* *lunch.*": eating, lunch and its "." (tokens 12-14)
    "4705552913.jpg#2r1n": ((F,) * 10, (F,) * 12 + (T, T, T)),
    # "Two *women* are embracing while *holding* to go *packages.*" / "Two *woman* are
    # *holding* *packages.*"
    "4705552913.jpg#2r1e": ((F, T, F, F, F, T, F, F, T, T), (F, T, F, T, T, T)),
    # "a *blue* shirt" (token 4 of 20) / "a *black* shirt"
    "24467676.jpg#1r1c": ((F,) * 4 + (T,) + (F,) * 15, (F, F, F, F, F, T, F)),
    # "*garage-like*" -> garage, -, like (tokens 11-13) / "*repainting* a *garage*"
    "24467676.jpg#1r1n": ((F,) * 11 + (T, T, T) + (F,) * 6, (F, F, F, T, F, T)),
    # "a *crowd*" (token 12 of 27) / "A *single* *man*"
    "3261712960.jpg#0r1c": ((F,) * 12 + (T,) + (F,) * 14, (F, T, T, F, F, F, F, F)),
}


def highlights(row):
    p, h = nli_tokenize(row["Sentence1"]), nli_tokenize(row["Sentence2"])
    return esnli_highlights(row, len(p), len(h), p, h)


def test_nli_tokenize():
    assert nli_tokenize("Asian-themed area, a crowd can't") == (
        "asian",
        "-",
        "themed",
        "area",
        ",",
        "a",
        "crowd",
        "can",
        "'",
        "t",
    )


def test_load_esnli_csv_fixture():
    rows = load_esnli_csv(ESNLI_SAMPLE)
    assert [r["pairID"] for r in rows] == list(ESNLI_MASKS)
    assert rows[4]["Sentence1"].startswith("At an outdoor event in an Asian-themed area, a crowd")
    assert (
        rows[1]["Sentence2_Highlighted_1"] == "1,3,4" and rows[0]["Sentence1_Highlighted_1"] == "{}"
    )


def test_esnli_marked_columns():
    for row in load_esnli_csv(ESNLI_SAMPLE):
        no_indices = {k: v for k, v in row.items() if "_Highlighted_" not in k}
        assert highlights(no_indices) == ESNLI_MASKS[row["pairID"]], row["pairID"]
        assert highlights(row) == ESNLI_MASKS[row["pairID"]], row["pairID"]


def test_esnli_index_columns():
    for row in load_esnli_csv(ESNLI_SAMPLE):
        no_marks = {k: v for k, v in row.items() if "_marked_" not in k}
        assert highlights(no_marks) == ESNLI_MASKS[row["pairID"]], row["pairID"]


def test_esnli_marked_wins_union_spans_and_none():
    row = load_esnli_csv(ESNLI_SAMPLE)[2]  # "... a *blue* shirt ..." / "... a *black* shirt"
    premise, hypothesis = ESNLI_MASKS[row["pairID"]]
    # the authors say to trust the marked columns: an index column that disagrees is ignored
    assert highlights({**row, "Sentence2_Highlighted_1": "0"}) == (premise, hypothesis)
    # union with a second annotator who marked "A *man*" in the hypothesis
    two = {**row, "Sentence2_marked_2": "A *man* is wearing a black shirt"}
    assert highlights(two) == (premise, (F, T, F, F, F, T, F))
    # a starred span covers every word inside it
    span = {**row, "Sentence2_marked_1": "A man is *wearing a black* shirt"}
    assert highlights(span)[1] == (F, F, F, T, T, T, F)
    bare = {k: v for k, v in row.items() if "_marked_" not in k and "_Highlighted_" not in k}
    assert highlights(bare) is None
    # cut to the first n tokens, for a task that truncates
    p, h = nli_tokenize(row["Sentence1"]), nli_tokenize(row["Sentence2"])
    assert esnli_highlights(row, 5, 6, p, h) == ((F, F, F, F, T), (F, F, F, F, F, T))


def test_esnli_token_mismatch_names_pair_and_column():
    row = load_esnli_csv(ESNLI_SAMPLE)[3]
    p, h = nli_tokenize(row["Sentence1"]), nli_tokenize("A man is repainting a shed")
    with pytest.raises(
        RationaleError, match="pair '24467676.jpg#1r1n': column 'Sentence2_marked_1'"
    ):
        esnli_highlights(row, len(p), len(h), p, h)
    bad = {k: v for k, v in row.items() if "_marked_" not in k} | {"Sentence2_Highlighted_1": "9"}
    h = nli_tokenize(row["Sentence2"])
    with pytest.raises(
        RationaleError, match="'Sentence2_Highlighted_1' indexes word 9 of a 6-word"
    ):
        esnli_highlights(bad, len(p), len(h), p, h)


def write_csv(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "esnli_dev.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


HEADER = (
    "pairID,gold_label,Sentence1,Sentence2,Explanation_1,Sentence1_marked_1,"
    "Sentence2_marked_1,Sentence1_Highlighted_1,Sentence2_Highlighted_1"
)
GOOD = "p1,neutral,A dog runs.,A dog sleeps.,e,A *dog* runs.,A dog *sleeps.*,1,2"


@pytest.mark.parametrize(
    "line, field, problem",
    [
        (
            "p2,neutral,A dog.,A cat.,e,A dog.,A cat.,{},{},extra",
            None,
            "10 fields, the header has 9",
        ),
        ("p2,neutral,A dog.,A cat.,e,A dog.", "Sentence2_marked_1", "missing field"),
        ("p2,maybe,A dog.,A cat.,e,A dog.,A cat.,{},{}", "gold_label", "unknown label 'maybe'"),
        (
            "p2,neutral,A dog.,A cat.,e,A dog.,A *cat.,{},{}",
            "Sentence2_marked_1",
            "unbalanced asterisks",
        ),
        (
            "p2,neutral,A dog.,A cat.,e,A dog.,A cat.,{},1;2",
            "Sentence2_Highlighted_1",
            "not a comma-separated list",
        ),
    ],
)
def test_malformed_esnli_csv_names_file_line_and_column(tmp_path, line, field, problem):
    path = write_csv(tmp_path, [HEADER, GOOD, line])
    with pytest.raises(DataFileError, match=problem) as err:
        load_esnli_csv(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 3, field)
    assert str(err.value).startswith(f"{path}, line 3:")


def test_esnli_csv_header_needs_the_sentences(tmp_path):
    path = write_csv(tmp_path, ["pairID,gold_label,Sentence1", "p1,neutral,A dog."])
    with pytest.raises(DataFileError, match="line 1: field 'Sentence2': missing column"):
        load_esnli_csv(path)
