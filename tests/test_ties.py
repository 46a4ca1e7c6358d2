"""Issue 44, attack 5: an explainer that gives every token the same score carries no
information, so it must score as the random explainer does. With ties ordered by
position (the metric versions before the seeded tie order) it beat random:
comprehensiveness 0.087 against 0.033 on the first 40 synthetic test examples.

Equal scores are now ordered by keys drawn per example (``ranking.tie_keys``), so a
constant explainer *is* a random explainer: the one whose scores are those keys,
reversed. The first test checks that identity exactly, for every ranking metric; the
next checks the constant explainer's interval on the whole synthetic test split holds
the random explainer's mean (over eight draws, so one draw's luck does not decide); the
next compares the constant explainer with the random explainer on the whole
synthetic test split, paired over examples, the verdict held to a 5 % family-wise
error rate (sign-flip test, Holm over the metrics; that rate is simulated below);
the third puts the evidence first, where position ties did the most harm, and checks
the constant explainer against the random explainer's exact expectation."""

import numpy as np
import pytest
import torch

from faithbench.benchmark.core.api import Batch, MetricInput
from faithbench.benchmark.core.perturb import Perturber
from faithbench.benchmark.core.ranking import tie_keys
from faithbench.benchmark.core.stats import bootstrap, holm, sign_flip_test
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import resolve_explainer
from faithbench.benchmark.session import confinement, open_session
from faithbench.metrics import get_metric
from faithbench.metrics.ffidelity import removal_generator, stochastic_removal
from faithbench.testing import Votes

# every metric that ranks tokens by score (auprc pools ties into one threshold and
# taucorr_loo is Kendall's tau-b: neither orders equal scores); F-Fidelity, which ranks
# with the same ``ranked_mask`` after fine-tuning a model, has its own test at the end
RANKING = ("aopc_morf", "aopc_lerf", "comprehensiveness", "sufficiency", "flip_rate",
           "flip_fraction", "naopc_comprehensiveness", "naopc_sufficiency", "r_precision",
           "average_precision", "token_f1", "token_f1_micro", "mean_rank")


@pytest.fixture(scope="module")
def session(synthetic_ready, one_thread):
    return open_session("synthetic", RunConfig(progress=False))


@pytest.fixture(scope="module")
def explanations(session):
    """{name: per-example scores} of the test split: random, constant (all ties), the
    tie keys reversed (the constant explainer's order made explicit), left to right."""
    config = RunConfig(progress=False)
    random = session.explain(resolve_explainer("random", confinement(config))).scores
    lengths = [len(s) for s in random]
    ids = [e.id for e in session.examples]
    keys = [tie_keys([i], n)[0].tolist() for i, n in zip(ids, lengths)]
    return {"random": [list(map(float, s)) for s in random],
            "constant": [[1.0] * n for n in lengths],
            "keys_reversed": [[1.0 - k for k in row] for row in keys],
            "left_to_right": [[float(n - i) for i in range(n)] for n in lengths]}


@pytest.fixture(scope="module")
def scored(session, explanations):
    """{(explainer, metric): Scored} for every ranking metric."""
    return {(name, metric): session.score(get_metric(metric), scores)
            for name, scores in explanations.items() for metric in RANKING}


@pytest.mark.parametrize("metric", RANKING)
def test_a_constant_explainer_is_the_random_explainer_of_the_tie_keys(scored, metric):
    constant, keyed = scored["constant", metric], scored["keys_reversed", metric]
    assert len(constant.values) == 500
    np.testing.assert_array_equal(constant.values, keyed.values)
    if constant.stats is not None:
        np.testing.assert_array_equal(constant.stats, keyed.stats)


def paired_verdicts(scored, a: str, b: str) -> dict[str, float]:
    """{metric: Holm-adjusted p of mean(a - b) = 0}, paired over the examples both define."""
    p = {}
    for metric in RANKING:
        x, y = scored[a, metric].values, scored[b, metric].values
        both = np.isfinite(x) & np.isfinite(y)
        p[metric] = sign_flip_test(x[both], y[both]).p_value
    return dict(zip(p, holm(list(p.values()))))


def test_a_constant_explainer_scores_as_random(session, scored):
    adjusted = paired_verdicts(scored, "constant", "random")
    assert min(adjusted.values()) >= 0.05, adjusted


RANDOM_DRAWS = 8


@pytest.fixture(scope="module")
def random_expectation(session, explanations):
    """{metric: the random explainer's expected score on the split}: the mean over
    ``RANDOM_DRAWS`` draws of uniform scores per token (what ``random`` returns), so
    the check below does not hang on one draw's luck (its standard error is about a
    tenth of the constant explainer's interval width)."""
    lengths = [len(s) for s in explanations["constant"]]
    out = {}
    for name in RANKING:
        metric = get_metric(name)
        means = []
        for draw in range(RANDOM_DRAWS):
            rng = np.random.default_rng(4400 + draw)
            scores = [rng.random(n).tolist() for n in lengths]
            means.append(session.estimate(metric, session.score(metric, scores)).mean)
        out[name] = float(np.mean(means))
    return out


@pytest.mark.parametrize("name", RANKING)
def test_a_constant_explainers_interval_holds_randoms_mean(session, scored,
                                                          random_expectation, name):
    """The issue's check, metric by metric: the constant explainer's 95 % interval on the
    whole synthetic test split holds the random explainer's mean score."""
    constant = session.estimate(get_metric(name), scored["constant", name])
    assert constant.ci_low <= random_expectation[name] <= constant.ci_high, (
        name, constant, random_expectation[name])


def votes_input(scores_of, n_rows: int = 400, n: int = 10):
    """Rows of n tokens with the only evidence first (token 2 votes class 0, the rest
    vote for nothing), scored by ``scores_of(example_id)``, on the voting model."""
    ids = [f"row-{i}" for i in range(n_rows)]
    batch = Batch(torch.tensor([[2] + [4] * (n - 1)] * n_rows),
                  torch.ones(n_rows, n, dtype=torch.bool), tuple(ids))
    perturber = Perturber(Votes())
    scores = torch.stack([torch.as_tensor(scores_of(i), dtype=torch.float32) for i in ids])
    return MetricInput(batch, scores, torch.zeros(n_rows, dtype=torch.long),
                       perturber.probs(batch), perturber)


# The random explainer's exact expectation on ``votes_input``: p0 = 2/3 with the evidence,
# 1/2 without (a drop of 1/6), and a random order puts the evidence among the first k of
# 10 with probability k/10. aopc_morf: (1/6) · mean over k = 1..10 of k/10 = 11/120;
# comprehensiveness (k = 1, 1, 1, 2, 5 for its bins): (1/6) · 0.2; sufficiency keeps the
# top k: (1/6) · (1 − 0.2). Ties by position put the evidence first: 1/6, 1/6 and 0.
RANDOM_EXPECTED = {"aopc_morf": 11 / 120, "comprehensiveness": 0.2 / 6, "sufficiency": 0.8 / 6}
BY_POSITION = {"aopc_morf": 1 / 6, "comprehensiveness": 1 / 6, "sufficiency": 0.0}


@pytest.mark.parametrize("name", sorted(RANDOM_EXPECTED))
def test_a_constant_explainer_is_random_where_the_evidence_sits_first(name):
    """Where position ties bite hardest (the evidence always first) the constant
    explainer's 95 % interval holds the random explainer's exact expectation, and the
    left-to-right order (what position ties gave it before) lands on the hand-worked
    value far outside it: the check can fail, and did before."""
    metric = get_metric(name)
    constant = bootstrap(metric.compute(votes_input(lambda i: [1.0] * 10)).values.numpy())
    assert constant.ci_low <= RANDOM_EXPECTED[name] <= constant.ci_high, (name, constant)
    ordered = metric.compute(votes_input(lambda i: [10.0 - j for j in range(10)])).values
    assert ordered.mean().item() == pytest.approx(BY_POSITION[name], abs=1e-6)
    assert not constant.ci_low <= BY_POSITION[name] <= constant.ci_high


def test_the_verdict_errs_in_at_most_5_percent_of_null_families():
    """The paired sign-flip test with Holm over 13 metrics, on two explainers that differ
    only by chance (per-example values: a shared difficulty plus each explainer's own
    noise, skewed and bounded like erasure scores): the share of families with any
    adjusted p < 0.05 stays at or under 5 % (400 families; 2.2 points of binomial slack)."""
    rng = np.random.default_rng(44)
    wrong = 0
    for _ in range(400):
        ps = []
        for m in range(len(RANKING)):
            difficulty = rng.beta(2, 5, size=500)
            a = np.clip(difficulty + rng.normal(0, 0.1, 500), 0, 1)
            b = np.clip(difficulty + rng.normal(0, 0.1, 500), 0, 1)
            ps.append(sign_flip_test(a, b, n_resamples=499, seed=m).p_value)
        wrong += min(holm(ps)) < 0.05
    assert wrong / 400 <= 0.072, wrong


@pytest.mark.parametrize("minus", [False, True], ids=["ffidelity_plus", "ffidelity_minus"])
def test_f_fidelity_ranks_a_constant_explainer_as_its_tie_keys(minus):
    """F-Fidelity fine-tunes before it ranks, so it runs only inside ``faithbench run``;
    its ranking step (``stochastic_removal``) is checked here on the voting model."""
    keys = {i: tie_keys([i], 10)[0] for i in (f"row-{r}" for r in range(50))}
    out = []
    for scores_of in (lambda i: [1.0] * 10, lambda i: (1.0 - keys[i]).tolist()):
        inp = votes_input(scores_of, n_rows=50)
        generators = [removal_generator(0, i) for i in inp.batch.example_ids]
        out.append(stochastic_removal(inp, inp.target, bins=(0.1, 0.3, 0.5), alpha=0.5,
                                      beta=0.1, samples=20, minus=minus, eraser="mask",
                                      measure="accuracy", generators=generators).curve)
    torch.testing.assert_close(out[0], out[1], rtol=0, atol=0, equal_nan=True)
