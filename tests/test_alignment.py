"""Alignment data and AER: reading gold links with clear errors, the Och & Ney
counts and their corpus aggregation, reading links off score matrices, and
symmetrization — against hand-worked cases and the shared Hansards copy."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.benchmark.core.stats import corpus_bootstrap
from faithbench.metrics.alignment import (
    AER,
    PRECISION,
    RECALL,
    argmax_links,
    diagonal_links,
    grow_diag_final,
    intersect,
    link_counts,
    threshold_links,
)
from faithbench.tasks.alignment_data import read_gold, read_parallel

GOOD = {"id": 1, "src": ["le", "chat"], "tgt": ["the", "cat"], "sure": [[0, 0]],
        "possible": [[0, 0], [1, 1]]}


def _gold(tmp_path, *rows, split="test"):
    folder = tmp_path / "gold"
    folder.mkdir(exist_ok=True)
    (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_hansards_gold_has_the_documented_counts(shared_data):
    gold, dropped = read_gold(shared_data / "alignment" / "gold")
    counts = {s: (len(p), sum(len(x.sure) for x in p), sum(len(x.possible) for x in p))
              for s, p in gold.items()}
    assert counts == {"validation": (37, 338, 1784), "test": (447, 4038, 17438)}  # PROVENANCE.md
    assert dropped == {"validation": 0, "test": 0}
    first = json.loads((shared_data / "alignment" / "gold" / "test.jsonl").open().readline())
    pair = gold["test"][0]
    assert (pair.id, list(pair.src), list(pair.tgt)) == (str(first["id"]), first["src"], first["tgt"])
    assert pair.sure == {tuple(x) for x in first["sure"]} <= pair.possible


def test_parallel_corpus_loads_through_datasets(shared_data):
    corpus = read_parallel(shared_data / "alignment" / "parallel")
    assert len(corpus) == 150_000 and set(corpus.column_names) == {"src", "tgt"}


@pytest.mark.parametrize("change, field, message", [
    ({"sure": [[0, 0], [1, 0]]}, "sure", r"links not in 'possible' \(\[1, 0\]\)"),
    ({"possible": [[0, 0], [2, 1]], "sure": []}, "possible", r"link \[2, 1\] is outside"),
    ({"src": "le chat"}, "src", "expected a non-empty list of strings"),
    ({"sure": [[0, "0"]]}, "sure", "expected \\[i, j\\] with two integers"),
    ({"possible": None}, "possible", "expected a list"),
])
def test_malformed_gold_names_file_line_and_field(tmp_path, change, field, message):
    folder = _gold(tmp_path, GOOD, {**GOOD, "id": 2, **change})  # its own id
    with pytest.raises(DataFileError, match=message) as info:
        read_gold(folder, ("test",))
    assert (info.value.line, info.value.field) == (2, field)
    assert info.value.path.endswith("test.jsonl")


def test_missing_field_and_file(tmp_path):
    row = dict(GOOD)
    del row["possible"]
    with pytest.raises(DataFileError, match="line 1: field 'possible': missing field"):
        read_gold(_gold(tmp_path, row), ("test",))
    with pytest.raises(InputError, match="missing gold file for split 'validation'"):
        read_gold(_gold(tmp_path, GOOD), ("validation",))


def test_out_of_range_links_can_be_dropped_and_counted(tmp_path):
    bad = {**GOOD, "id": 2, "sure": [[0, 0], [5, 0]], "possible": [[0, 0], [5, 0], [1, 9], [1, 1]]}
    folder = _gold(tmp_path, GOOD, bad)
    gold, dropped = read_gold(folder, ("test",), out_of_range="drop")
    assert dropped == {"test": 2}  # (5, 0) in both lists counts once, and (1, 9)
    assert gold["test"][1].sure == {(0, 0)} and gold["test"][1].possible == {(0, 0), (1, 1)}
    with pytest.raises(InputError, match="out_of_range must be one of error, drop"):
        read_gold(folder, ("test",), out_of_range="clip")


def test_aer_is_the_ratio_of_summed_counts():
    """Two sentences: the corpus AER is 1 − (Σ|A∩S| + Σ|A∩P|) / (Σ|A| + Σ|S|), not the
    mean of the two sentence AERs."""
    one = link_counts({(0, 0), (1, 1)}, {(0, 0), (1, 1)}, {(0, 0), (1, 1)})  # perfect
    two = link_counts({(0, 1), (1, 0), (2, 2), (3, 3)}, {(0, 0), (1, 1)},
                      {(0, 0), (1, 1), (2, 2)})
    assert one == (2, 2, 2, 2) and two == (0, 1, 4, 2)
    sums = np.array([one, two]).sum(axis=0)
    assert float(AER(sums)) == pytest.approx(1 - (2 + 3) / (6 + 4))
    assert float(PRECISION(sums)) == pytest.approx(3 / 6) and float(RECALL(sums)) == 0.5
    assert float(AER(np.array(two))) == pytest.approx(1 - 1 / 6)
    est = corpus_bootstrap([one, two], AER, n_resamples=500)
    assert est.mean == pytest.approx(0.5)


def test_diagonal_baseline_on_the_hansards_test_set(shared_data):
    """Counted here with plain sets; PROVENANCE.md quotes about 0.55 for a diagonal."""
    gold, _ = read_gold(shared_data / "alignment" / "gold", ("test",))
    a_s = a_p = n_a = n_s = 0
    stats = []
    for p in gold["test"]:
        links = diagonal_links(len(p.src), len(p.tgt))
        assert len(links) == len(p.tgt)  # one link per target word
        a_s, a_p = a_s + len(links & p.sure), a_p + len(links & p.possible)
        n_a, n_s = n_a + len(links), n_s + len(p.sure)
        stats.append(link_counts(links, p.sure, p.possible))
    aer = 1 - (a_s + a_p) / (n_a + n_s)
    assert float(AER(np.sum(stats, axis=0))) == pytest.approx(aer, abs=1e-12)
    assert aer == pytest.approx(0.55, abs=0.02)


def test_links_from_scores():
    scores = torch.tensor([[0.1, 0.7, 0.7], [0.9, 0.0, 0.8]])  # (T = 2 targets, S = 3 sources)
    assert argmax_links(scores) == {(1, 0), (0, 1)}  # tie at row 0 -> earlier source
    assert threshold_links(scores, 1.0) == {(1, 0), (2, 0), (0, 1)}
    # fraction 0.9 cuts row 1 at 0.81 (0.8 falls out), 0.85 at 0.765 (0.8 stays)
    assert threshold_links(scores, 0.9) == {(1, 0), (2, 0), (0, 1)}
    assert threshold_links(scores, 0.85) == {(1, 0), (2, 0), (0, 1), (2, 1)}
    assert threshold_links(scores, 0.1) == {(1, 0), (2, 0), (0, 0), (0, 1), (2, 1)}
    assert threshold_links(torch.zeros(2, 3), 0.5) == set()  # no positive evidence, no link
    assert argmax_links(torch.empty(0, 3)) == set()
    with pytest.raises(InputError, match=r"in \(0, 1\]"):
        threshold_links(scores, 0.0)


def test_symmetrization():
    forward = {(0, 0), (1, 1), (2, 3)}
    reverse = {(0, 0), (1, 1), (1, 2), (3, 3)}
    assert intersect(forward, reverse) == {(0, 0), (1, 1)}
    # grow: (1, 2) neighbours (1, 1) and target 2 is unaligned -> in; (2, 3) neighbours
    # (1, 2) diagonally and source 2 is unaligned -> in; (3, 3) neighbours (2, 3): its
    # target 3 is aligned by then, but source 3 is not -> in
    assert grow_diag_final(forward, reverse, 4, 4) == {(0, 0), (1, 1), (1, 2), (2, 3), (3, 3)}
    # links of the union whose both words are already aligned never enter
    assert grow_diag_final({(0, 0), (1, 1)}, {(0, 0), (1, 1), (0, 1)}, 2, 2) == {(0, 0), (1, 1)}


def test_the_task_never_trains_on_a_gold_sentence_and_can_drop_bad_links(tmp_path, caplog):
    """A user's folder whose parallel corpus repeats a gold source sentence: that pair
    is left out of training (and counted); --gold-out-of-range drop reaches read_gold
    through the run config."""
    import logging

    from faithbench.benchmark.plan import RunConfig
    from faithbench.tasks.alignment import TASK

    root = tmp_path / "pair"
    root.mkdir()
    bad = {**GOOD, "id": 2, "possible": [[0, 0], [1, 1], [1, 7]]}
    _gold(root, GOOD, bad, split="test")
    _gold(root, GOOD, split="validation")
    (root / "parallel").mkdir()
    rows = [{"src": ["le", "chat"], "tgt": ["the", "cat"]}] + [
        {"src": ["un", f"mot{i}"], "tgt": ["a", f"word{i}"]} for i in range(6)]
    (root / "parallel" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = dataclasses.replace(TASK, held_out=2)
    config = RunConfig(data_dir=str(tmp_path), variant="pair")
    with pytest.raises(DataFileError, match=r"link \[1, 7\] is outside"):
        task.read(config.evaluation.task_options(0))
    config = dataclasses.replace(config, gold_out_of_range="drop")
    with caplog.at_level(logging.WARNING):
        _, dropped, training, held = task.read(config.evaluation.task_options(0))
    assert dropped == {"validation": 0, "test": 1}
    assert len(training) + len(held) == 6 and ("le", "chat") not in {s for s, _ in training}
    assert "left out 1 training pairs" in caplog.text and "dropped 1 gold links" in caplog.text
