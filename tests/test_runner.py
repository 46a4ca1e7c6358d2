"""End to end on the synthetic task: results, resume after kill -9, broken plugins,
malformed data, and the file verbs (explain -> score, predict)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from faithbench.benchmark.cli import main
from faithbench.benchmark.core.records import read_jsonl, read_results
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import run

REPO = Path(__file__).resolve().parent.parent
PLUGINS = Path(__file__).parent / "plugins"
FAST = {"limit": 24, "batch_size": 8, "progress": False}


def percentile_ci(values, n_resamples=2000, seed=0, alpha=0.05):
    """The documented bootstrap, written out: resample n of n with numpy's generator
    seeded 0, 2000 times, and take the 2.5% and 97.5% quantiles of the means."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(v), size=(n_resamples, len(v)))
    return tuple(np.quantile(v[draws].mean(axis=1), [alpha / 2, 1 - alpha / 2]))


def served_by(model) -> set[str]:
    """The reference explainers whose required capabilities ``model`` offers: a run's
    default set (``runner.serviceable``)."""
    from faithbench import submissions
    from faithbench.benchmark.core.api import capabilities
    return {n for n in submissions.REFERENCE
            if submissions.get_explainer(n).spec.requires <= capabilities(model)}


def test_run_synthetic_all_units(tmp_path, synthetic_ready):
    summary = run(RunConfig(out=str(tmp_path), **FAST))
    assert summary.exit_code == 0 and not summary.failures
    records = read_results(tmp_path / "results.jsonl")
    explainers = {r.explainer.split("[")[0].split("@")[0] for r in records}
    # every reference explainer the BiLSTM serves (counted from the registry, which grows)
    assert explainers == served_by(synthetic_ready.model)
    assert not explainers & {"attention_rollout", "value_zeroing"}  # a Transformer's
    metrics = {r.metric.split("[")[0].split("@")[0] for r in records}
    assert metrics == {"aopc_morf", "aopc_lerf", "comprehensiveness", "sufficiency", "flip_rate",
                       "flip_fraction", "taucorr_loo", "r_precision", "average_precision",
                       "token_f1", "auprc", "token_f1_micro"}
    # attention_rollout needs per-layer attention: the default set leaves it out here
    assert len(records) == len({r.key for r in records}) == len(explainers) * len(metrics)
    for r in records:
        if r.aggregation is not None:  # corpus level: checked in test_corpus
            continue
        per = read_jsonl(tmp_path / r.per_example_file)
        assert r.estimate.n == len(per) == 24
        mean = sum(p["value"] for p in per) / len(per)
        assert r.estimate.mean == pytest.approx(mean)
        assert (r.estimate.ci_low, r.estimate.ci_high) == pytest.approx(
            percentile_ci([p["value"] for p in per]), abs=1e-12)
        assert r.provenance.model_accuracy["validation"] == synthetic_ready.accuracy["validation"]
        assert r.provenance.checkpoint == synthetic_ready.checkpoint
    # a model that learned the task relies on the planted words: occlusion finds them
    f1 = {r.explainer.split("@")[0].split("[")[0]: r.estimate.mean
          for r in records if r.metric.startswith("r_precision")}
    assert f1["occlusion"] > 0.75 and f1["integrated_gradients"] > 0.75 and f1["random"] < 0.35
    assert len(summary.entries) == len(explainers)
    # a second run computes nothing and returns the same results
    again = run(RunConfig(out=str(tmp_path), **FAST))
    assert again.computed == 0 and again.skipped == len(records)
    assert len(read_results(tmp_path / "results.jsonl")) == len(records)


def test_broken_plugin_is_recorded_and_skipped(tmp_path, synthetic_ready):
    config = RunConfig(out=str(tmp_path), explainers=("gradient", str(PLUGINS / "returns_nan.py")),
                       metrics=("comprehensiveness",), **FAST)
    summary = run(config)
    assert summary.exit_code == 1
    [failure] = summary.failures
    assert "nan" in failure.explainer and failure.stage == "explain" and failure.example_ids
    records = read_results(tmp_path / "results.jsonl")
    assert [r.explainer.split("[")[0] for r in records] == ["gradient"]
    assert read_jsonl(tmp_path / "failures.jsonl")[0]["record_type"] == "failure"
    # nothing of the failed plugin enters the leaderboard
    headers = [json.loads((e.path / "header.json").read_text()) for e in summary.entries]
    assert [h["explainer"].split("[")[0] for h in headers] == ["gradient"]


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "faithbench.benchmark.cli", *args], cwd=REPO,
                          env=env, check=False,
                          capture_output=True, text=True, timeout=600)


def test_resume_after_kill_9(tmp_path, synthetic_ready):
    out = tmp_path / "run"
    args = ["run", "--out", str(out), "--limit", "40", "--batch-size", "8", "--no-progress",
            "--explainers", "occlusion", "integrated_gradients", "gradient"]
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, "-m", "faithbench.benchmark.cli", *args], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = out / "results.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if results.exists() and len(read_jsonl(results)) >= 3:
            break
        time.sleep(0.05)
    killed = proc.poll() is None
    if killed:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    partial = read_jsonl(results)
    assert killed and 3 <= len(partial) < 36, "the run must be killed part way"
    done = _cli(*args, env=env)
    assert done.returncode == 0, done.stderr
    records = read_results(results)
    assert len(records) == 36 and len({r.key for r in records}) == 36
    # finished units were kept, not recomputed
    assert [r["key"] for r in partial] == [r.key for r in records[: len(partial)]]
    # the resumed results equal a clean run's
    fresh = run(RunConfig(out=str(tmp_path / "fresh"), limit=40, batch_size=8, progress=False,
                          explainers=("occlusion", "integrated_gradients", "gradient")))
    by_key = {r.key: r.estimate.mean for r in fresh.results}
    # equal to float32 rounding: the resumed engine's memory starts empty, so its
    # variants share forward passes with other rows than the clean run's did
    for r in records:
        assert r.estimate.mean == pytest.approx(by_key[r.key], abs=1e-6)


def test_explain_then_score_and_predict(tmp_path, synthetic_ready, capsys):
    exp = tmp_path / "grad.jsonl"
    assert main(["explain", "--task", "synthetic", "--explainer", "occlusion", "--limit", "10",
                 "--out", str(exp), "--no-progress"]) == 0
    rows = read_jsonl(exp)
    assert len(rows) == 10 and all(len(r["scores"]) == len(r["tokens"]) for r in rows)
    per = tmp_path / "per.jsonl"
    assert main(["score", "--task", "synthetic", "--explanations", str(exp), "--metrics",
                 "comprehensiveness", "flip_rate", "--per-example", str(per), "--no-progress"]) == 0
    values = read_jsonl(per)
    assert len(values) == 20 and {v["metric"].split("[")[0] for v in values} == {
        "comprehensiveness", "flip_rate"}
    # comprehensiveness by hand for the first example, from the model's own predictions
    first = rows[0]
    k_order = sorted(range(len(first["scores"])), key=lambda i: (-first["scores"][i], i))
    n = len(first["tokens"])
    model, vocab = synthetic_ready.model, synthetic_ready.vocab

    def prob(tokens):
        ids = torch.tensor([vocab.encode(tokens) or [0]])
        from faithbench.benchmark.core.api import Batch
        b = Batch(ids=ids, mask=torch.ones_like(ids, dtype=torch.bool) if tokens else
                  torch.zeros_like(ids, dtype=torch.bool), example_ids=("x",))
        with torch.no_grad():
            return torch.softmax(model.logits(b), -1)[0, first["target"]].item()

    import math
    full = prob(first["tokens"])
    comps = []
    for b in (0.01, 0.05, 0.1, 0.2, 0.5):
        k = min(max(math.ceil(b * n - 1e-9), 1), n)
        drop = set(k_order[:k])
        comps.append(full - prob([t for i, t in enumerate(first["tokens"]) if i not in drop]))
    comp = next(v for v in values if v["metric"].startswith("comprehensiveness"))
    assert comp["id"] == first["id"]
    assert comp["value"] == pytest.approx(sum(comps) / len(comps), abs=1e-5)

    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "p", "tokens": ["w01", "superb", "w02"]}) + "\n"
                   + json.dumps({"id": "n", "tokens": ["w01", "awful", "w02"]}) + "\n")
    capsys.readouterr()
    assert main(["predict", "--task", "synthetic", "--input", str(inp), "--no-progress"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["label"] for x in lines] == ["positive", "negative"]
    assert all(abs(sum(x["probs"]) - 1) < 1e-5 for x in lines)


@pytest.mark.parametrize("content, needle", [
    (('{"id": "a", "tokens": ["x"], "scores": [1.0]}\n{"id": "b", "tokens": ["x", "y"], '
     '"scores": [1.0]}\n'), "line 2: field 'scores'"),
    ('{"id": "a", "tokens": ["x"]}\n', "line 1: field 'scores'"),
    ('{"id": "a", "tokens": ["x"], "scores": [1.0]}\nnot json\n', "line 2"),
])
def test_malformed_explanations_exit_2(tmp_path, synthetic_ready, capsys, content, needle):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    assert main(["score", "--task", "synthetic", "--explanations", str(bad), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and needle in err


@pytest.mark.parametrize("line, needle", [
    ('{"idx": 0, "label": 1}', "line 2: field 'sentence': missing column"),
    ('{"idx": 0, "sentence": "a b", "label": 7}', "line 2: field 'label': unknown label 7"),
    ('{"idx": 0, "sentence": "a b", "label": 1', "line 2: not valid JSON"),
])
def test_malformed_data_file_exit_2(tmp_path, capsys, line, needle):
    good = '{"idx": 0, "sentence": "a fine film", "label": 1}'
    for folder in ("sst2", "sst2_phrases"):
        (tmp_path / folder).mkdir()
        for split in ("train", "validation", "test"):
            (tmp_path / folder / f"{split}.jsonl").write_text(good + "\n" + good + "\n")
    (tmp_path / "sst2" / "validation.jsonl").write_text(good + "\n" + line + "\n")
    code = main(["run", "--tasks", "sentiment", "--data-dir", str(tmp_path), "--out",
                 str(tmp_path / "out"), "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "sst2" / "validation.jsonl") in err and needle in err


def test_unknown_names_suggest(capsys):
    assert main(["run", "--tasks", "sentimnet", "--no-progress"]) == 2
    assert "did you mean 'sentiment'" in capsys.readouterr().err


def test_hanging_plugin_is_stopped_at_its_budget(tmp_path, synthetic_ready):
    start = time.perf_counter()
    summary = run(RunConfig(out=str(tmp_path), explainers=(str(PLUGINS / "hangs.py"), "attention"),
                            metrics=("flip_rate",), time_budget_s=0.05, **FAST))
    assert time.perf_counter() - start < 60
    [failure] = summary.failures
    assert failure.explainer == "broken_hangs@1" and "time budget" in failure.message
    assert failure.example_ids == [f"test-{i}" for i in range(8)]
    assert [r.explainer for r in summary.results] == ["attention@1"]


def test_a_run_that_adds_metrics_extends_the_entry(tmp_path, synthetic_ready):
    from faithbench.leaderboard.entry import read_entries

    base = dict(out=str(tmp_path), explainers=("attention",), **FAST)
    run(RunConfig(metrics=("flip_rate",), **base))
    run(RunConfig(metrics=("comprehensiveness[segment=None;eraser=mask]",), **base))
    [entry] = read_entries(tmp_path / "leaderboard")
    assert sorted(r.metric.split("[")[0] for r in entry.results) == [
        "comprehensiveness", "flip_rate"]
    assert any("eraser=mask" in r.metric for r in entry.results)
