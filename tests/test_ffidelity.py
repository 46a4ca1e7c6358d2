"""F-Fidelity (``faithbench.metrics.ffidelity``): the stochastic removal checked against an
independent enumeration of every erased subset, the sampled estimator against that
expectation within a standard-error tolerance, the retrain hook that gives the
surrogate masked training, and one run end to end on the synthetic task."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from faithbench import metrics as metric_registry
from faithbench.benchmark.core.api import Batch, MetricInput, TaskOptions
from faithbench.benchmark.core.perturb import Perturber
from faithbench.benchmark.core.retrain import Retrainer
from faithbench.metrics.ffidelity import (
    FFIDELITY_PLUS,
    SIZES,
    removal_generator,
    stochastic_removal,
)
from faithbench.testing import tiny_classifier

ROWS = [[5, 17, 9, 30, 2, 44, 12], [8, 21, 33, 6], [40, 3, 27, 11, 19, 7, 25, 14]]
SCORES = [[0.3, -1.2, 2.0, 0.7, 0.1, -0.4, 1.1], [0.5, 0.2, -0.3, 0.9],
          [1.5, -0.2, 0.05, 0.8, -1.0, 0.6, 0.3, 2.2]]
LABELS = [0, 1, 1]
BINS = (0.25, 0.5, 0.75)


def batch_of(rows, scores):
    width = max(map(len, rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    s = torch.zeros(len(rows), width)
    for i, (r, sc) in enumerate(zip(rows, scores)):
        ids[i, : len(r)], mask[i, : len(r)], s[i, : len(r)] = torch.tensor(r), True, torch.tensor(sc)
    return Batch(ids, mask, tuple(f"ex-{i}" for i in range(len(rows)))), s


def measure_of(model, tokens, label, measure):
    """m(x) of one row, forwarded alone."""
    batch = Batch(torch.tensor([tokens]), torch.ones(1, len(tokens), dtype=torch.bool), ("x",))
    with torch.no_grad():
        p = torch.softmax(model.logits(batch).float(), -1)[0].double()
    return float(p.argmax() == label) if measure == "accuracy" else float(p[label])


def by_hand(model, tokens, scores, label, *, bins, alpha, beta, minus, measure):
    """Per size: (m(x) − E m(x'), Var m(x')) enumerating every subset of the region with
    its Bernoulli weight, written from the card's formula without the module's code."""
    n = len(tokens)
    order = sorted(range(n), key=lambda t: (-scores[t], t))  # ties by position
    out = []
    for s in bins:
        k = min(max(math.ceil(s * n - 1e-9), 1), n)
        region = order[k:] if minus else order[:k]
        q = min(alpha, beta * n / len(region)) if region else 0.0
        mean = second = 0.0
        for bits in itertools.product((0, 1), repeat=len(region)):
            gone = {t for t, bit in zip(region, bits) if bit}
            w = q ** len(gone) * (1 - q) ** (len(region) - len(gone))
            erased = [model.mask_id if t in gone else tok for t, tok in enumerate(tokens)]
            m = measure_of(model, erased, label, measure)
            mean, second = mean + w * m, second + w * m * m
        out.append((measure_of(model, tokens, label, measure) - mean, second - mean * mean))
    return out


@pytest.fixture(scope="module")
def toy():
    model = tiny_classifier(3)
    batch, scores = batch_of(ROWS, SCORES)
    perturber = Perturber(model)
    inp = MetricInput(batch, scores, torch.tensor(LABELS), perturber.probs(batch), perturber)
    return model, inp


@pytest.mark.parametrize("minus", [False, True])
@pytest.mark.parametrize("measure", ["probability", "accuracy"])
def test_exact_mode_equals_an_independent_enumeration(toy, minus, measure):
    model, inp = toy
    out = stochastic_removal(inp, torch.tensor(LABELS), bins=BINS, alpha=0.5, beta=0.3,
                             samples=None, minus=minus, eraser="mask", measure=measure)
    for row, (tokens, scores, label) in enumerate(zip(ROWS, SCORES, LABELS)):
        want = by_hand(model, tokens, scores, label, bins=BINS, alpha=0.5, beta=0.3,
                       minus=minus, measure=measure)
        assert out.curve[row].tolist() == pytest.approx([d for d, _ in want], abs=1e-6)
        assert out.values[row].item() == pytest.approx(sum(d for d, _ in want) / len(BINS),
                                                       abs=1e-6)


@pytest.mark.parametrize("minus", [False, True])
def test_sampled_estimate_is_within_four_standard_errors(toy, minus):
    """N draws per size, independent across sizes: Var(value) = Σ_s Var_s / (N·S²)."""
    model, inp = toy
    n_draws = 3000
    gens = [removal_generator(7, i) for i in inp.batch.example_ids]
    out = stochastic_removal(inp, torch.tensor(LABELS), bins=BINS, alpha=0.5, beta=0.3,
                             samples=n_draws, minus=minus, eraser="mask",
                             measure="probability", generators=gens)
    for row, (tokens, scores, label) in enumerate(zip(ROWS, SCORES, LABELS)):
        want = by_hand(model, tokens, scores, label, bins=BINS, alpha=0.5, beta=0.3,
                       minus=minus, measure="probability")
        exact = sum(d for d, _ in want) / len(BINS)
        se = math.sqrt(sum(v for _, v in want) / n_draws) / len(BINS)
        assert abs(out.values[row].item() - exact) <= 4 * se + 1e-12, (row, exact, se)
        assert se > 0  # the draws do vary: the check is not vacuous


def test_draws_depend_on_the_example_not_the_batch(toy):
    """Example 2 alone gives the value it gets in the batch of three."""
    model, inp = toy
    args = {"bins": SIZES, "alpha": 0.5, "beta": 0.1, "samples": 20, "minus": False,
            "eraser": "mask", "measure": "probability"}
    gens = [removal_generator(0, i) for i in inp.batch.example_ids]
    whole = stochastic_removal(inp, torch.tensor(LABELS), **args, generators=gens)
    batch, scores = batch_of(ROWS[2:], SCORES[2:])
    batch = batch.replace(example_ids=("ex-2",))
    perturber = Perturber(model)
    alone = stochastic_removal(MetricInput(batch, scores, torch.tensor(LABELS[2:]),
                                           perturber.probs(batch), perturber),
                               torch.tensor(LABELS[2:]), **args,
                               generators=[removal_generator(0, "ex-2")])
    # the same draws; float32 forwards of a padded and an unpadded row differ by ~1e-9
    assert alone.values.item() == pytest.approx(whole.values[2].item(), abs=1e-6)


def test_rate_caps_the_expected_number_erased():
    """q = min(α, β·n/|R|): on a 20-token row, size 0.5 (|R| = 10), β = 0.1 gives q = 0.2;
    an unlabelled row is undefined; FFid⁻ at k = n erases nothing (0)."""
    from faithbench.testing import Votes

    batch = Batch(torch.tensor([[2] * 20]), torch.ones(1, 20, dtype=torch.bool), ("a",))
    perturber = Perturber(Votes())
    inp = MetricInput(batch, torch.arange(20.0).flip(0).unsqueeze(0), torch.tensor([0]),
                      perturber.probs(batch), perturber)
    out = stochastic_removal(inp, torch.tensor([0]), bins=(0.5,), alpha=0.5, beta=0.1,
                             samples=None, minus=False, eraser="mask", measure="probability")
    # p0 = (1 + v)/(2 + v) with v = 20 - j votes left, j ~ Binomial(10, 0.2)
    want = 21 / 22 - sum(math.comb(10, j) * 0.2 ** j * 0.8 ** (10 - j) * (21 - j) / (22 - j)
                         for j in range(11))
    assert out.values.item() == pytest.approx(want, abs=1e-6)  # Votes forwards in float32
    full = stochastic_removal(inp, torch.tensor([0]), bins=(1.0,), alpha=0.5, beta=0.1,
                              samples=None, minus=True, eraser="mask", measure="accuracy")
    assert full.values.item() == 0.0
    none = stochastic_removal(inp, torch.tensor([-1]), bins=(0.5,), alpha=0.5, beta=0.1,
                              samples=None, minus=False, eraser="mask", measure="accuracy")
    assert math.isnan(none.values.item())


def test_the_retrain_hook_sets_masked_training_and_nothing_else():
    base = TaskOptions(seed=3, epochs=1, train_limit=100)
    retrain = Retrainer(None, base, None)
    assert retrain.options(None).masked_training is False
    options = retrain.options(None, 3, masked_training=True)
    assert options.masked_training is True and options.transform is None
    assert options == TaskOptions(seed=3, epochs=1, train_limit=100, masked_training=True)


def test_end_to_end_one_surrogate_shared_by_every_explainer(tmp_path, monkeypatch,
                                                             one_thread):
    """``faithbench run --tasks synthetic --explainers gradient,random --metrics
    ffidelity_plus,ffidelity_minus --limit 40 --epochs 1``: four records; the surrogate is
    the masked-training model, trained once (the run leaves it in the cache)."""
    from faithbench.benchmark.core.records import read_results
    from faithbench.benchmark.plan import RunConfig
    from faithbench.benchmark.runner import run
    from faithbench.tasks.synthetic import TASK as SYNTHETIC

    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "cache"))
    metric_registry.check_params(FFIDELITY_PLUS)  # every parameter declared
    assert metric_registry.resolve("ffidelity_plus[samples=10]").spec.param("samples") == 10
    config = RunConfig(out=str(tmp_path / "out"), explainers=("gradient", "random"), limit=40,
                       epochs=1, progress=False, metrics=("ffidelity_plus", "ffidelity_minus"))
    summary = run(config)
    assert summary.exit_code == 0, summary.failures
    records = {(r.explainer.split("@")[0].split("[")[0], r.metric.split("[")[0]): r
               for r in read_results(tmp_path / "out" / "results.jsonl")}
    assert set(records) == {(e, m) for e in ("gradient", "random")
                            for m in ("ffidelity_plus", "ffidelity_minus")}
    for r in records.values():
        assert r.estimate.n == 40 and -1.0 <= r.estimate.mean <= 1.0
    surrogate = SYNTHETIC.prepare(TaskOptions(seed=0, epochs=1, masked_training=True),
                                  progress=False)
    clean = SYNTHETIC.prepare(TaskOptions(seed=0, epochs=1), progress=False)
    assert surrogate.loaded_from_cache and surrogate.cache_key != clean.cache_key
    assert surrogate.config["train"]["mask_training"] == 0.5
    # the planted words are what the model reads: erasing gradient's top tokens hurts more
    assert records["gradient", "ffidelity_plus"].estimate.mean > records["random", "ffidelity_plus"].estimate.mean
