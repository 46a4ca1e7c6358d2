"""Explainer agreement: Kendall τ-b and top-k overlap against hand-counted answers,
undefined examples counted (never zero), the record round trip, and the CLI verb
reusing cached explanations."""

import math
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from faithbench.benchmark.cli import main
from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.benchmark.core.records import (
    AgreementRecord,
    append_jsonl,
    read_agreements,
    read_jsonl,
)
from faithbench.metrics.agreement import agreement_matrix, kendall_per_instance, top_k_overlap

PLUGINS = Path(__file__).parent / "plugins"
FAST = ["--limit", "16", "--batch-size", "8", "--no-progress"]


def pair_counts(x, y):
    """(concordant, discordant, tied in x, tied in y, pairs) by brute force over pairs."""
    c = d = tx = ty = 0
    for i, j in combinations(range(len(x)), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        tx += dx == 0
        ty += dy == 0
        if dx * dy > 0:
            c += 1
        elif dx * dy < 0:
            d += 1
    return c, d, tx, ty, len(x) * (len(x) - 1) // 2


def test_kendall_tau_b_with_ties_matches_hand_count():
    x, y = [1, 2, 2, 3, 3], [2, 1, 2, 3, 4]
    # pairs (i, j): (0,1) D; (0,2) tied in y; (1,2) and (3,4) tied in x; the other six C
    assert pair_counts(x, y) == (6, 1, 2, 1, 10)
    expected = (6 - 1) / math.sqrt((10 - 2) * (10 - 1))  # 5 / sqrt(72) = 0.589256...
    # a pair tied in both vectors: (0,1) tied in x and y, (0,2), (1,2) discordant
    u, v = [1, 1, 2], [5, 5, 0]
    assert pair_counts(u, v) == (0, 2, 1, 1, 3)
    taus, pvalues = kendall_per_instance([x, u], [y, v])
    assert taus[0] == pytest.approx(expected, abs=1e-12)
    assert taus[1] == pytest.approx(-2 / math.sqrt((3 - 1) * (3 - 1)), abs=1e-12)  # -1
    # p-values from the normal approximation with Kendall's tie-corrected variance of
    # S = C - D (ties in both vectors), worked by hand: x has two tied pairs, y one
    # (x): var = (5·4·15 − 2·18 − 18) / 18 + (4 · 2) / (2·5·4) = 13.8667, z = 5 / √var;
    # (u, v): one tied pair each, var = (3·2·11 − 18 − 18) / 18 + (2 · 2) / (2·3·2) = 2
    var_x = (5 * 4 * 15 - 2 * 18 - 18) / 18 + (4 * 2) / (2 * 5 * 4)
    var_u = (3 * 2 * 11 - 18 - 18) / 18 + (2 * 2) / (2 * 3 * 2)
    assert var_u == pytest.approx(2.0)
    assert pvalues[0] == pytest.approx(math.erfc(5 / math.sqrt(var_x) / math.sqrt(2)), abs=1e-12)
    assert pvalues[1] == pytest.approx(math.erfc(2 / math.sqrt(var_u) / math.sqrt(2)), abs=1e-12)


def test_undefined_tau_is_excluded_and_counted_never_zero():
    a = [[1.0, 2.0, 3.0], [0.5, 0.5, 0.5], [7.0], [3.0, 1.0, 2.0]]
    b = [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [7.0], [4.0, 4.0, 4.0]]  # 2nd: a constant, 4th: b
    taus, pvalues = kendall_per_instance(a, b)
    assert taus[0] == pytest.approx(1.0)
    assert np.isnan(taus[1:]).all() and np.isnan(pvalues[1:]).all()
    [row] = agreement_matrix({"a": a, "b": b})
    assert (row["n"], row["n_undefined"]) == (4, 3)
    assert row["tau_mean"] == pytest.approx(1.0)  # over the one defined example, not (1+0+0+0)/4
    assert row["tau_sd"] is None  # one defined value has no sample sd
    assert row["topk_overlap_mean"] is not None  # top-k is defined for every example
    [none] = agreement_matrix({"a": [[1.0, 1.0]], "b": [[1.0, 2.0]]})
    assert none["n_undefined"] == 1
    assert none["tau_mean"] is None and none["tau_ci_low"] is None
    assert none["share_p_le_0_05"] is None


def test_top_k_overlap_breaks_ties_by_position():
    # n = 6, k = ceil(0.5 * 6) = 3. a: position 1, then the tied 0.5s at 0, 2 (not 3, 5)
    a = [0.5, 0.9, 0.5, 0.5, 0.1, 0.5]
    b = [0.0, 0.9, 0.2, 0.8, 0.1, 0.7]  # top 3 = {1, 3, 5}
    assert top_k_overlap([a], [b], k_frac=0.5).tolist() == pytest.approx([1 / 3])
    # k in exact arithmetic: ceil(0.3 * 10) = 3 (floating point would give 4 and 3/4)
    c = [10.0, 9, 8, 7, 6, 5, 4, 3, 2, 1]  # top 3 = {0, 1, 2}
    d = [10.0, 9, 0, 8, 7, 6, 5, 4, 3, 2]  # top 3 = {0, 1, 3}
    assert top_k_overlap([c], [d], k_frac=0.3).tolist() == pytest.approx([2 / 3])
    assert top_k_overlap([[1.0]], [[2.0]], k_frac=0.2).tolist() == [1.0]  # k clamped to 1


def test_matrix_self_agreement_and_reversal():
    rng = np.random.default_rng(0)
    scores = [rng.normal(size=n).tolist() for n in (5, 8, 12, 3, 20, 7)]
    rows = agreement_matrix({"g": scores, "same": [list(s) for s in scores],
                             "rev": [[-v for v in s] for s in scores]}, k_frac=0.2)
    assert [(r["a"], r["b"]) for r in rows] == [("g", "same"), ("g", "rev"), ("same", "rev")]
    same, rev = rows[0], rows[1]
    assert (same["tau_mean"], same["tau_ci_low"], same["tau_ci_high"]) == pytest.approx((1, 1, 1))
    assert same["topk_overlap_mean"] == pytest.approx(1.0) and same["n_undefined"] == 0
    assert (rev["tau_mean"], rev["tau_ci_low"], rev["tau_ci_high"]) == pytest.approx((-1, -1, -1))
    assert rev["tau_sd"] == pytest.approx(0.0) and rev["n"] == 6 and rev["k_frac"] == 0.2


def test_bad_input_is_named():
    with pytest.raises(InputError, match="example 1"):
        kendall_per_instance([[1.0, 2.0], [1.0, 2.0]], [[1.0, 2.0], [1.0]])
    with pytest.raises(InputError, match="'x' and 'y'"):
        agreement_matrix({"x": [[1.0, 2.0]], "y": [[1.0, float("nan")]]})
    with pytest.raises(InputError, match="k_frac"):
        top_k_overlap([[1.0]], [[1.0]], k_frac=0.0)


def test_agreement_record_round_trips(tmp_path):
    rows = agreement_matrix({"a": [[1.0, 2.0, 3.0]], "b": [[3.0, 2.0, 1.0]]})
    record = AgreementRecord(key="k1", task="synthetic@1", model_seed=0, split="test",
                             explainers=["a@1", "b@1"], rows=rows, provenance={"checkpoint": "c"})
    path = tmp_path / "agreement.jsonl"
    append_jsonl(path, record.as_dict())
    append_jsonl(path, {**record.as_dict(), "from_a_later_version": 1})  # unknown field: ignored
    assert read_agreements(path) == [record, record]
    assert read_jsonl(path)[0]["record_type"] == "agreement"
    broken = {k: v for k, v in record.as_dict().items() if k != "rows"}
    with pytest.raises(DataFileError, match="field 'rows'"):
        AgreementRecord.from_dict(broken)


def test_cli_agreement_reuses_cached_explanations(tmp_path, synthetic_ready, capsys):
    argv = ["agreement", "--task", "synthetic", *FAST, "--out", str(tmp_path),
            "--explainers", "gradient", "occlusion", "random"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "mean Kendall tau-b" in out and "gradient / occlusion" in out
    matrix = out.split("\n\n")[0].splitlines()
    assert sum(line.startswith(("gradient", "occlusion", "random")) for line in matrix) == 3
    [record] = read_agreements(tmp_path / "agreement.jsonl")
    assert [(r["a"], r["b"]) for r in record.rows] == [
        ("gradient", "occlusion"), ("gradient", "random"), ("occlusion", "random")]
    assert all(r["n"] == 16 for r in record.rows)
    assert record.explainers[0].startswith("gradient[") and record.task.startswith("synthetic")
    files = sorted((tmp_path / "explanations").glob("*.jsonl"))
    assert len(files) == 3
    mtimes = [f.stat().st_mtime_ns for f in files]
    assert main(argv) == 0  # second call: the cached explanations, nothing explained again
    assert [f.stat().st_mtime_ns for f in files] == mtimes
    first, second = read_agreements(tmp_path / "agreement.jsonl")
    assert second.rows == first.rows and second.key == first.key


def test_cli_agreement_failed_explainer_is_recorded_and_exits_1(tmp_path, synthetic_ready,
                                                                capsys):
    broken = str(PLUGINS / "raises_in_explain.py")
    code = main(["agreement", "--task", "synthetic", *FAST, "--out", str(tmp_path),
                 "--explainers", "gradient", broken, "random"])
    assert code == 1
    assert "boom" in capsys.readouterr().err
    [failure] = read_jsonl(tmp_path / "failures.jsonl")
    assert failure["explainer"] == broken and failure["record_type"] == "failure"
    [record] = read_agreements(tmp_path / "agreement.jsonl")
    assert [(r["a"], r["b"]) for r in record.rows] == [("gradient", "random")]
    assert record.provenance["failed"] == [broken]


def test_cli_agreement_bad_k_frac_exits_2(tmp_path, capsys):
    assert main(["agreement", "--task", "synthetic", "--k-frac", "1.5", "--out",
                 str(tmp_path), "--no-progress"]) == 2
    assert "k_frac" in capsys.readouterr().err
