"""LIME, KernelSHAP and Shapley value sampling against Captum's own classes called
directly on the model, one example at a time, with a forward function written here
(KernelSHAP's samples are handed to Captum, whose sampler draws another stream; the
sampler's distribution is checked by simulation):
each sample's kept tokens are written out as a list and forwarded alone (no engine, no
erasure code). Per example at batch 1 and inside a batch of 16 rows of other lengths;
then the properties that hold by definition (Shapley sums, subword sharing), the
engine's sharing, and the seed."""

from __future__ import annotations

import pytest
import torch
from captum._utils.models.linear_model import SkLearnRidge
from captum.attr import KernelShap, Lime, ShapleyValueSampling
from captum.attr._core.lime import get_exp_kernel_similarity_function

from faithbench.benchmark.core.api import Batch, example_generator
from faithbench.benchmark.core.features import fit_linear
from faithbench.benchmark.core.perturb import Perturber, share_engine
from faithbench.benchmark.core.vocab import collate
from faithbench.submissions.kernel_shap import KernelShapExplainer, shapley_kernel_samples
from faithbench.submissions.lime import KERNEL_WIDTH, RIDGE_ALPHA, LimeExplainer
from faithbench.submissions.shapley_sampling import ShapleySamplingExplainer
from faithbench.testing import tiny_classifier

ROWS = [[3 + (i * 7 + j) % 17 for j in range(2 + i % 7)] for i in range(16)]
MASK_ID = 1


def loud_classifier():
    """The tiny BiLSTM with its weights scaled up, so one word moves p(target) by tenths,
    not the untrained model's hundredths."""
    model = tiny_classifier(seed=3)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    return model.eval()


def batch_of(rows, words=None) -> Batch:
    """Rows "ex0", "ex1", ... right-padded (ids >= 3, so no real token is padding)."""
    return collate(rows, [f"ex{i}" for i in range(len(rows))], words=words)


def direct_forward(model, tokens: list[int], feature: list[int], eraser: str):
    """p(·) of each presence vector: the kept tokens written out one sample at a time."""
    def forward(presence):
        out = []
        for z in presence.tolist():
            kept = [t for t, f in zip(tokens, feature) if z[f] > 0.5]
            if eraser == "mask":
                kept = [t if z[f] > 0.5 else MASK_ID for t, f in zip(tokens, feature)]
            ids = torch.tensor([kept or [0]])
            one = Batch(ids=ids, mask=torch.tensor([[bool(kept)] * ids.shape[1]]),
                        example_ids=("x",))
            out.append(torch.softmax(model.logits(one), -1)[0].detach())
        return torch.stack(out)
    return forward


def captum_direct(kind, model, tokens, feature, target, seed, n_samples, eraser="delete"):
    """Captum's attribution of each feature for one example, under ``seed``."""
    m = max(feature) + 1
    forward = direct_forward(model, tokens, feature, eraser)
    torch.manual_seed(seed)
    args = {"baselines": torch.zeros(1, m), "target": target,
            "feature_mask": torch.arange(m).view(1, -1), "n_samples": n_samples}
    if kind == "lime":
        method = Lime(forward, interpretable_model=SkLearnRidge(alpha=1.0),
                      similarity_func=get_exp_kernel_similarity_function(
                          "cosine", kernel_width=KERNEL_WIDTH))
    elif kind == "kernel_shap":  # Captum's estimator, handed the samples ours draws
        method = KernelShap(forward)
        samples = shapley_kernel_samples(m, n_samples)[0].long()

        def handed_over(inputs, **kwargs):  # a generator function, as Captum requires
            yield from samples.split(1)
        method.perturb_func = handed_over
    else:
        method = ShapleyValueSampling(forward)
    with torch.no_grad():
        return method.attribute(torch.ones(1, m), **args)[0]


EXPLAINERS = {"lime": LimeExplainer, "kernel_shap": KernelShapExplainer,
              "shapley_sampling": ShapleySamplingExplainer}
SAMPLES = {"lime": 60, "kernel_shap": 60, "shapley_sampling": 5}


@pytest.mark.parametrize("kind", sorted(EXPLAINERS))
def test_equals_captum_called_directly_alone_and_in_a_batch_of_16(kind):
    model = loud_classifier()
    batch = batch_of(ROWS)
    target = torch.tensor([i % 2 for i in range(16)])
    rng = torch.Generator().manual_seed(11)
    explainer = EXPLAINERS[kind](n_samples=SAMPLES[kind])
    batched = explainer.explain(model, batch, target, rng=rng)
    nonzero = 0
    for row in range(16):
        n = len(ROWS[row])
        seed = example_generator(rng, f"ex{row}").initial_seed()
        want = captum_direct(kind, model, ROWS[row], list(range(n)), int(target[row]), seed,
                             SAMPLES[kind])
        alone = explainer.explain(model, batch.select([row]), target[row:row + 1], rng=rng)
        # abs 1e-6: sklearn's float32 fit and ours differ in rounding under weights of 10^6
        assert alone[0, :n] == pytest.approx(want, rel=1e-5, abs=1e-6)
        assert batched[row, :n] == pytest.approx(want, rel=1e-5, abs=1e-6)
        assert (batched[row, n:] == 0).all()
        nonzero += int((want.abs() > 1e-3).sum())
    assert nonzero > 16  # the comparison is not between zeros


def test_kernel_shap_sampler_draws_captums_distribution():
    """Captum's KernelShap draws a size k with p(k) ∝ (m − 1) / (k (m − k)), then each
    k-subset with equal probability. 40,000 draws over m = 5 words: chi-square of the
    sizes against p(k), and of the subsets of each size against uniform, at α = 0.001
    (a correct sampler fails one of the four size classes' tests or the size test with
    probability about 0.005)."""
    from itertools import combinations

    from scipy.stats import chisquare
    m, n = 5, 40_002
    torch.manual_seed(0)
    samples, weights = shapley_kernel_samples(m, n)
    assert samples[0].tolist() == [1.0] * m and samples[1].tolist() == [0.0] * m
    assert weights[:2].tolist() == [1e6, 1e6] and (weights[2:] == 1).all()
    drawn = samples[2:]
    sizes = drawn.sum(dim=1).long()
    kernel = torch.tensor([(m - 1) / (k * (m - k)) for k in range(1, m)], dtype=torch.double)
    observed = torch.bincount(sizes, minlength=m)[1:].double()
    assert observed.sum() == n - 2  # never the empty or the full input
    expected = kernel / kernel.sum() * (n - 2)
    assert chisquare(observed.numpy(), expected.numpy()).pvalue > 1e-3
    for k in range(1, m):
        rows = drawn[sizes == k]
        codes = (rows * (2 ** torch.arange(m))).sum(dim=1).long()
        every = [sum(2 ** i for i in c) for c in combinations(range(m), k)]
        counts = torch.bincount(codes, minlength=2 ** m)[every].double()
        assert counts.sum() == len(rows)  # only subsets of size k
        assert chisquare(counts.numpy()).pvalue > 1e-3


@pytest.mark.parametrize("kind", sorted(EXPLAINERS))
def test_words_are_the_features_on_a_subword_model_and_share_their_value(kind):
    model = loud_classifier()
    rows, words = [[5, 6, 7, 8, 9]], [[0, 0, 1, 2, 2]]
    batch, target = batch_of(rows, words), torch.tensor([1])
    rng = torch.Generator().manual_seed(2)
    got = EXPLAINERS[kind](n_samples=SAMPLES[kind]).explain(model, batch, target, rng=rng)[0]
    seed = example_generator(rng, "ex0").initial_seed()
    per_word = captum_direct(kind, model, rows[0], words[0], 1, seed, SAMPLES[kind])  # (3,)
    want = per_word[torch.tensor(words[0])] / torch.tensor([2.0, 2.0, 1.0, 2.0, 2.0])
    assert got == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert (per_word.abs() > 1e-3).any()


def test_lime_fits_lime_packages_ridge_and_leaves_no_word_at_zero():
    assert RIDGE_ALPHA == 1.0  # lime.lime_base: Ridge(alpha=1, fit_intercept=True)
    model = loud_classifier()
    batch, target = batch_of(ROWS[8:12]), torch.tensor([0, 1, 1, 0])
    got = LimeExplainer(n_samples=60).explain(model, batch, target,
                                             rng=torch.Generator().manual_seed(0))
    assert (got[batch.mask] != 0).all()  # a Lasso would zero some of them


@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("rank_deficient", [False, True])
def test_fit_linear_solves_sklearns_weighted_fits(alpha, rank_deficient):
    """``fit_linear`` against sklearn's LinearRegression / Ridge with sample weights (the
    fits behind Captum's SkLearnLinearRegression / SkLearnRidge), in float64, on
    weights spanning 10^6 as KernelSHAP's do; with two identical columns least squares
    has many solutions and both must pick the minimum-norm one (equal halves)."""
    from sklearn.linear_model import LinearRegression, Ridge
    g = torch.Generator().manual_seed(5)
    x = torch.bernoulli(torch.full((200, 6), 0.5), generator=g)
    if rank_deficient:
        x[:, 5] = x[:, 4]
    y = torch.rand(200, 2, generator=g, dtype=torch.float64)
    w = torch.rand(200, generator=g, dtype=torch.float64) + 0.1
    w[:2] = 1e6
    got = fit_linear(lambda _: y, x, w, target=1, alpha=alpha)
    fit = Ridge(alpha=alpha) if alpha else LinearRegression()
    fit.fit(x.double().numpy(), y[:, 1].numpy(), sample_weight=w.numpy())
    assert got.shape == (1, 6)
    assert got[0].double().numpy() == pytest.approx(fit.coef_, rel=1e-5, abs=1e-6)
    if rank_deficient:
        assert float(got[0, 4]) == pytest.approx(float(got[0, 5]), abs=1e-6)


def test_lime_kernel_is_the_lime_packages_text_kernel():
    """lime's LimeTextExplainer weighs a sample at cosine distance d by
    sqrt(exp(-(100 d)^2 / 25^2)); Captum's kernel with our width must give the same."""
    for d in (0.1, 0.5, 0.9):
        want = (torch.exp(-torch.tensor(100 * d) ** 2 / 25 ** 2)) ** 0.5
        got = get_exp_kernel_similarity_function("cosine", kernel_width=KERNEL_WIDTH)
        cos = torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0 - d, (1 - (1 - d) ** 2) ** 0.5]])
        assert float(got(cos[0], cos[1], None)) == pytest.approx(float(want), rel=2e-3)


def test_mask_eraser_substitutes_the_mask_id():
    model = loud_classifier()
    batch, target = batch_of(ROWS[:3]), torch.tensor([0, 1, 1])
    rng = torch.Generator().manual_seed(4)
    got = ShapleySamplingExplainer(n_samples=4, eraser="mask").explain(model, batch, target,
                                                                       rng=rng)
    for row in range(3):
        n = len(ROWS[row])
        seed = example_generator(rng, f"ex{row}").initial_seed()
        want = captum_direct("shapley_sampling", model, ROWS[row], list(range(n)),
                             int(target[row]), seed, 4, eraser="mask")
        assert got[row, :n] == pytest.approx(want, rel=1e-5, abs=1e-7)


def test_shapley_sampling_sums_to_the_full_minus_the_empty_input():
    """Every ordering's gains telescope: sum_t phi_t = p(x) - p(empty), for any draws."""
    model = loud_classifier()
    batch, target = batch_of(ROWS[:6]), torch.tensor([0, 1, 0, 1, 0, 1])
    got = ShapleySamplingExplainer(n_samples=3).explain(
        model, batch, target, rng=torch.Generator().manual_seed(0))
    for row in range(6):
        forward = direct_forward(model, ROWS[row], list(range(len(ROWS[row]))), "delete")
        p = forward(torch.tensor([[1.0] * len(ROWS[row]), [0.0] * len(ROWS[row])]))
        t = int(target[row])
        assert float(got[row].sum()) == pytest.approx(float(p[0, t] - p[1, t]), rel=1e-5)


def test_one_word_examples_get_their_exact_shapley_value():
    """Captum's KernelShap cannot sample a one-feature input (its kernel distribution is
    empty); the one word's value is p(x) - p(empty), which the others estimate too."""
    model = loud_classifier()
    batch, target = batch_of([[7], [3, 4, 5]]), torch.tensor([1, 0])
    p = direct_forward(model, [7], [0], "delete")(torch.tensor([[1.0], [0.0]]))[:, 1]
    for cls in EXPLAINERS.values():
        got = cls(n_samples=30).explain(model, batch, target,
                                        rng=torch.Generator().manual_seed(0))
        if cls is LimeExplainer:  # a ridge fit shrinks the one coefficient a little
            assert 0 < float(got[0, 0]) / float(p[0] - p[1]) <= 1
        else:
            assert float(got[0, 0]) == pytest.approx(float(p[0] - p[1]), rel=1e-5)


def test_kernel_shap_is_exact_shapley_on_an_additive_model():
    """On p = sigmoid-free additive votes (Votes model's probabilities are not additive,
    so use a linear readout): with 2^M samples allowed, KernelSHAP recovers each word's
    own contribution."""
    class Additive:
        pad_id, mask_id, baseline_id = 0, 1, 0
        weights = torch.zeros(50)

        def logits(self, batch):
            w = self.weights[batch.ids] * batch.mask
            s = w.sum(1)
            # two "probabilities" that are linear in the kept words (softmax of log)
            return torch.log(torch.stack([0.5 + s, 0.5 - s], 1))

    model = Additive()
    model.weights[[5, 6, 7]] = torch.tensor([0.2, -0.1, 0.05])
    batch, target = batch_of([[5, 6, 7]]), torch.tensor([0])
    engine = Perturber(model)
    share_engine(model, engine)
    got = KernelShapExplainer(n_samples=200).explain(model, batch, target,
                                                     rng=torch.Generator().manual_seed(0))
    assert got[0].tolist() == pytest.approx([0.2, -0.1, 0.05], abs=1e-4)
    # and each distinct subset was asked for and forwarded once: 2^3 of the 200 drawn
    assert engine.rows_requested == 8 and engine.rows_forwarded == 8


def test_same_seed_same_scores_other_seed_other_scores():
    model = loud_classifier()
    batch, target = batch_of(ROWS[4:8]), torch.tensor([0, 1, 0, 1])
    for cls in EXPLAINERS.values():
        explainer = cls(n_samples=20)
        first = explainer.explain(model, batch, target, rng=torch.Generator().manual_seed(0))
        again = explainer.explain(model, batch, target, rng=torch.Generator().manual_seed(0))
        other = explainer.explain(model, batch, target, rng=torch.Generator().manual_seed(1))
        assert torch.equal(first, again)
        assert not torch.equal(first, other)


def test_the_global_generator_is_left_alone():
    model = loud_classifier()
    batch, target = batch_of(ROWS[:2]), torch.tensor([0, 1])
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    LimeExplainer(n_samples=10).explain(model, batch, target, rng=torch.Generator().manual_seed(0))
    assert torch.equal(torch.random.get_rng_state(), state)


@pytest.mark.parametrize("m", [1, 10, 62, 63, 70])
def test_distinct_rows_finds_each_row_once_and_maps_every_row_back(m):
    from faithbench.benchmark.core.features import distinct_rows
    gen = torch.Generator().manual_seed(m)
    present = torch.rand(300, m, generator=gen) < 0.5
    present[5:50] = present[0]  # plenty of repeats
    rows, inverse = distinct_rows(present)
    assert torch.equal(rows[inverse], present)
    assert len(rows) == len({tuple(r) for r in present.tolist()})
