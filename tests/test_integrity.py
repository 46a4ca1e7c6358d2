"""Nothing is read back unverified: a cached model whose weights or accuracy changed,
an explanation cache whose scores changed, an entry whose rows or estimates changed
are each an IntegrityError naming the file; rankings recompute every interval from
the rows; and no name can change a table's shape in any format. Before: all of these
were used as found (a negated gradient cache moved its comprehensiveness from 0.2306
to 0.0023; a forged entry ranked first)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
import torch

import faithbench.benchmark.explanations as explanations_module
from faithbench.benchmark.cli import main
from faithbench.benchmark.core.errors import IntegrityError
from faithbench.benchmark.core.files import content_hash, file_hash
from faithbench.benchmark.core.records import read_jsonl, write_jsonl_atomic
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import resolve_explainer, run
from faithbench.benchmark.session import Explained, open_session
from faithbench.leaderboard.entry import read_entries, seal_of
from faithbench.leaderboard.rank import rank
from faithbench.leaderboard.render import render_comparison, render_leaderboard
from faithbench.leaderboard.rows import Compared, Ranked

pytestmark = pytest.mark.usefixtures("one_thread")
FAST = {"limit": 24, "batch_size": 8, "progress": False}


# ---------------------------------------------------------------- the model cache

@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A model cache of this test's own (the shared one must stay intact)."""
    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "cache"))
    from faithbench.tasks.classification import TaskOptions
    from faithbench.tasks.synthetic import TASK

    ready = TASK.prepare(TaskOptions(), progress=False)
    return TASK, TaskOptions, ready


def _rewrite(path: Path, change) -> None:
    blob = torch.load(path, weights_only=True)
    change(blob)
    torch.save(blob, path)


@pytest.mark.parametrize("what", ["weights", "accuracy", "plausible accuracy"])
def test_a_cached_model_changed_on_disk_is_refused(own_cache, what):
    """A plausible accuracy (a fraction, only not the measured one) is refused too:
    it is sealed with the weights hash."""
    task, options, ready = own_cache
    path = Path(ready.checkpoint_file)
    if what == "weights":
        _rewrite(path, lambda b: b["state_dict"]["out.bias"].add_(0.01))
    elif what == "accuracy":
        _rewrite(path, lambda b: b["accuracy"].update(test=1.7))
    else:
        _rewrite(path, lambda b: b["accuracy"].update(test=0.987654321))
    with pytest.raises(IntegrityError) as info:
        task.prepare(options(), progress=False)
    assert str(path) in str(info.value) and f"delete {path}" in str(info.value)


def test_an_untouched_cached_model_loads_with_its_hash(own_cache):
    task, options, ready = own_cache
    again = task.prepare(options(), progress=False)
    assert again.loaded_from_cache and again.checkpoint == ready.checkpoint


def test_a_cached_model_from_before_hashes_gets_them_once(own_cache, caplog):
    """A checkpoint written before faithbench stored its hashes loads (with a warning)
    and is sealed then: from here on an edit to it is caught."""
    task, options, ready = own_cache
    path = Path(ready.checkpoint_file)
    _rewrite(path, lambda b: [b.pop("weights"), b.pop("seal", None)])
    again = task.prepare(options(), progress=False)
    assert again.loaded_from_cache and again.checkpoint == ready.checkpoint
    assert "stored before faithbench kept" in caplog.text
    blob = torch.load(path, weights_only=True)
    assert blob["weights"] == ready.checkpoint
    assert blob["seal"] == content_hash({"weights": ready.checkpoint,
                                         "accuracy": ready.accuracy})
    _rewrite(path, lambda b: b["accuracy"].update(test=0.987654321))
    with pytest.raises(IntegrityError, match="not the one stored with its weights"):
        task.prepare(options(), progress=False)


# ---------------------------------------------------------------- the explanation cache

def test_a_changed_explanation_cache_is_refused(tmp_path, synthetic_ready):
    out = tmp_path / "out"
    run(RunConfig(out=str(out), explainers=("gradient",), metrics=("comprehensiveness",), **FAST))
    (cache,) = (out / "explanations").glob("*.jsonl")
    rows = read_jsonl(cache)
    write_jsonl_atomic(cache, [{**r, "scores": [-s for s in r["scores"]]} for r in rows])
    with pytest.raises(IntegrityError) as info:  # a new metric reads the cache
        run(RunConfig(out=str(out), explainers=("gradient",), metrics=("flip_rate",), **FAST))
    assert str(cache) in str(info.value) and "content hash" in str(info.value)


def test_an_explanation_cache_without_its_hash_is_explained_again(tmp_path, synthetic_ready):
    out = tmp_path / "out"
    first = run(RunConfig(out=str(out), explainers=("gradient",), metrics=("comprehensiveness",),
                          **FAST))
    (seal,) = (out / "explanations").glob("*.sha256")
    seal.unlink()
    second = run(RunConfig(out=str(out), explainers=("gradient",), metrics=("flip_rate",), **FAST))
    assert second.computed == 1 and not second.failures and seal.exists()
    assert first.results[0].explainer == second.results[-1].explainer


def test_a_cache_write_killed_before_its_hash_is_explained_again(tmp_path, synthetic_ready,
                                                                monkeypatch):
    """New rows beside the old rows' hash (a run killed between writing the rows and
    their hash) are a cache miss, not a false alarm that blocks every later run."""
    config = RunConfig(out=str(tmp_path), limit=6, progress=False)
    explainer = resolve_explainer("gradient")
    session = open_session("synthetic", config)
    want = session.explain(explainer)  # rows and their hash

    def killed(path, write):
        raise OSError("killed")

    monkeypatch.setattr(explanations_module, "atomic_write", killed)
    with pytest.raises(OSError, match="killed"):
        session.store(explainer, Explained([[-s for s in r] for r in want.scores],
                                           want.targets, 0.0))
    monkeypatch.undo()
    assert open_session("synthetic", config).cached(explainer) is None
    assert open_session("synthetic", config).explain(explainer).scores == want.scores


# ---------------------------------------------------------------- entries

@pytest.fixture
def entry(tmp_path, synthetic_ready) -> Path:
    out = tmp_path / "out"
    summary = run(RunConfig(out=str(out), explainers=("gradient",),
                            metrics=("comprehensiveness", "flip_rate"), **FAST))
    (folder,) = [e.path for e in summary.entries]
    return folder


def _reseal(folder: Path) -> None:
    """What a forger who knows the format does after editing: update the hashes and the
    seal (neither holds a secret)."""
    header = json.loads((folder / "header.json").read_text())
    header["hashes"] = {n: file_hash(folder / n) for n in header["hashes"]}
    header["seal"] = seal_of(header)
    (folder / "header.json").write_text(json.dumps(header))


def test_an_untouched_entry_reads_and_ranks_as_written(entry):
    (e,) = read_entries(entry.parent)
    ranked = {r.metric: r for r in rank([e])}
    for rec in e.results:
        est = rec.estimate
        got = ranked[rec.metric]
        assert (got.mean, got.ci_low, got.ci_high, got.n) == \
            (est.mean, est.ci_low, est.ci_high, est.n)


@pytest.mark.parametrize("reseal", [False, True])
def test_edited_rows_are_refused(entry, reseal):
    rows = read_jsonl(entry / "per_example.jsonl")
    rows[0] = {**rows[0], "value": rows[0]["value"] + 0.5}
    write_jsonl_atomic(entry / "per_example.jsonl", rows)
    if reseal:
        _reseal(entry)
    with pytest.raises(IntegrityError) as info:
        read_entries(entry.parent)
    assert str(entry / "per_example.jsonl") in str(info.value)
    assert ("content hash" if not reseal else "give n = 24, mean =") in str(info.value)


def test_added_rows_are_refused_even_with_new_hashes(entry):
    rows = read_jsonl(entry / "per_example.jsonl")
    write_jsonl_atomic(entry / "per_example.jsonl", rows + [{**rows[0], "id": "forged"}])
    _reseal(entry)
    with pytest.raises(IntegrityError, match="give n = 25"):
        read_entries(entry.parent)


def test_an_edited_estimate_is_refused_or_ignored(entry):
    """A mean edited in the result is refused; an edited interval never reaches a table,
    since rankings recompute intervals from the rows (before: one seed showed the stored
    estimate as it was)."""
    (e,) = read_entries(entry.parent)
    want = {r.metric: r for r in rank([e])}
    results = read_jsonl(entry / "results.jsonl")
    edited = [{**r, "estimate": {**r["estimate"], "ci_low": 0.9, "ci_high": 0.99}}
              for r in results]
    write_jsonl_atomic(entry / "results.jsonl", edited)
    _reseal(entry)
    (e,) = read_entries(entry.parent)
    for row in rank([e]):
        assert (row.ci_low, row.ci_high) == (want[row.metric].ci_low,
                                                   want[row.metric].ci_high)
    edited = [{**r, "estimate": {**r["estimate"], "mean": 0.99}} for r in results]
    write_jsonl_atomic(entry / "results.jsonl", edited)
    _reseal(entry)
    with pytest.raises(IntegrityError, match="the result stored n = 24, mean = 0.99"):
        read_entries(entry.parent)


@pytest.mark.parametrize("reseal", [False, True])
@pytest.mark.parametrize("edit", ["checkpoints", "data_fingerprint", "entry_id"])
def test_an_edited_header_is_refused(entry, edit, reseal):
    """The seal names the edited field; resealed, the suite must still be the one the
    results give (it decides which entries are ranked together) and the entry id the
    hash of explainer and suite (a copy of an entry under another id is refused)."""
    header = json.loads((entry / "header.json").read_text())
    (task,) = header["suite"]
    if edit == "entry_id":
        header["entry_id"] = "0123456789abcdef"
        entry = entry.rename(entry.with_name(header["entry_id"]))
    else:
        header["suite"][task][edit] = ["0" * 16] if edit == "checkpoints" else "0" * 16
    (entry / "header.json").write_text(json.dumps(header))
    if reseal:
        _reseal(entry)
    with pytest.raises(IntegrityError) as info:
        read_entries(entry.parent)
    assert str(entry / "header.json") in str(info.value)
    field = "entry_id" if edit == "entry_id" else "suite"
    if not reseal:
        assert f"header field {field!r} (changed) is not the one sealed" in str(info.value)
    else:
        assert ("entry id" if edit == "entry_id" else "suite") in str(info.value)


def test_the_cli_refuses_an_edited_entry_with_exit_2(entry, capsys):
    rows = read_jsonl(entry / "per_example.jsonl")
    write_jsonl_atomic(entry / "per_example.jsonl", [{**rows[0], "value": 1.0}, *rows[1:]])
    assert main(["leaderboard", "--entries", str(entry.parent)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(entry / "per_example.jsonl") in err
    assert "Traceback" not in err


# ---------------------------------------------------------------- rendering

HOSTILE_NAMES = ["a|b", "line\nbreak | forged | 1.000 |", "<script>x</script>", 'q,"uote"',
                 "tab\there", "x\\|y", "end\\", "<img src=x onerror=alert(1)>", "\n# x"]


def gfm_cells(line: str) -> int:
    """Cells of a GitHub Markdown table row, split as GFM does: at each ``|`` that is not
    part of a backslash escape (a backslash escapes the next character, itself included)."""
    count, i = 0, 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        count += line[i] == "|"
        i += 1
    return count - 1


def _rows():
    base = {"task": "t@1", "suite": "test split", "family": "faithfulness", "metric": "m@1", "direction": "higher",
            "overlaps_above": False, "n": 3, "undefined": 0, "confidence": 0.95, "n_seeds": 1,
            "seed_sd": 0.0, "seed_min": 0.5, "seed_max": 0.5, "ci_method": "bootstrap",
            "metric_name": "m", "model_seeds": [0]}
    return [Ranked(**base, rank=i + 1, entry_id=f"e{i}", explainer=name, explainer_name=name,
                   mean=0.5, ci_low=0.4, ci_high=0.6) for i, name in enumerate(HOSTILE_NAMES)]


def test_no_name_changes_a_tables_shape():
    rows = _rows()
    markdown = render_leaderboard(rows, "markdown").split("\n\n")[0].splitlines()
    assert len(markdown) == 2 + len(rows)
    assert {gfm_cells(line) for line in markdown} == {7}
    assert "<script" not in "".join(markdown) and "<img" not in "".join(markdown)
    table = render_leaderboard(rows, "table").split("\n\n")[0].splitlines()
    assert len(table) == 2 + len(rows)
    parsed = list(csv.reader(io.StringIO(render_leaderboard(rows, "csv"))))
    assert len(parsed) == 1 + len(rows) and {len(p) for p in parsed} == {len(parsed[0])}
    column = parsed[0].index("explainer")
    assert [p[column] for p in parsed[1:]] == HOSTILE_NAMES  # CSV keeps names exactly
    assert not any(math.isnan(float(p[parsed[0].index("mean")])) for p in parsed[1:])


def test_no_name_adds_a_line_to_a_comparisons_notes():
    row = {"task": "t@1", "suite": "test split, all examples, model seeds 0",
           "family": "faithfulness", "metric": "m@1", "direction": "higher",
           "a_entry": "e1", "b_entry": "e2", "n": 3, "undefined": 0, "mean_a": 0.5,
           "mean_b": 0.4, "diff": 0.1, "ci_low": 0.05, "ci_high": 0.15, "ci_method": "bootstrap",
           "n_seeds": 1, "p_value": 0.01, "p_holm": 0.01, "test": "sign-flip exact",
           "better": "a", "confidence": 0.95, "metric_name": "m", "model_seeds": [0],
           "better_entry": "e1"}
    for fmt in ("markdown", "table"):
        plain = render_comparison([Compared(**row, a="a", b="b")], fmt).splitlines()
        hostile = render_comparison([Compared(**row, a="a\n# x", b="<b>b</b>")],
                                    fmt).splitlines()
        assert len(hostile) == len(plain) and not any(line.startswith("#") for line in hostile)
        assert fmt != "markdown" or "<b>" not in "".join(hostile)
