"""The model gate (``faithbench.benchmark.core.gate``): a model that learned nothing is
refused before anything is explained, with both numbers and what to change; with
``--allow-weak-model`` it is scored and marked as weak wherever its entries are shown
(header, board, ``compare``, the site, a release's rerun command); and every entry
shows the budget that made its model. The interval's coverage and the gate's error
rates are measured here by simulation, as the module's docstring states them."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import norm

from faithbench.benchmark.cli import main
from faithbench.benchmark.core.errors import IntegrityError
from faithbench.benchmark.core.gate import (
    ACCURACY_MARGIN,
    PERPLEXITY_MARGIN,
    Budget,
    ModelReport,
    WeakModelError,
    accuracy_check,
    gate,
    perplexity_check,
)
from faithbench.benchmark.core.stats import wilson
from faithbench.leaderboard.entry import read_entries, read_entry

pytestmark = pytest.mark.usefixtures("one_thread")
FAST = ["--batch-size", "16", "--no-progress"]
WEAK = ["--train-limit", "40", "--epochs", "1"]  # the synthetic model at chance


def wilson_low(k: np.ndarray, n: int) -> np.ndarray:
    """``stats.wilson``'s low end, vectorized for the simulations (checked against it)."""
    z = norm.ppf(0.975)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    return centre - z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))


def test_the_wilson_interval_by_hand_and_vectorized():
    # 8 of 10: centre (0.8 + 1.9208/10) / 1.38415 = 0.71672, half 0.22656
    low, high = wilson(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    assert wilson_low(np.array([8]), 10)[0] == pytest.approx(low)
    assert wilson(0, 5)[0] == 0.0 and wilson(5, 5)[1] == 1.0


@pytest.mark.parametrize("n", [30, 100, 872])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.85])
def test_the_accuracy_interval_covers_near_95_percent(n, p):
    """Wilson's coverage oscillates with n and p around its level (Brown, Cai & DasGupta
    2001): within [0.925, 0.98] on this grid, by 20,000 binomial draws each."""
    rng = np.random.default_rng(0)
    k = rng.binomial(n, p, size=20_000)
    z = norm.ppf(0.975)
    centre = (k / n + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(k / n * (1 - k / n) / n + z * z / (4 * n * n))
    coverage = np.mean((centre - half <= p) & (p <= centre + half))
    assert 0.925 <= coverage <= 0.98


@pytest.mark.parametrize("n", [100, 500, 872, 5000])
@pytest.mark.parametrize("majority", [0.34, 0.51, 0.9])
def test_the_gate_passes_a_model_at_the_threshold_about_2_5_percent_of_the_time(n, majority):
    """Error rates by simulation (40,000 validation splits each): a model whose true
    accuracy is exactly majority + margin passes in at most 3.5 % of draws (2.5 % for a
    one-sided end of a 95 % interval, plus the interval's oscillation); one at chance
    in at most 0.5 %; one 0.1 above the threshold, on 500 examples or more, in 99 %."""
    rng = np.random.default_rng(1)
    threshold = majority + ACCURACY_MARGIN
    at = np.mean(wilson_low(rng.binomial(n, threshold, 40_000), n) >= threshold)
    chance = np.mean(wilson_low(rng.binomial(n, majority, 40_000), n) >= threshold)
    assert at <= 0.035 and chance <= 0.005
    if n >= 500:
        good = np.mean(wilson_low(rng.binomial(n, min(threshold + 0.1, 0.999), 40_000), n)
                       >= threshold)
        assert good >= 0.99
    top = round(majority * 100)  # the other classes smaller: majority 0.34 takes three
    others = math.ceil((100 - top) / (top - 1))
    labels = [0] * top + [1 + i % others for i in range(100 - top)]
    assert accuracy_check(labels, 50, "validation").baseline == pytest.approx(majority)
    for k in range(0, 101, 5):  # the check is exactly that rule
        check = accuracy_check(labels, k, "validation")
        assert check.passed == (wilson(k, 100)[0] >= round(majority + ACCURACY_MARGIN, 12))


def test_the_perplexity_gate_errs_for_a_model_at_its_threshold_in_few_draws():
    """150 held-out sets of 1,000 sentences (about 21,000 words) whose true per-word loss
    is exactly the threshold's (unigram perplexity x 0.95): the bootstrap's high end
    falls below it in at most 5 % of them (about 2.5 % expected). A model no better than
    the unigram model (the sd of its mean loss is 0.03 nats here, so it would need to
    land 3.6 sd low) never passes; one at 0.8 of its perplexity always does."""
    rng = np.random.default_rng(2)
    unigram = 400.0

    def draw(mu):
        words = rng.poisson(20, size=1000) + 1
        losses = rng.gamma(2.0, mu / 2.0, size=int(words.sum()))  # per word, mean mu
        nll = np.add.reduceat(losses, np.concatenate([[0], np.cumsum(words)[:-1]]))
        return perplexity_check(nll, words * math.log(unigram), words, "held-out").passed

    at = np.mean([draw(math.log(unigram) - PERPLEXITY_MARGIN) for _ in range(150)])
    assert at <= 0.05  # about 2 Monte Carlo standard errors above 2.5 %
    assert not any(draw(math.log(unigram)) for _ in range(20))
    assert all(draw(math.log(0.8 * unigram)) for _ in range(20))


def test_the_check_by_hand():
    # 100 labels, 51 of class 0: majority 0.51; 70 correct: Wilson [0.604, 0.781]
    c = accuracy_check([0] * 51 + [1] * 49, 70, "validation")
    assert (c.value, c.baseline, c.threshold, c.passed) == (0.7, 0.51, 0.56, True)
    assert (round(c.ci_low, 3), round(c.ci_high, 3)) == (0.604, 0.781)
    refused = accuracy_check([0] * 51 + [1] * 49, 55, "validation")
    assert not refused.passed and refused.short() == "validation 0.55, majority 0.51"
    report = ModelReport(Budget("bilstm", None, 40, 40, 1, 1), refused)
    with pytest.raises(WeakModelError) as err:
        gate(report, "synthetic@1 seed 0")
    message = str(err.value)
    for needle in ("validation accuracy 0.550", "majority class 0.510", "0.560",
                   "--train-limit", "--epochs", "--allow-weak-model"):
        assert needle in message
    assert "\n" not in message
    allowed = gate(report, "x", allow=True)
    assert allowed.check.allowed and allowed.weak


def test_a_model_at_chance_is_refused_before_anything_is_explained(tmp_path, capsys):
    out = tmp_path / "weak"
    assert main(["run", "--out", str(out), "--explainers", "gradient", "--metrics",
                 "comprehensiveness", "--limit", "20", *WEAK, *FAST]) == 2
    err = capsys.readouterr().err
    assert "the model gate refused the model" in err and "majority class 0.510" in err
    assert "BiLSTM on 40 training rows (--train-limit 40), 1 of at most 1 epochs" in err
    assert not (out / "results.jsonl").exists() and not (out / "explanations").exists()


@pytest.fixture(scope="module")
def weak_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("weak") / "run"
    assert main(["run", "--out", str(out), "--explainers", "gradient", "random", "--metrics",
                 "comprehensiveness", "--limit", "20", *WEAK, "--allow-weak-model",
                 *FAST]) == 0
    return out


def test_an_allowed_weak_model_is_marked_in_every_view(weak_run, tmp_path, capsys):
    board = weak_run / "leaderboard"
    entries = read_entries(board)
    for e in entries:  # the header
        [models] = e.header["models"].values()
        assert models["weak"] and "WEAK MODEL (validation 0." in models["label"]
        report = e.results[0].provenance.model
        assert report["check"]["allowed"] and not report["check"]["passed"]
        assert report["budget"] == {"family": "bilstm", "train_rows": 40, "train_limit": 40,
                                    "epochs": 1, "epochs_trained": 1}
    views = {}
    for name, argv in {"board": ["leaderboard", "--entries", str(board)],
                       "wide": ["leaderboard", "--entries", str(board), "--wide"],
                       "compare": ["compare", "gradient", "random", "--entries", str(board)]
                       }.items():
        assert main(argv) == 0
        views[name] = capsys.readouterr().out
    assert main(["site", "--entries", str(board), "--out", str(tmp_path / "site")]) == 0
    views["site"] = "".join(p.read_text() for p in (tmp_path / "site").glob("*.html"))
    assert 'class="weak"' in views["site"]  # the suite page says it first
    for name, text in views.items():
        flat = " ".join(text.split())
        assert "WEAK MODEL (validation 0." in flat and "majority 0.51" in flat, name
        assert "BiLSTM on 40 training rows" in flat, name  # the budget, everywhere


def test_the_models_in_a_header_are_sealed_by_its_results(weak_run, tmp_path):
    import shutil

    entry = read_entries(weak_run / "leaderboard")[0]
    copy = tmp_path / entry.entry_id
    shutil.copytree(entry.path, copy)
    header = json.loads((copy / "header.json").read_text())
    header["models"][next(iter(header["models"]))]["weak"] = False
    (copy / "header.json").write_text(json.dumps(header))
    with pytest.raises(IntegrityError, match="models"):
        read_entry(copy)


def test_a_strong_models_budget_and_check_are_on_the_board(tmp_path, capsys):
    out = tmp_path / "strong"
    assert main(["run", "--out", str(out), "--explainers", "random", "--metrics",
                 "comprehensiveness", "--limit", "20", *FAST]) == 0
    summary = capsys.readouterr().out
    assert "validation accuracy 1.000 [0.992, 1.000] (n 500), majority class 0.510: passes" \
        in summary and "BiLSTM on 3,000 training rows" in summary
    assert main(["leaderboard", "--entries", str(out / "leaderboard")]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "BiLSTM on 3,000 training rows" in flat and "validation 1.00, majority 0.51" in flat
    assert "WEAK" not in flat
