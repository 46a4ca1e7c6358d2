"""``faithbench run --fresh`` recomputes the units its command selects, and only those:
every other result, per-example file, explanation and leaderboard entry of the folder
stays as it was, byte for byte. Before: ``--fresh`` deleted the whole folder, so a
fresh run of one explainer and one metric lost every other result in it.

The recomputed unit replaces the old one wherever results are read (``results.jsonl``
holds each key once, the leaderboard entries and a resumed run see the new record),
and its explanation is computed again, not read from the explanation cache.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from faithbench.benchmark.core.records import (
    append_jsonl,
    read_jsonl,
    read_results,
    write_jsonl_atomic,
)
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import run
from faithbench.leaderboard import rank
from faithbench.leaderboard.entry import read_entries

pytestmark = pytest.mark.usefixtures("one_thread")
FAST = {"limit": 24, "batch_size": 8, "progress": False}
EXPLAINERS = ("attention", "gradient")
METRICS = ("comprehensiveness", "sufficiency")



def lines_by_key(out: Path) -> dict[str, str]:
    """Each line of ``results.jsonl`` by its unit key (a key twice is an error)."""
    lines = (out / "results.jsonl").read_text().splitlines()
    keys = [json.loads(line)["key"] for line in lines]
    assert len(keys) == len(set(keys)), "a unit key appears twice in results.jsonl"
    return dict(zip(keys, lines))


def files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def short(explainer_id: str) -> str:
    return explainer_id.split("[")[0].split("@")[0]


def test_fresh_recomputes_only_the_selected_unit(tmp_path, synthetic_ready):
    out = tmp_path / "out"
    full = run(RunConfig(out=str(out), explainers=EXPLAINERS, metrics=METRICS, **FAST))
    assert full.computed == 4 and not full.failures
    before = lines_by_key(out)
    records = {r.key: r for r in read_results(out / "results.jsonl")}
    [selected] = [k for k, r in records.items()
                  if short(r.explainer) == "gradient" and r.metric.startswith("comprehensiveness")]
    per_example = files(out / "per_example")
    explanations = files(out / "explanations")
    [attention_entry] = [e for e in read_entries(out / "leaderboard") if e.name == "attention"]
    attention_files = files(attention_entry.path)

    summary = run(RunConfig(out=str(out), explainers=("gradient",),
                            metrics=("comprehensiveness",), fresh=True, **FAST))
    assert (summary.computed, summary.skipped, summary.failures) == (1, 0, [])
    after = lines_by_key(out)  # each key once
    assert set(after) == set(before) and len(after) == 4
    for key, line in before.items():
        if key != selected:
            assert after[key] == line  # the other three results, byte for byte
    new = {r.key: r for r in read_results(out / "results.jsonl")}[selected]
    assert after[selected] != before[selected]
    assert new.created_at > records[selected].created_at  # recomputed now
    assert new.estimate.mean == pytest.approx(records[selected].estimate.mean, abs=1e-6)
    # every other per-example file and explanation untouched
    now = files(out / "per_example")
    assert set(now) == set(per_example)
    for name, data in per_example.items():
        if name != f"{selected}.jsonl":
            assert now[name] == data
    now_explanations = files(out / "explanations")
    for name, data in explanations.items():
        if "-attention-" in name:
            assert now_explanations[name] == data
    # the leaderboard: attention's entry as it was, gradient's rewritten with both of its
    # metrics (the new record for comprehensiveness), and both ranked
    entries = read_entries(out / "leaderboard")
    assert sorted(e.name for e in entries) == ["attention", "gradient"]
    [attention_now] = [e for e in entries if e.name == "attention"]
    assert files(attention_now.path) == attention_files
    [gradient] = [e for e in entries if e.name == "gradient"]
    assert sorted(r.key for r in gradient.results) == sorted(
        k for k, r in records.items() if short(r.explainer) == "gradient")
    assert next(r for r in gradient.results if r.key == selected).created_at == new.created_at
    for metric in METRICS:
        assert sorted(short(r.explainer) for r in rank(entries, metric=metric)) == [
            "attention", "gradient"]
    # a resumed run finds every unit done, the recomputed one once
    again = run(RunConfig(out=str(out), explainers=EXPLAINERS, metrics=METRICS, **FAST))
    assert (again.computed, again.skipped) == (0, 4)
    assert sorted(r.key for r in again.results) == sorted(before)
    assert [r.created_at for r in again.results if r.key == selected] == [new.created_at]
    assert lines_by_key(out) == after


def test_fresh_explains_again_instead_of_reading_the_cache(tmp_path, synthetic_ready,
                                                          monkeypatch):
    from faithbench.submissions.gradient import GradientExplainer

    calls = []
    explain = GradientExplainer.explain

    def counting(self, model, batch, target, **kwargs):
        calls.append(len(batch))
        return explain(self, model, batch, target, **kwargs)

    monkeypatch.setattr(GradientExplainer, "explain", counting)
    out = tmp_path / "out"

    def config(metrics, fresh=False):
        return RunConfig(out=str(out), explainers=("gradient",), metrics=metrics, fresh=fresh,
                         **FAST)

    assert run(config(("comprehensiveness",))).computed == 1
    assert calls == [8, 8, 8]  # 24 examples in batches of 8
    [cache] = (out / "explanations").glob("*.jsonl")
    kept = read_results(out / "results.jsonl")
    # a new metric on a resumed run takes the cached explanations: no call
    assert run(config(("sufficiency",))).computed == 1
    assert len(calls) == 3
    # --fresh explains again (every batch), though the cache holds the explanations
    summary = run(config(("sufficiency",), fresh=True))
    assert (summary.computed, summary.skipped, summary.failures) == (1, 0, [])
    assert calls == [8] * 6
    assert cache.exists() and cache.with_suffix(".sha256").exists()
    # the unit it did not select is kept as it was
    now = read_results(out / "results.jsonl")
    assert len(now) == len({r.key for r in now}) == 2
    assert [r for r in now if r.metric.startswith("comprehensiveness")] == kept


def test_latest_record_of_a_key_wins(tmp_path, synthetic_ready):
    """An older folder (or a crash between writing a replacement and removing the line
    it replaces) may hold a key twice: readers take the last line, and a run rewrites
    the file with that one."""
    from faithbench.benchmark.core.records import latest_results

    out = tmp_path / "out"
    run(RunConfig(out=str(out), explainers=("gradient",), metrics=("comprehensiveness",),
                  **FAST))
    [line] = (out / "results.jsonl").read_text().splitlines()
    old = json.loads(line)
    newer = {**old, "created_at": old["created_at"] + 1}
    append_jsonl(out / "results.jsonl", newer)
    [record] = latest_results(out / "results.jsonl")
    assert record.created_at == newer["created_at"]
    summary = run(RunConfig(out=str(out), explainers=("gradient",),
                            metrics=("comprehensiveness",), **FAST))
    assert summary.computed == 0 and [r.created_at for r in summary.results] == [
        newer["created_at"]]
    [entry] = read_entries(out / "leaderboard")
    assert [r.created_at for r in entry.results] == [newer["created_at"]]


def test_an_append_waiting_on_a_rewrite_lands_in_the_new_file(tmp_path):
    """A rewrite replaces the file (temp file + rename) holding the lock appends take; an
    append that opened the old file and waited for its lock must not write into the
    replaced (unlinked) file, where its line would be lost."""
    from faithbench.benchmark.core.records import locked_jsonl

    path = tmp_path / "results.jsonl"
    for i in range(3):
        append_jsonl(path, {"i": i})
    appended = threading.Event()

    def append() -> None:
        append_jsonl(path, {"i": 99})
        appended.set()

    with locked_jsonl(path):
        thread = threading.Thread(target=append)
        thread.start()
        assert not appended.wait(0.3)  # it waits for the lock, on the old file
        write_jsonl_atomic(path, [{"i": 0}, {"i": 2}])  # as rewrite_jsonl replaces it
    thread.join(timeout=30)
    assert appended.is_set()
    assert [row["i"] for row in read_jsonl(path)] == [0, 2, 99]


def test_rewrite_keeps_lines_byte_for_byte_and_waits_for_appends(tmp_path):
    from faithbench.benchmark.core.records import locked_jsonl, rewrite_jsonl

    path = tmp_path / "results.jsonl"
    path.write_text('{"i": 0, "x": 1.10}\n{"i":1}\n\n{"x": 0.1000, "i": 2}\n{"i": 3')
    path.chmod(0o640)
    done = threading.Event()

    def rewrite() -> None:
        assert rewrite_jsonl(path, lambda row: row["i"] != 1) == 1
        done.set()

    with locked_jsonl(path):
        thread = threading.Thread(target=rewrite)
        thread.start()
        assert not done.wait(0.3)  # it waits for the lock
    thread.join(timeout=30)
    assert done.is_set()
    # kept as written (not re-serialised); the cut-off last line is dropped
    assert path.read_text() == '{"i": 0, "x": 1.10}\n{"x": 0.1000, "i": 2}\n'
    assert path.stat().st_mode & 0o777 == 0o640
    assert rewrite_jsonl(path, lambda row: True) == 0
    assert rewrite_jsonl(tmp_path / "missing.jsonl", lambda row: False) == 0
