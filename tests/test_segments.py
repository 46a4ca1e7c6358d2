"""Per-segment erasure for sentence pairs, hand-worked on a bag-of-words model.

x = [a, b | c, d] (premise a b, hypothesis c d). With the delete eraser removing a
token subtracts its weight from the logits, so every probability below is a
two-class softmax of sums of the chosen weights.
"""

import math

import pytest
import torch

from faithbench.benchmark.core.api import MetricInput
from faithbench.benchmark.core.perturb import Perturber
from faithbench.metrics import get_metric, with_params
from tests.analytic import BagOfWords, make_batch

# token id -> (weight for class 0, weight for class 1)
W = {2: (0.0, 1.0), 3: (0.0, 0.5), 4: (0.0, 2.0), 5: (0.0, -0.5)}
ROW, SEGMENTS = [2, 3, 4, 5], [0, 0, 1, 1]
SCORES = torch.tensor([[0.4, 0.1, 0.9, 0.2]])  # order: c(4) a(2) d(5) b(3)


def p1(tokens):
    """p(class 1) of a bag of tokens, by hand."""
    z = sum(W[t][1] - W[t][0] for t in tokens)
    return 1 / (1 + math.exp(-z))


def inp(chunk):
    model = BagOfWords(W)
    batch = make_batch([ROW], segments=[SEGMENTS])
    perturber = Perturber(model, chunk_size=chunk)
    return MetricInput(batch, SCORES, torch.tensor([1]), perturber.probs(batch), perturber)


@pytest.mark.parametrize("chunk", [1, 2, 512])
def test_comprehensiveness_per_segment(chunk):
    full = p1(ROW)
    bins = (0.5, 1.0)
    # premise only (a, b; a ranked first): k = 1 removes a, k = 2 removes a and b
    premise = ((full - p1([3, 4, 5])) + (full - p1([4, 5]))) / 2
    # hypothesis only (c, d; c ranked first): k = 1 removes c, k = 2 removes c and d
    hypothesis = ((full - p1([2, 3, 5])) + (full - p1([2, 3]))) / 2
    # both segments: n = 4, k = 2 removes c, a; k = 4 removes everything
    both = ((full - p1([3, 5])) + (full - p1([]))) / 2
    metric = with_params(get_metric("comprehensiveness"), bins=bins)
    for segment, expected in ((0, premise), (1, hypothesis), (None, both)):
        m = with_params(metric, segment=segment)
        assert m.compute(inp(chunk)).values.item() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("chunk", [1, 3, 512])
def test_sufficiency_keeps_the_other_sentence_whole(chunk):
    full = p1(ROW)
    m = with_params(get_metric("sufficiency"), bins=(0.5,), segment=1)
    # keep the top hypothesis token c and the whole premise a b
    assert m.compute(inp(chunk)).values.item() == pytest.approx(full - p1([2, 3, 4]), abs=1e-6)


def test_flip_and_aopc_per_segment():
    full = p1(ROW)
    aopc = with_params(get_metric("aopc_morf"), segment=0)
    expected = ((full - p1([3, 4, 5])) + (full - p1([4, 5]))) / 2  # k = 1, 2 (n = 2)
    assert aopc.compute(inp(512)).values.item() == pytest.approx(expected, abs=1e-6)
    flip = with_params(get_metric("flip_fraction"), segment=0)
    out = flip.compute(inp(512))  # p1 stays > 0.5 with the premise gone: never flips
    assert out.values.item() == 1.0 and out.flags["never_flipped"].item()


def test_segment_goes_into_the_id_only_when_set():
    m = get_metric("comprehensiveness")
    assert "segment" not in m.spec.id
    assert with_params(m, segment=0).spec.id == (
        "comprehensiveness[bins=0.01,0.05,0.1,0.2,0.5;eraser=delete;rounding=ceil;segment=0]@2")


def test_segment_without_segments_is_an_input_error():
    from faithbench.benchmark.core.errors import InputError

    model = BagOfWords(W)
    batch = make_batch([ROW])
    perturber = Perturber(model)
    x = MetricInput(batch, SCORES, torch.tensor([1]), perturber.probs(batch), perturber)
    with pytest.raises(InputError, match="needs a batch with segments"):
        with_params(get_metric("flip_rate"), segment=1).compute(x)


def test_segment_share_counts_words_on_a_subword_model():
    """Premise un ##funny | film, hypothesis ok: words (0, 0, 1, 2), piece scores
    0.2, 0.2, 0.1, 0.3, so word scores 0.4, 0.1, 0.3. Bin 0.25: words n = 3, k = ceil(0.75)
    = 1, the top word is 0 (premise): share 1. Pieces n = 4, k = ceil(1.0) = 1, the top
    piece is 3 (hypothesis): share 0 (version 1's answer, now ``granularity=subword``)."""
    from faithbench.benchmark.core.api import Batch
    batch = Batch(torch.tensor([[5, 6, 7, 8]]), torch.ones(1, 4, dtype=torch.bool), ("x",),
                  segments=torch.tensor([[0, 0, 0, 1]]), words=torch.tensor([[0, 0, 1, 2]]))
    inp = MetricInput(batch, torch.tensor([[0.2, 0.2, 0.1, 0.3]]), torch.tensor([0]),
                      torch.full((1, 2), 0.5), None)
    share = with_params(get_metric("segment_share"), bins=(0.25,))
    assert share.compute(inp).values.item() == 1.0
    assert with_params(share, granularity="subword").compute(inp).values.item() == 0.0
    assert get_metric("segment_share").spec.id == (
        "segment_share[bins=0.01,0.05,0.1,0.2,0.5;rounding=ceil;segment=0]@3")
