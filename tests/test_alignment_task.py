"""The alignment task on the shared Hansards copy, in a tiny configuration: a cached
teacher-forced model, rows of (sentence pair, target position) that explain the gold
next word, every reference explainer through the plugin interface, greedy decoding."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
import torch

from faithbench import submissions
from faithbench.benchmark.core.api import PreparedTask, TaskOptions
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.session import EvaluationSession
from faithbench.tasks.alignment import BOS, REVERSE_SPEC, TASK

TINY = dataclasses.replace(TASK, model_config={"embed_dim": 32, "hidden": 32, "attn_dim": 32,
                                               "dropout": 0.0}, held_out=300)


@pytest.fixture(scope="module")
def ready(shared_data, one_thread):
    return TINY.prepare(TaskOptions(data_dir=str(shared_data), train_limit=3000, epochs=2),
                        progress=False)


def test_the_model_is_trained_cached_and_better_than_uniform(ready, shared_data):
    assert isinstance(ready, PreparedTask) and ready.n_outputs == len(ready.tgt_vocab)
    ppl = ready.accuracy["held_out_perplexity"]
    assert ppl == pytest.approx(-max(h["val_neg_perplexity"] for h in ready.history), rel=1e-6)
    assert ppl < len(ready.tgt_vocab) / 4  # a uniform guess has perplexity |V|
    again = TINY.prepare(TaskOptions(data_dir=str(shared_data), train_limit=3000, epochs=2),
                         progress=False)
    assert again.loaded_from_cache and again.checkpoint == ready.checkpoint
    assert again.accuracy == ready.accuracy


def test_rows_explain_the_gold_next_word(ready, shared_data):
    with open(shared_data / "alignment" / "gold" / "test.jsonl") as fh:
        first = [json.loads(next(fh)) for _ in range(3)]
    rows = ready.examples("test", 3)
    assert len(rows) == sum(len(p["tgt"]) for p in first)
    pair = first[2]
    mine = [r for r in rows if r.extras["sentence"] == str(pair["id"])]
    assert [r.extras["target_word"] for r in mine] == pair["tgt"]
    batch, labels, _ = next(ready.batches(mine, len(mine)))
    t = 3
    assert batch.tokens_of(t) == ready.src_vocab.encode(pair["src"])
    prefix = batch.prefix[t][batch.prefix_mask[t]].tolist()
    assert prefix == [ready.tgt_vocab.stoi[BOS], *ready.tgt_vocab.encode(pair["tgt"][:t])]
    targets = ready.targets(mine, torch.zeros(len(mine), ready.n_outputs))
    assert targets.tolist() == labels.tolist() == ready.tgt_vocab.encode(pair["tgt"])


@pytest.mark.parametrize("name", submissions.UNIVERSAL + ("lrp",))
def test_every_reference_explainer_scores_the_source_words(ready, name):
    session = EvaluationSession(ready, RunConfig(limit=4, batch_size=16, progress=False,
                                                 time_budget_s=None), seed=0)
    explained = session.explain(submissions.get_explainer(name), cache=False)
    assert len(explained.scores) == len(session.examples)
    for example, scores in zip(session.examples, explained.scores):
        assert len(scores) == len(example.tokens)
        assert all(torch.isfinite(torch.tensor(scores)))
    assert explained.targets == session.targets.tolist()
    if name == "attention":  # the decoder's attention at step t sums to 1 over the source
        assert all(sum(s) == pytest.approx(1.0, abs=1e-5) for s in explained.scores)


def test_greedy_decoding_matches_one_step_at_a_time(ready):
    source = ready.gold["test"][5].src
    [batched] = ready.translate([source, ready.gold["test"][6].src])[:1]
    words = [ready.model.bos_id]
    from faithbench.benchmark.core.vocab import collate

    src = collate([ready.src_vocab.encode(source)], ["x"])
    with torch.no_grad():
        for _ in range(2 * len(source) + 5):
            step = src.replace(prefix=torch.tensor([words]),
                               prefix_mask=torch.ones(1, len(words), dtype=torch.bool))
            nxt = int(ready.model.logits(step).argmax())
            if nxt == ready.tgt_vocab.stoi["</s>"]:
                break
            words.append(nxt)
    assert batched == ready.tgt_vocab.decode(words[1:])


def test_erasure_metrics_on_rows_recomputed_by_hand(ready):
    """aopc_morf and flip_rate on alignment rows: remove the top-k source words (ties
    by position), keep the row's prefix, and read p(reference word) — recomputed here
    one row and one k at a time."""
    from faithbench import metrics as metric_registry
    from faithbench.benchmark.core.vocab import collate

    session = EvaluationSession(ready, RunConfig(limit=2, batch_size=8, progress=False,
                                                 time_budget_s=None), seed=0)
    scores = session.explain(submissions.get_explainer("gradient_x_input"), cache=False).scores
    aopc = session.score(metric_registry.get_metric("aopc_morf"), scores).values
    flips = session.score(metric_registry.get_metric("flip_rate"), scores).values
    for r, example in enumerate(session.examples):
        batch, _, _ = next(ready.batches([example], 1))
        src = ready.src_vocab.encode(example.tokens)
        order = sorted(range(len(src)), key=lambda i: (-scores[r][i], i))

        def probs(removed, src=src, batch=batch):
            kept = [w for i, w in enumerate(src) if i not in removed]
            row = collate([kept], ["x"]) if kept else collate([[]], ["x"])
            step = row.replace(prefix=batch.prefix, prefix_mask=batch.prefix_mask)
            with torch.no_grad():
                return torch.softmax(ready.model.logits(step).float(), -1)[0].double()

        base, target = probs(set()), example.label
        drops = [float(base[target] - probs(set(order[:k]))[target])
                 for k in range(1, min(10, len(src)) + 1)]
        assert aopc[r] == pytest.approx(sum(drops) / len(drops), abs=1e-5)
        assert flips[r] == float(int(probs({order[0]}).argmax()) != int(base.argmax()))


@pytest.mark.parametrize("links", ["argmax", "threshold"])
def test_aer_sums_rows_per_sentence_and_matches_set_counts(ready, links):
    """Per sentence: the rows' scores form a (T, S) matrix; links read off it and counted
    against the gold with plain sets give the session's per-sentence statistics; the
    record's value is 1 − (Σ|A∩S| + Σ|A∩P|) / (Σ|A| + Σ|S|) over the 4 sentences."""
    from faithbench import metrics as metric_registry
    from faithbench.metrics.alignment import argmax_links, link_counts, threshold_links

    session = EvaluationSession(ready, RunConfig(limit=4, batch_size=7, progress=False,
                                                 time_budget_s=None), seed=0)
    scores = session.explain(submissions.get_explainer("attention"), cache=False).scores
    name = "aer" if links == "argmax" else "aer[links=threshold;fraction=0.5]"
    metric = metric_registry.resolve(name)
    scored = session.score(metric, scores)
    pairs = ready.gold["test"][:4]
    assert scored.ids == [p.id for p in pairs]
    totals = [0, 0, 0, 0]
    for k, pair in enumerate(pairs):
        matrix = torch.tensor([s for e, s in zip(session.examples, scores)
                               if e.extras["sentence"] == pair.id])
        found = argmax_links(matrix) if links == "argmax" else threshold_links(matrix, 0.5)
        counts = link_counts(found, pair.sure, pair.possible)
        assert scored.stats[k].tolist() == list(counts)
        totals = [a + b for a, b in zip(totals, counts)]
    est = session.estimate(metric, scored)
    assert est.n == 4
    assert est.mean == pytest.approx(1 - (totals[0] + totals[1]) / (totals[2] + totals[3]))
    precision = session.estimate(metric_registry.get_metric("alignment_precision"),
                                 session.score(metric_registry.get_metric("alignment_precision"),
                                               scores))
    if links == "argmax":
        assert precision.mean == pytest.approx(totals[1] / totals[2])


def test_run_writes_alignment_results_the_leaderboard_ranks(tmp_path, shared_data, ready,
                                                          monkeypatch):
    """`faithbench run --tasks alignment` with the tiny model: AER records hold one
    statistics row per sentence pair, entries pass the leaderboard's checks, and rank and
    compare read them (paired over sentences)."""
    from faithbench import tasks as task_registry
    from faithbench.benchmark.core.records import read_jsonl, read_results
    from faithbench.benchmark.runner import run
    from faithbench.leaderboard.compare import compare
    from faithbench.leaderboard.entry import read_entries
    from faithbench.leaderboard.rank import rank

    monkeypatch.setattr(task_registry.REGISTRY, "_items",
                        {**task_registry.REGISTRY._items, "alignment": TINY})
    summary = run(RunConfig(tasks=("alignment",), data_dir=str(shared_data), train_limit=3000,
                            epochs=2, limit=6, explainers=("attention", "random"),
                            metrics=("aer", "flip_rate"), out=str(tmp_path), progress=False))
    assert summary.exit_code == 0, summary.failures
    records = read_results(tmp_path / "results.jsonl")
    aer = [r for r in records if r.metric.startswith("aer")]
    assert len(aer) == 2 and all(r.estimate.n == 6 for r in aer)
    rows = read_jsonl(tmp_path / aer[0].per_example_file)
    assert [r["id"] for r in rows] == [p.id for p in ready.gold["test"][:6]]
    flips = [r for r in records if r.metric.startswith("flip_rate")]
    assert all(r.estimate.n == sum(len(p.tgt) for p in ready.gold["test"][:6]) for r in flips)
    entries = read_entries(tmp_path / "leaderboard")
    ranked = rank(entries, metric="aer")
    assert {r.explainer_name for r in ranked} == {"attention", "random"}
    [row] = compare(*entries, metric="aer")
    assert row.n == 6 and row.test == "swap exact"


@pytest.fixture
def tiny_registered(monkeypatch, shared_data, ready):
    from faithbench import tasks as task_registry

    monkeypatch.setattr(task_registry.REGISTRY, "_items",
                        {**task_registry.REGISTRY._items, "alignment": TINY})
    # small models: the reverse one does not clear the gate's unigram margin
    return RunConfig(tasks=("alignment",), data_dir=str(shared_data), train_limit=3000, epochs=2,
                     allow_weak_model=True,
                     limit=5, progress=False, time_budget_s=None)


def test_align_writes_links_that_score_alignments_counts(tmp_path, ready, tiny_registered,
                                                          monkeypatch):
    import subprocess
    import sys

    from faithbench.benchmark import alignments
    from faithbench.benchmark.cli import align as align_verb
    from faithbench.benchmark.core.records import read_jsonl
    from faithbench.metrics.alignment import link_counts

    out = tmp_path / "A.jsonl"
    assert alignments.align_to_file("alignment", "attention", str(out), tiny_registered) == 5
    rows = read_jsonl(out)
    pairs = ready.gold["test"][:5]
    assert [r["id"] for r in rows] == [p.id for p in pairs]
    for r, p in zip(rows, pairs):  # argmax: one link per target word
        assert sorted(j for _, j in r["links"]) == list(range(len(p.tgt)))
    totals = np.sum([link_counts({tuple(x) for x in r["links"]}, p.sure, p.possible)
                     for r, p in zip(rows, pairs)], axis=0)
    def no_model(*args, **kwargs):
        raise AssertionError("scoring alignments must not prepare a translation model")

    monkeypatch.setattr(type(TINY), "prepare", no_model)  # the gold is all it needs
    summary = {s["metric"]: s for s in alignments.score_alignments("alignment", str(out), tiny_registered)}
    assert summary["aer"]["mean"] == pytest.approx(
        1 - (totals[0] + totals[1]) / (totals[2] + totals[3]), abs=1e-12)
    assert summary["alignment_recall"]["mean"] == pytest.approx(totals[0] / totals[3], abs=1e-12)
    assert summary["aer"]["n"] == 5
    # the README/epilog one-liners: to Pharaoh "i-j" lines and back, unchanged
    # (each wrapped inside its brackets to fit a terminal, still one shell command)
    to_txt, back = re.findall(r'python -c "(.*?)"\s*(?:\\\n\s*)?<', align_verb.EPILOG, re.DOTALL)
    txt = subprocess.run([sys.executable, "-c", to_txt], input=out.read_text(), text=True,
                         capture_output=True, check=True).stdout
    assert txt.splitlines()[0] == " ".join(f"{i}-{j}" for i, j in rows[0]["links"])
    again = subprocess.run([sys.executable, "-c", back], input=txt, text=True,
                           capture_output=True, check=True).stdout
    assert [json.loads(x)["links"] for x in again.splitlines()] == [r["links"] for r in rows]


def test_score_alignments_names_bad_lines(tmp_path, tiny_registered, ready):
    from faithbench.benchmark import alignments
    from faithbench.benchmark.core.errors import DataFileError

    ids = [p.id for p in ready.gold["test"][:5]]
    cases = {
        "appears twice": [{"id": ids[0], "links": []}] * 2,
        "outside the pair": [{"id": ids[0], "links": [[99, 0]]}],
        "no gold sentence pair 'nope'": [{"id": "nope", "links": []}],
        "4 gold pairs have no line": [{"id": ids[0], "links": []}],
        "expected \\[i, j\\] pairs": [{"id": ids[0], "links": [[0]]}],
    }
    for message, rows in cases.items():
        path = tmp_path / "bad.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        with pytest.raises(DataFileError, match=message):
            alignments.score_alignments("alignment", str(path), tiny_registered)


def test_explain_output_scores_back_with_its_rows(tmp_path, tiny_registered, ready):
    """explain writes position, prefix and target_word; score reads them back into the
    same rows, so flip_rate from the file equals the session's."""
    from faithbench import metrics as metric_registry
    from faithbench.benchmark import verbs
    from faithbench.benchmark.core.records import read_jsonl

    out = tmp_path / "e.jsonl"
    verbs.explain_to_file("alignment", "gradient", str(out), tiny_registered)
    row = read_jsonl(out)[3]
    example = ready.examples("test", 5)[3]
    assert (row["position"], row["target_word"], row["prefix"]) == (
        example.extras["position"], example.extras["target_word"], list(example.extras["prefix"]))
    config = dataclasses.replace(tiny_registered, metrics=("flip_rate",))
    [summary] = verbs.score_file("alignment", str(out), config)
    session = EvaluationSession(ready, tiny_registered, seed=0)
    scores = [r["scores"] for r in read_jsonl(out)]
    direct = session.score(metric_registry.get_metric("flip_rate"), scores).values
    assert summary["mean"] == pytest.approx(float(direct.mean()), abs=1e-12)


def test_reference_aligners_give_the_scale(tmp_path, tiny_registered, ready, monkeypatch):
    """The diagonal baseline is diagonal_links per pair; eflomal on 2,000 training pairs
    already beats it on all 447 test pairs; its links are cached, so a second call
    returns the same links without running eflomal."""
    import eflomal

    from faithbench.benchmark import alignments
    from faithbench.benchmark.core.links import diagonal_links
    from faithbench.benchmark.core.records import read_jsonl

    config = dataclasses.replace(tiny_registered, train_limit=2000, limit=None)
    diag, stat = tmp_path / "diag.jsonl", tmp_path / "eflomal.jsonl"
    assert alignments.align_to_file("alignment", None, str(diag), config, aligner="diagonal") == 447
    first = ready.gold["test"][0]
    assert read_jsonl(diag)[0]["links"] == sorted(map(list, diagonal_links(len(first.src),
                                                                          len(first.tgt))))
    alignments.align_to_file("alignment", None, str(stat), config, aligner="eflomal")
    scored = {name: {r["metric"]: r["mean"] for r in alignments.score_alignments(
        "alignment", str(path), config)} for name, path in (("diag", diag), ("eflomal", stat))}
    assert scored["diag"]["aer"] == pytest.approx(0.540, abs=0.005)  # as counted in test_alignment
    assert scored["eflomal"]["aer"] < scored["diag"]["aer"] - 0.1
    links = read_jsonl(stat)

    def refuse(*args, **kwargs):
        raise AssertionError("eflomal ran again instead of reading its cache")

    monkeypatch.setattr(eflomal.Aligner, "align", refuse)
    alignments.align_to_file("alignment", None, str(stat), config, aligner="eflomal")
    assert read_jsonl(stat) == links


TINY_REVERSE = dataclasses.replace(TINY, spec=REVERSE_SPEC, reverse=True)


@pytest.fixture(scope="module")
def ready_reverse(shared_data, one_thread):
    return TINY_REVERSE.prepare(TaskOptions(data_dir=str(shared_data), train_limit=3000,
                                            epochs=2), progress=False)


def test_the_reverse_task_reads_every_pair_the_other_way(shared_data, ready, ready_reverse):
    options = TaskOptions(data_dir=str(shared_data), train_limit=3000)
    gold, _, training, held = TINY.read(options)
    gold_r, _, training_r, held_r = TINY_REVERSE.read(options)
    assert training_r == [(t, s) for s, t in training] and held_r == [(t, s) for s, t in held]
    pair, back = gold["test"][3], gold_r["test"][3]
    assert (back.id, back.src, back.tgt) == (pair.id, pair.tgt, pair.src)
    assert back.sure == {(j, i) for i, j in pair.sure}
    assert back.possible == {(j, i) for i, j in pair.possible}
    assert (TINY.other_direction, TINY_REVERSE.other_direction) == ("alignment_reverse",
                                                                    "alignment")
    assert ready_reverse.cache_key != ready.cache_key
    assert ready_reverse.examples("test", 4)[-1].tokens == pair.tgt  # English is the source


@pytest.fixture
def both_registered(monkeypatch, tiny_registered, ready_reverse):
    from faithbench import tasks as task_registry

    monkeypatch.setattr(task_registry.REGISTRY, "_items",
                        {**task_registry.REGISTRY._items, "alignment_reverse": TINY_REVERSE})
    return tiny_registered


def test_symmetrized_explainer_links_combine_both_models(tmp_path, both_registered, ready):
    """--symmetrize explains alignment_reverse's own model: its links, transposed, are
    intersected with (or grown from) the forward links, pair by pair."""
    from faithbench.benchmark import alignments
    from faithbench.benchmark.core.links import grow_diag_final
    from faithbench.benchmark.core.records import read_jsonl

    config = both_registered
    paths = {k: tmp_path / f"{k}.jsonl" for k in ("fwd", "rev", "inter", "gdf")}
    alignments.align_to_file("alignment", "gradient", str(paths["fwd"]), config)
    alignments.align_to_file("alignment_reverse", "gradient", str(paths["rev"]), config)
    alignments.align_to_file("alignment", "gradient", str(paths["inter"]), config,
                             combine="intersect")
    alignments.align_to_file("alignment", "gradient", str(paths["gdf"]), config,
                             combine="grow-diag-final")
    got = {k: {r["id"]: {tuple(x) for x in r["links"]} for r in read_jsonl(p)}
           for k, p in paths.items()}
    pairs = ready.gold["test"][:5]
    for p in pairs:
        fwd, rev = got["fwd"][p.id], {(i, j) for j, i in got["rev"][p.id]}
        assert got["inter"][p.id] == fwd & rev
        assert got["gdf"][p.id] == grow_diag_final(fwd, rev, len(p.src), len(p.tgt))
        assert fwd & rev <= got["gdf"][p.id] <= fwd | rev
    assert any(got["inter"][p.id] != got["fwd"][p.id] for p in pairs)  # not a no-op


def test_submitted_alignments_rank_and_compare_beside_explainers(tmp_path, shared_data,
                                                                 tiny_registered, ready):
    """A reference aligner's links, scored with --submit-as, become a leaderboard entry
    that no model produced: it ranks beside the explainers of a run on the same data and
    split, with the AER counted by hand, and compare pairs it with them over sentences."""
    from faithbench.benchmark import alignments
    from faithbench.benchmark.core.links import diagonal_links, link_counts
    from faithbench.benchmark.runner import run
    from faithbench.leaderboard.compare import compare
    from faithbench.leaderboard.entry import read_entries
    from faithbench.leaderboard.rank import rank
    from faithbench.leaderboard.suite import MODEL_FREE

    config = dataclasses.replace(tiny_registered, explainers=("attention",), metrics=("aer",),
                                 out=str(tmp_path / "run"), limit=6)
    assert run(config).exit_code == 0
    diag = tmp_path / "diag.jsonl"
    alignments.align_to_file("alignment", None, str(diag), config, aligner="diagonal")
    board = tmp_path / "run" / "leaderboard"
    alignments.score_alignments("alignment", str(diag), config, submit_as="diagonal",
                                entries=str(board))
    entries = {e.name: e for e in read_entries(board)}
    assert set(entries) == {"attention", "diagonal"}
    # the data variant is in the task id, the model entries' and the reference row's alike
    assert set(entries["attention"].suite) == set(entries["diagonal"].suite) == {
        "alignment[variant=alignment]@1"}
    assert entries["diagonal"].suite["alignment[variant=alignment]@1"]["checkpoints"] == [
        MODEL_FREE]
    totals = np.sum([link_counts(diagonal_links(len(p.src), len(p.tgt)), p.sure, p.possible)
                     for p in ready.gold["test"][:6]], axis=0)
    ranked = {r.explainer_name: r for r in rank(list(entries.values()), metric="aer")}
    assert ranked["diagonal"].mean == pytest.approx(
        1 - (totals[0] + totals[1]) / (totals[2] + totals[3]), abs=1e-12)
    assert ranked["diagonal"].metric == ranked["attention"].metric == "aer@1"
    [row] = compare(entries["attention"], entries["diagonal"], metric="aer")
    assert row.n == 6


# ---------------------------------------------------------------- a user's own language pair

def _pair(root, name: str, gold: list[dict], parallel: list | bytes | None = None):
    """``root/name/gold/test.jsonl`` (no validation file) and, if given, a parallel corpus
    (rows, or the file's raw bytes)."""
    (root / name / "gold").mkdir(parents=True)
    (root / name / "gold" / "test.jsonl").write_text("".join(json.dumps(g) + "\n" for g in gold))
    if parallel is not None:
        (root / name / "parallel").mkdir()
        data = parallel if isinstance(parallel, bytes) else "".join(
            json.dumps(r) + "\n" for r in parallel).encode()
        (root / name / "parallel" / "train.jsonl").write_bytes(data)
    return RunConfig(data_dir=str(root), variant=name, progress=False, time_budget_s=None)


def _hansards(shared_data, part: str, n: int) -> list[dict]:
    import itertools

    with open(shared_data / "alignment" / part) as fh:
        return [json.loads(line) for line in itertools.islice(fh, n)]


def test_gold_alone_is_enough_to_score_links_and_run_the_diagonal(tmp_path, shared_data):
    """A gold-only pair (no validation file, no parallel corpus): before, every verb was
    refused ('missing gold file for split validation', then 'missing parallel training
    corpus'). The AER is recounted here with plain sets."""
    from faithbench.benchmark import alignments
    from faithbench.benchmark.core.errors import InputError
    from faithbench.benchmark.core.links import diagonal_links
    from faithbench.benchmark.session import open_session

    gold = _hansards(shared_data, "gold/test.jsonl", 12)
    config = _pair(tmp_path, "gold_only", gold)
    out = tmp_path / "diag.jsonl"
    assert alignments.align_to_file("alignment", None, str(out), config, aligner="diagonal") == 12
    a_s = a_p = n_a = n_s = 0
    for g in gold:
        links = diagonal_links(len(g["src"]), len(g["tgt"]))
        sure, possible = {tuple(x) for x in g["sure"]}, {tuple(x) for x in g["possible"]}
        a_s, a_p = a_s + len(links & sure), a_p + len(links & possible)
        n_a, n_s = n_a + len(links), n_s + len(sure)
    summary = {s["metric"]: s for s in alignments.score_alignments("alignment", str(out), config)}
    assert summary["aer"]["n"] == 12
    assert summary["aer"]["mean"] == pytest.approx(1 - (a_s + a_p) / (n_a + n_s), abs=1e-12)
    with pytest.raises(InputError, match="missing parallel training corpus.*need only the gold"):
        open_session("alignment", config)  # a model needs parallel text: said, not a traceback


def test_a_small_bitext_trains_with_a_scaled_held_out_slice(tmp_path, shared_data, caplog):
    """160 parallel pairs besides 10 gold ones (which the corpus repeats and training
    leaves out), no validation file: the last 160 // 10 = 16 are held out, 144 train.
    Before: refused, as 160 is not more than the 2,000 held out."""
    import logging

    from faithbench.benchmark.core.api import TaskOptions
    from faithbench.benchmark.core.errors import DataFileError

    gold = _hansards(shared_data, "gold/test.jsonl", 10)
    parallel = _hansards(shared_data, "parallel/train.jsonl", 160)
    again = [{"src": g["src"], "tgt": g["tgt"]} for g in gold]
    _pair(tmp_path, "small", gold, parallel[:80] + again + parallel[80:])
    options = TaskOptions(data_dir=str(tmp_path), variant="small", epochs=1)
    with caplog.at_level(logging.WARNING):
        got_gold, _, training, held = TINY.read(options)
    assert "left out 10 training pairs whose source sentence is a gold one" in caplog.text
    pairs = [(tuple(r["src"]), tuple(r["tgt"])) for r in parallel]
    assert held == pairs[144:] and training == pairs[:144]
    assert list(got_gold) == ["test"]
    ready = TINY.prepare(options, progress=False)
    assert ready.accuracy["held_out_perplexity"] == pytest.approx(
        -max(h["val_neg_perplexity"] for h in ready.history), rel=1e-6)
    assert len(ready.examples("test")) == sum(len(g["tgt"]) for g in gold)
    # a bitext of gold sentences only leaves nothing to train on: said, with what works
    _pair(tmp_path, "all_gold", gold, again)
    with pytest.raises(DataFileError, match="0 training pairs .* at least 100; .*need only"):
        TINY.prepare(TaskOptions(data_dir=str(tmp_path), variant="all_gold"), progress=False)


def test_bad_parallel_files_name_file_line_and_field(tmp_path, shared_data):
    """Before: an empty file ended in a StopIteration traceback, a 0xff byte in a
    UnicodeDecodeError traceback, an empty sentence was trained on."""
    from faithbench.benchmark.core.api import TaskOptions
    from faithbench.benchmark.core.errors import DataFileError, NotUtf8Error

    gold = _hansards(shared_data, "gold/test.jsonl", 3)
    lines = [json.dumps(r).encode() + b"\n" for r in _hansards(shared_data,
                                                              "parallel/train.jsonl", 3)]
    at = lines[2].index(b'"tgt"')
    lines[2] = lines[2][:at] + b"\xff" + lines[2][at:]
    cases = {"latin": b"".join(lines), "empty": b"",
             "no_words": [{"src": ["a"], "tgt": ["b"]}, {"src": [], "tgt": ["b"]}],
             "blank": [{"src": ["a"], "tgt": ["b"]}, {"src": ["a", " "], "tgt": ["b"]}]}
    for name, data in cases.items():
        _pair(tmp_path, name, gold, data)

    def read(name):
        return TINY.read(TaskOptions(data_dir=str(tmp_path), variant=name))

    with pytest.raises(NotUtf8Error) as info:
        read("latin")
    assert (info.value.line, info.value.offset) == (3, len(lines[0]) + len(lines[1]) + at)
    with pytest.raises(DataFileError, match="no rows: the file is empty"):
        read("empty")
    for name, problem in (("no_words", "expected a non-empty list"), ("blank", "token 1 is blank")):
        with pytest.raises(DataFileError, match=problem) as info:
            read(name)
        assert (info.value.line, info.value.field) == (2, "src")


def test_align_keeps_nothing_under_the_output_file(tmp_path, tiny_registered):
    """`faithbench align --out A.jsonl` passes the output file as the run's --out: no
    explanation cache or partial batches may be written under it (they would make
    A.jsonl a folder)."""
    from faithbench.benchmark import alignments

    out = tmp_path / "A.jsonl"
    config = dataclasses.replace(tiny_registered, out=str(out))
    assert alignments.align_to_file("alignment", "attention", str(out), config) == 5
    assert out.is_file() and [p.name for p in tmp_path.iterdir()] == ["A.jsonl"]


def test_debate_on_translation_bleu_uniform_trained_and_attention_aer(tmp_path, ready,
                                                                     tiny_registered):
    """``vashishth_mt`` on the alignment model: BLEU under each alteration, of the model
    trained with uniform attention (``--bilstm uniform``, trained beside it, its own task
    id and cache key), and the sentence AER of the attention's argmax links, recomputed
    here from the gold pairs and the model's attention."""
    from dataclasses import replace

    from faithbench.benchmark import debate
    from faithbench.benchmark.core.errors import InputError
    from faithbench.benchmark.core.records import read_jsonl
    from faithbench.metrics.alignment import AER, argmax_links, link_counts

    config = replace(tiny_registered, out=str(tmp_path), seeds=(0,))
    path = debate.run(config, ["vashishth", "vashishth_mt"])
    [row] = [r for r in read_jsonl(path) if r["experiment"] == "vashishth_mt"]
    values = row["values"]
    assert set(values) == {"bleu_learned", "bleu_uniform", "bleu_random", "bleu_permuted",
                           "bleu_uniform_trained", "aer_learned", "aer_permuted"}
    uniform = TINY.prepare(TaskOptions(data_dir=tiny_registered.data_dir, train_limit=3000,
                                       epochs=2, bilstm="uniform"), progress=False)
    assert uniform.loaded_from_cache and uniform.checkpoint != ready.checkpoint
    assert "bilstm=uniform" in uniform.spec.id and "bilstm" not in ready.spec.id
    pairs = {p.id: p for p in ready.gold["test"]}
    for pair_id, got in zip(row["ids"], values["aer_learned"]):
        pair, rows = pairs[pair_id], ready.examples("test")
        mine = [r for r in rows if r.extras["sentence"] == pair_id]
        batch, _, _ = next(ready.batches(mine, len(mine)))
        with torch.no_grad():
            links = argmax_links(ready.model.attention(batch)[:, : len(pair.src)])
        want = float(AER(np.array(link_counts(links, pair.sure, pair.possible | pair.sure))))
        assert got == pytest.approx(want)
    with pytest.raises(InputError, match="only --bilstm uniform"):
        TINY.prepare(TaskOptions(data_dir=tiny_registered.data_dir, bilstm="diversity"))
