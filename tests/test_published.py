"""``release --models`` and ``submit --published``: a release ships its reference models
(float16, loading back bit for bit) and its reference entries in full; a plugin is
scored on those models without training anything, ranked among the references, and
compared with its neighbours by ``compare``'s paired test; with ``--sample`` the
references are cut to the same examples, and their values there are the ones a run
of them on that sample gives."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from faithbench import submissions
from faithbench.benchmark.cli import main
from faithbench.benchmark.core.cache import weights_hash
from faithbench.leaderboard.compare import compare
from faithbench.leaderboard.entry import read_entries
from faithbench.leaderboard.reference import read_reference
from faithbench.leaderboard.release import read_release
from faithbench.leaderboard.render import num

pytestmark = pytest.mark.usefixtures("one_thread")
FAST = ["--batch-size", "16", "--no-progress"]
TEMPLATE = Path(submissions.__file__).resolve().parent / "TEMPLATE.py"
REFERENCES = ["gradient", "attention", "random"]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("published")
    run = root / "refs"
    assert main(["run", "--out", str(run), "--half-weights", "--explainers", *REFERENCES,
                 "--metrics", "comprehensiveness", "sufficiency", "token_f1", "--limit", "60",
                 *FAST]) == 0
    assert main(["release", "--entries", str(run / "leaderboard"), "--version", "t1", "--out",
                 str(root / "t1"), "--models"]) == 0
    return root / "t1"


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A cache without the release's model, and training that fails if it is called."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("FAITHBENCH_CACHE", str(cache))

    def refuse(*args, **kwargs):
        raise AssertionError("submit --published trained a model")

    monkeypatch.setattr("faithbench.tasks.classification.train", refuse)
    return cache


def test_the_release_ships_its_models_at_half_size_loading_bit_for_bit(release):
    manifest = read_release(release).manifest
    [suite] = manifest["suites"]
    [model] = suite["models"]
    blob = torch.load(release / model["file"], weights_only=True)
    assert model["float16"] and all(v.dtype == torch.float16
                                    for v in blob["state_dict"].values() if v.is_floating_point())
    state = {k: v.to(getattr(torch, blob["dtypes"][k])) for k, v in blob["state_dict"].items()}
    entries = read_entries(release.parent / "refs" / "leaderboard")
    checkpoints = {r.provenance.checkpoint for e in entries for r in e.results}
    assert {weights_hash(state)} == checkpoints == {model["checkpoint"]}
    assert manifest["models"] == {model["file"]: model["sha256"]}
    # the reference entries in full: the same records and per-example values
    shipped = {e.entry_id: e for e in read_reference(release, manifest["reference"])}
    assert set(shipped) == {e.entry_id for e in entries}
    for e in entries:
        assert [r.as_dict() for r in shipped[e.entry_id].results] == [r.as_dict() for r in e.results]
        def key(row):
            return row["metric"], row["model_seed"], row["id"]

        strip = [{k: v for k, v in row.items() if k != "curve"} for row in e.per_example]
        assert sorted(shipped[e.entry_id].per_example, key=key) == sorted(strip, key=key)


def test_a_changed_reference_file_is_refused(release, tmp_path):
    from faithbench.benchmark.core.errors import IntegrityError

    copy = tmp_path / "t1"
    shutil.copytree(release, copy)
    manifest = read_release(copy).manifest
    victim = copy / next(n for n in manifest["reference"] if n.endswith(".npz"))
    victim.write_bytes(victim.read_bytes()[:-3] + b"xyz")
    with pytest.raises(IntegrityError, match="not the file the release's manifest hashed"):
        read_reference(copy, manifest["reference"])


def test_submit_published_ranks_a_plugin_among_the_references_without_training(
        release, fresh_cache, tmp_path, capsys):
    out = tmp_path / "mine"
    assert main(["submit", str(TEMPLATE), "--published", str(release), "--out", str(out),
                 *FAST]) == 0
    text = capsys.readouterr().out
    assert "my_explainer (yours)" in text and max(map(len, text.splitlines())) <= 120
    # the release's model was installed, not trained: the one file in the cache
    [model] = read_release(release).manifest["suites"][0]["models"]
    assert [p.name for p in (fresh_cache / "models").iterdir()] == [Path(model["file"]).name]
    entries = {e.name: e for e in read_entries(out / "leaderboard")}
    assert set(entries) == {"my_explainer", *REFERENCES}
    mine = entries["my_explainer"]
    assert {r.provenance.checkpoint for r in mine.results} == {model["checkpoint"]}
    # ranked by its means among the references' (as shipped): computed here from the rows
    task = mine.results[0].task
    for r in mine.results:
        means = {name: e.values(task, r.metric) for name, e in entries.items()}
        means = {k: sum(v.values()) / len(v) for k, v in means.items()}
        better = [k for k, v in means.items()
                  if (v > means["my_explainer"]) == (r.direction == "higher")
                  and v != means["my_explainer"]]
        line = next(line for line in text.splitlines()
                    if line.startswith(r.metric.split("[")[0].split("@")[0] + " "))
        assert line.split()[1:4] == [str(len(better) + 1), "of", "4"], line


def test_the_neighbours_are_compared_as_compare_compares(release, fresh_cache, tmp_path,
                                                           capsys):
    out = tmp_path / "mine"
    assert main(["submit", str(TEMPLATE), "--published", str(release), "--out", str(out),
                 *FAST]) == 0
    text = capsys.readouterr().out
    entries = {e.name: e for e in read_entries(out / "leaderboard")}
    table = text[text.index("Against the entries"):].splitlines()
    rows = [line.split() for line in table if line.startswith(("comprehensiveness ",
                                                                "sufficiency ", "token_f1 "))]
    assert rows
    for row in rows:
        metric, other = row[0], row[4]
        [c] = [c for c in compare(entries["my_explainer"], entries[other])
               if c.metric_name == metric]
        assert row[5:8] == [num(c.diff), f"[{num(c.ci_low)},", f"{num(c.ci_high)}]"]


def test_a_sample_scores_the_references_on_the_same_examples(release, fresh_cache, tmp_path,
                                                            capsys):
    out = tmp_path / "sampled"
    assert main(["submit", str(TEMPLATE), "--published", str(release), "--out", str(out),
                 "--sample", "25", *FAST]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "random 25 of the first 60 (seed 0)" in text
    assert "Left out of this ranking" in text and "token_f1" in text
    entries = {e.name: e for e in read_entries(out / "leaderboard")}
    # independently: attention run on the same sample of the same (installed) model
    direct = tmp_path / "direct"
    assert main(["run", "--out", str(direct), "--half-weights", "--explainers", "attention",
                 "--metrics", "comprehensiveness", "sufficiency", "--limit", "60", "--sample",
                 "25", *FAST]) == 0
    [ran] = read_entries(direct / "leaderboard")
    assert ran.entry_id == entries["attention"].entry_id  # the same suite, the same entry
    for r in ran.results:
        cut = next(x for x in entries["attention"].results if x.metric == r.metric)
        assert cut.estimate.n == r.estimate.n == 25
        assert cut.estimate.mean == pytest.approx(r.estimate.mean, rel=1e-6)


def test_what_a_release_cannot_serve_is_refused(release, tmp_path, capsys):
    bare = tmp_path / "bare"
    assert main(["release", "--entries", str(release.parent / "refs" / "leaderboard"),
                 "--version", "t0", "--out", str(bare)]) == 0
    capsys.readouterr()
    assert main(["submit", str(TEMPLATE), "--published", str(bare), "--out",
                 str(tmp_path / "o"), *FAST]) == 2
    assert "ships no models" in capsys.readouterr().err
    assert main(["submit", str(TEMPLATE), "--published", str(release), "--epochs", "2",
                 "--out", str(tmp_path / "o"), *FAST]) == 2
    assert "--epochs" in capsys.readouterr().err
    assert main(["submit", str(TEMPLATE), "--published", str(release), "--tasks", "nli",
                 "--out", str(tmp_path / "o"), *FAST]) == 2
    assert "ships models for synthetic; not for nli" in capsys.readouterr().err
    gone = tmp_path / "gone"
    shutil.copytree(release, gone)
    for f in (gone / "models").iterdir():
        f.unlink()
    assert main(["submit", str(TEMPLATE), "--published", str(gone), "--out",
                 str(tmp_path / "o"), *FAST]) == 2
    assert "ships no model" in capsys.readouterr().err


def test_the_manifest_states_where_and_how_big_the_models_are(release):
    manifest = json.loads((release / "manifest.json").read_text())
    [model] = manifest["suites"][0]["models"]
    assert model["file"].startswith("models/synthetic-") and model["bytes"] == (
        release / model["file"]).stat().st_size
    assert model["seed"] == 0


def test_an_older_release_sorts_by_the_headline_metric_of_its_own_version():
    """Release v4 was scored with comprehensiveness@1; the headline metric is now @2.
    Its table still sorts by comprehensiveness (means descending), not by its first
    column."""
    from faithbench.leaderboard.rank import matrices_of_rows
    from faithbench.metrics import get_metric
    headline = get_metric("comprehensiveness").spec.id
    old = headline.replace("@2", "@1")
    rows = [r for r in read_release("v4").rows
            if r.task == "sentiment@1" and r.suite.endswith("majority 0.51")
            and "77,189" in r.suite]
    assert headline.endswith("@2") and any(r.metric == old for r in rows)
    [table] = matrices_of_rows(rows, "sentiment", prefer=headline)
    assert table.sort_key == old and sorted({r.metric for r in rows})[0] != old
    means = {r.entry_id: r.mean for r in rows if r.metric == old}
    shown = [means[e] for e in table.order]
    assert len(shown) == 15 and shown == sorted(shown, reverse=True)
