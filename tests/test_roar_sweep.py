"""The ROAR sweep on the synthetic task (label decided by 1-3 planted words): the rows it
writes, recounted one example at a time with the cached models; the curve and RACU
the report prints, recomputed from the rows; recursion; resuming after kill -9; and the
same rows from the process pool as in-process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from faithbench import tasks as task_registry
from faithbench.benchmark.core.api import TaskOptions
from faithbench.benchmark.core.records import read_jsonl
from faithbench.benchmark.core.stats import racu
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.roar import (
    ALL,
    CLEAN,
    LENGTH,
    RANDOM,
    SweepConfig,
    _TaskSweep,
    report,
    sweep,
)
from faithbench.metrics.masking import RandomMask
from faithbench.tasks.classification import ReadyTask

SMALL = SweepConfig(ratios=(0.3, 0.6), recursive=True)
OCC = "occlusion[eraser=delete]@1"


def _config(out, **kw) -> RunConfig:
    return RunConfig(out=str(out), explainers=("attention", "occlusion"), limit=120,
                     seeds=(0, 1), progress=False, train_limit=1000, epochs=3, **kw)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("roar")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FAITHBENCH_CACHE", str(root / "cache"))
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            config = _config(root / "out")
            rows = sweep(config, SMALL)
            yield config, rows, root
        finally:
            torch.set_num_threads(threads)


def _row(rows, kind, mask, ratio, seed):
    [r] = [r for r in rows if (r.kind, r.mask, r.ratio, r.seed) == (kind, mask, ratio, seed)]
    return r


def test_the_sweep_writes_one_row_per_point(swept):
    _, rows, _ = swept
    # per seed: the original, all masked, 2 random and 2 x 2 explainer points
    assert sum(r.kind == "roar" for r in rows) == 2 * 8
    assert sum(r.kind == "recursive" for r in rows) == 2 * 2 * 2
    # every seed (up to 3 by default): the length-only model and one pattern model per
    # roar mask and ratio
    leak = [r for r in rows if r.kind == "leakage"]
    assert len(leak) == 2 * (1 + 6) and {r.seed for r in leak} == {0, 1}
    assert len({r.key for r in rows}) == len(rows)
    assert all(r.n == 120 and len(r.correct) == 120 for r in rows)
    assert _row(rows, "roar", CLEAN, 0.0, 0).accuracy > 0.95  # the original model
    # occlusion's top 30 % removes the planted words; random 30 % leaves most of them
    assert (_row(rows, "roar", RANDOM, 0.3, 0).accuracy
            - _row(rows, "roar", OCC, 0.3, 0).accuracy) > 0.1


def _masked(config, seed, transform):
    prepared = task_registry.get_task("synthetic").prepare(
        TaskOptions(seed=seed, transform=transform, train_limit=config.train_limit,
                    epochs=config.epochs), progress=False)
    assert prepared.loaded_from_cache  # the sweep trained exactly this model
    return prepared, prepared.examples("test", config.limit)


def _predict_one_at_a_time(prepared, examples):
    prepared.model.eval()
    out = []
    with torch.no_grad():
        for e in examples:
            batch, _, _ = next(iter(prepared.batches([e], 1)))
            out.append(torch.softmax(prepared.model.logits(batch), -1)[0])
    return torch.stack(out)


def test_a_random_point_recounted_with_the_cached_models(swept):
    config, rows, root = swept
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FAITHBENCH_CACHE", str(root / "cache"))
        row = _row(rows, "roar", RANDOM, 0.6, 1)
        retrained, masked = _masked(config, 1, RandomMask(0.6, seed=1))
        original = task_registry.get_task("synthetic").prepare(
            TaskOptions(seed=1, train_limit=config.train_limit, epochs=config.epochs), progress=False)
    labels = torch.tensor([e.label for e in masked])
    assert sum(t == "<unk>" for e in masked for t in e.tokens) == sum(
        6 * len(e.tokens) // 10 for e in masked)
    right = _predict_one_at_a_time(retrained, masked).argmax(-1) == labels
    assert row.correct == right.int().tolist()
    assert row.checkpoint == retrained.checkpoint
    # the original model on the same masked inputs: accuracy and drop of p(its prediction)
    fixed = _predict_one_at_a_time(original, masked)
    clean = _predict_one_at_a_time(original, original.examples("test", config.limit))
    target = clean.argmax(-1)
    assert row.fixed_accuracy == pytest.approx(float((fixed.argmax(-1) == labels).double().mean()))
    drop = clean[torch.arange(120), target] - fixed[torch.arange(120), target]
    assert row.fixed_drop == pytest.approx(float(drop.double().mean()), abs=1e-6)
    assert 0.5 <= row.auroc_original <= 1 and 0 <= row.auroc_retrained <= 1


def test_the_report_gives_the_curve_and_racu_of_the_rows(swept):
    _, rows, _ = swept
    text = report(rows)

    def mean(mask, ratio, kind="roar"):
        return np.mean([_row(rows, kind, mask, ratio, s).accuracy for s in (0, 1)])

    def curve(mask, seed, kind="roar"):
        acc = [_row(rows, "roar", CLEAN, 0.0, seed).accuracy]
        acc += [_row(rows, kind, mask, k, seed).accuracy for k in (0.3, 0.6)]
        return acc + [_row(rows, "roar", ALL, 1.0, seed).accuracy]

    x = [0.0, 0.3, 0.6, 1.0]
    for kind, title in (("roar", "ROAR:"), ("recursive", "Recursive ROAR:")):
        # RACU: each seed's occlusion curve against that seed's random curve, then the mean
        area = np.mean([racu(x, curve(RANDOM, s), curve(OCC, s, kind)) for s in (0, 1)])
        section = text.split(title)[1]
        [line] = [ln for ln in section.splitlines() if ln.startswith(f"| {OCC}")][:1]
        assert f"{mean(OCC, 0.3, kind):.3f} [" in line and f"| {area:.3f} [" in line
    # recursion's first step is plain ROAR: the same model
    for seed in (0, 1):
        assert (_row(rows, "recursive", OCC, 0.3, seed).checkpoint
                == _row(rows, "roar", OCC, 0.3, seed).checkpoint)
        assert (_row(rows, "recursive", OCC, 0.6, seed).checkpoint
                != _row(rows, "roar", OCC, 0.6, seed).checkpoint)
    assert "length-only model" in text and "Mahalanobis AUROC" in text
    # the leakage cell: accuracy over both seeds and its difference from the length model
    leak = {(r.mask, r.ratio, r.seed): r for r in rows if r.kind == "leakage"}
    acc = np.mean([leak[(OCC, 0.3, s)].accuracy for s in (0, 1)])
    d_length = acc - np.mean([leak[(LENGTH, 0.0, s)].accuracy for s in (0, 1)])
    assert f"{acc:.3f} ({d_length:+.3f}, " in text.split("Leakage:")[1]


def test_a_finished_sweep_reruns_as_a_report_without_training(swept, monkeypatch):
    config, rows, root = swept
    monkeypatch.setenv("FAITHBENCH_CACHE", str(root / "cache"))

    def refuse(job):
        raise AssertionError(f"a finished sweep ran {job!r}")

    monkeypatch.setattr("faithbench.benchmark.core.retrain.train_job", refuse)
    monkeypatch.setattr("faithbench.benchmark.roar.explain_job", refuse)
    again = sweep(config, SMALL)
    assert [r.key for r in again] == [r.key for r in rows]
    assert len(read_jsonl(Path(config.out) / "roar" / "rows.jsonl")) == len(rows)


def test_the_process_pool_writes_the_same_rows(swept, tmp_path, monkeypatch):
    _, rows, _ = swept
    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "cache"))
    pooled = sweep(_config(tmp_path / "out", executor="pool", workers=2),
                   SweepConfig(ratios=SMALL.ratios, leakage=False))
    mine = {r.key: r for r in rows}
    assert pooled and all(r.key in mine for r in pooled)
    for r in pooled:
        assert (r.checkpoint, r.correct) == (mine[r.key].checkpoint, mine[r.key].correct)
        if r.mask != CLEAN:
            assert r.train_s is not None  # trained here, by the pool's workers


def test_each_model_forwards_a_rows_masked_inputs_once(swept, tmp_path, monkeypatch):
    """Recording a point (accuracy, erasure without retraining, the two AUROCs) passes
    each example through each model once: the masked inputs' probabilities and hidden
    states come from the same forward pass."""
    config, _, root = swept
    monkeypatch.setenv("FAITHBENCH_CACHE", str(root / "cache"))  # the swept models
    out = tmp_path / "out"
    shutil.copytree(config.out, out)  # its explanations, without its rows
    (out / "roar" / "rows.jsonl").unlink()
    seen: list[Counter] = []
    batches = ReadyTask.batches

    def counted(prepared, examples, batch_size):  # (model, example) pairs forwarded
        if seen:
            seen[-1].update((id(prepared), id(e)) for e in examples)
        return batches(prepared, examples, batch_size)

    record = _TaskSweep.record

    def recording(self, *args, **kwargs):
        seen.append(Counter())
        try:
            return record(self, *args, **kwargs)
        finally:
            assert seen[-1] and max(seen[-1].values()) == 1, seen[-1].most_common(1)

    monkeypatch.setattr(ReadyTask, "batches", counted)
    monkeypatch.setattr(_TaskSweep, "record", recording)
    rows = sweep(replace(config, out=str(out)), SweepConfig(ratios=SMALL.ratios, leakage=False))
    assert len(seen) == len(rows) == 2 * 8  # every roar row recorded again, from the cache


def test_kill_9_mid_sweep_loses_only_the_jobs_in_flight(tmp_path):
    env = {**os.environ, "FAITHBENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "out"
    rows_file = out / "roar" / "rows.jsonl"
    cmd = [sys.executable, "-m", "faithbench.benchmark.cli", "--threads", "1", "roar", "--limit", "60",
           "--explainers", "attention", "--ratios", "0.2", "0.4", "0.6", "0.8", "--no-leakage",
           "--train-limit", "600", "--epochs", "2", "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and len(read_jsonl(rows_file)) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = read_jsonl(rows_file)
    assert 3 <= len(before) < 1 + 1 + 4 + 4, "the sweep finished before the kill"
    models = tmp_path / "cache" / "models"
    cached = {p.name for p in models.glob("*.pt")}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    after = read_jsonl(rows_file)
    assert after[: len(before)] == before  # nothing lost or rewritten
    assert len(after) == 1 + 1 + 4 + 4 == len({r["key"] for r in after})
    assert "RACU" in done.stdout
    # every model finished before the kill is reused: the rerun trains the missing rows'
    # models less the one (in-process: one job at a time) that was done but not recorded
    trained = {p.name for p in models.glob("*.pt")} - cached
    missing = len(after) - len(before)
    assert missing - 1 <= len(trained) <= missing
    assert sum(r["train_s"] is not None for r in after[len(before):]) == len(trained)


def test_bad_ratios_and_tasks_are_refused(tmp_path):
    from faithbench.benchmark.cli import main

    assert main(["roar", "--ratios", "0.5", "0.3", "--out", str(tmp_path)]) == 2
    assert main(["roar", "--ratios", "1.0", "--out", str(tmp_path)]) == 2
    assert main(["roar", "--tasks", "alignment", "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "roar").exists()  # refused before anything ran


def test_the_length_only_control_sees_no_word_and_no_mask(swept):
    _, rows, _ = swept
    lengths = [r for r in rows if r.mask == LENGTH]
    assert [r.seed for r in lengths] == [0, 1]
    for length in lengths:
        assert length.kind == "leakage" and length.ratio == 0.0
        # every token is the one constant word, so only the length can inform it: on the
        # synthetic task (length independent of the label) it stays near chance
        assert abs(length.accuracy - 0.5) < 0.15


def test_the_default_explainer_set_leaves_out_what_the_model_cannot_serve(tmp_path,
                                                                        monkeypatch, caplog):
    """As ``run`` does: attention_rollout needs every layer's attention, which a BiLSTM
    does not have; named in the default set, it failed the whole sweep."""
    import logging

    from faithbench import submissions
    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(submissions, "ROAR_DEFAULT", ("attention", "attention_rollout"))
    config = RunConfig(out=str(tmp_path / "out"), limit=40, seeds=(0,), progress=False,
                       train_limit=300, epochs=1, allow_weak_model=True)
    with caplog.at_level(logging.INFO):
        rows = sweep(config, SweepConfig(ratios=(0.5,), leakage=False))
    masks = {r.mask for r in rows}
    assert masks == {CLEAN, ALL, RANDOM, "attention@1"}
    assert "attention_rollout needs layer_attention, which this model does not offer" in caplog.text


def test_the_default_roar_set_is_the_published_six():
    from faithbench import submissions
    assert submissions.ROAR_DEFAULT == ("attention", "gradient", "gradient_x_input",
                                        "integrated_gradients", "occlusion", "random")
    assert set(submissions.ROAR_DEFAULT) <= set(submissions.REFERENCE)
