"""Ground truth for explainers and metrics: the shortcut tasks' data (planted tokens,
labels, reliance splits), the oracles' scores, the meta-evaluation tables against
hand-made values, and `faithbench meta-eval` end to end (offline on the synthetic
task; on a BiLSTM that learned an SST-2 shortcut where ../shared/data is present)."""

import random
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau

from faithbench.benchmark import meta_eval
from faithbench.benchmark.cli import main
from faithbench.benchmark.core.api import Example
from faithbench.benchmark.core.records import read_jsonl
from faithbench.tasks import shortcut

FAST = ["--limit", "24", "--batch-size", "8", "--no-progress"]


def _sst(n: int, split: str) -> list[Example]:
    rng = random.Random(split)
    return [Example(f"{split}-{i}", tuple(f"w{rng.randrange(50)}" for _ in range(rng.randint(3, 9))),
                    rng.randrange(2)) for i in range(n)]


@pytest.mark.parametrize("kind", shortcut.KINDS)
def test_shortcut_data_plants_the_label_deciding_tokens(kind):
    splits = {"train": _sst(2000, "train"), "validation": _sst(300, "validation"),
              "test": _sst(200, "test")}
    out = shortcut.with_shortcuts(kind, splits)
    planted = [e for e in out["train"] if e.reference is not None]
    assert abs(len(planted) / 2000 - shortcut.RATE) < 0.03  # the share the protocol fixes
    size = 1 if kind == "single" else 2
    for name in ("train", "validation", "test", "test_agree", "test_contradict"):
        for e in (e for e in out[name] if e.reference is not None):
            marked = [t for t, r in zip(e.tokens, e.reference) if r]
            assert sorted(marked) == sorted(t for t in e.tokens if t in shortcut.TOKENS)
            assert len(marked) == size
            assert shortcut.shortcut_label(e.tokens, kind) == e.label  # the shortcut decides
    for name in ("test", "test_agree", "test_contradict"):
        assert all(e.reference is not None for e in out[name])
        assert [e.id for e in out[name]] == [e.id for e in splits["test"]]
    original = {e.id: e.label for e in splits["test"]}
    assert all(e.label == original[e.id] for e in out["test_agree"])
    assert all(e.label != original[e.id] for e in out["test_contradict"])
    assert out["test_clean"] == [e for e in splits["test"]]
    # without the shortcut, the sentence and its label are kept
    by_id = {e.id: e for e in splits["train"]}
    for e in (e for e in out["train"] if e.reference is None):
        assert e.label == by_id[e.id].label
        extra = [t for t in e.tokens if t in shortcut.TOKENS]
        # the pair task gives one of its two tokens to every other example: alone it says nothing
        assert len(extra) == (1 if kind == "pair" else 0)
    if kind == "pair":
        alone = [e for e in out["train"] if e.reference is None]
        for token in shortcut.TOKENS[:2]:  # SST-2: two labels
            with_token = [e.label for e in alone if token in e.tokens]
            assert 0.35 < np.mean(with_token) < 0.65
    assert shortcut.with_shortcuts(kind, splits) == out  # deterministic


def test_pair_order_decides_the_label():
    for label in (0, 1):
        for seed in range(20):
            tokens, ref = shortcut.plant(("a", "b", "c"), label, "pair", random.Random(seed))
            first = min(tokens.index(t) for t in shortcut.TOKENS if t in tokens)
            assert tokens[first] == shortcut.TOKENS[label]
            assert [tokens[i] for i, r in enumerate(ref) if r] == [
                shortcut.TOKENS[label], shortcut.TOKENS[1 - label]]


def test_oracles_put_the_truth_first_and_last():
    refs = [(False, True, False, True)]
    base = [[0.9, 0.1, 0.5, 0.3]]
    gt = meta_eval.oracle_scores(meta_eval.GROUND_TRUTH, refs, base)[0]
    inv = meta_eval.oracle_scores(meta_eval.INVERTED, refs, base)[0]
    assert sorted(range(4), key=lambda i: -gt[i])[:2] == [3, 1]
    assert sorted(range(4), key=lambda i: -inv[i])[2:] == [3, 1]
    assert sorted(range(4), key=lambda i: -gt[i])[2:] == [0, 2]  # the rest: random's order


def _values(tmp_path, table: dict, seeds=(0, 1), n=5, erasers=True):
    """A values file where explainer e has the per-example values ``table[metric][e]``
    (a constant, or a list of n) on every seed."""
    path = tmp_path / "values.jsonl"
    for seed in seeds:
        model = meta_eval.Model("t@1", seed, "c", "all")
        for metric, by_explainer in table.items():
            direction = "lower" if metric.startswith(("mean_rank", "suff")) else "higher"
            for e, v in by_explainer.items():
                values = v if isinstance(v, list) else [v] * n
                meta_eval.write_values(path, model, e, metric, direction,
                                       [f"x{i}" for i in range(n)], values)
    return meta_eval.Values.read(path)


def test_metric_table_verdicts_tau_and_eraser_flips(tmp_path):
    truth = {"ground_truth": 1.0, "a": 0.8, "b": 0.5, "random": 0.2, "inverted_ground_truth": 0.0}
    good = {"ground_truth": 0.9, "a": 0.7, "b": 0.4, "random": 0.1, "inverted_ground_truth": -0.2}
    # the mask eraser swaps a and b, and ranks the truth below a
    masked = {"ground_truth": 0.5, "a": 0.6, "b": 0.7, "random": 0.1, "inverted_ground_truth": -0.2}
    values = _values(tmp_path, {"r_precision@2": truth, "m[eraser=delete]@1": good,
                                "m[eraser=mask]@1": masked})
    rows = {r["metric"]: r for r in meta_eval.metric_table(values)}
    d, m = rows["m[eraser=delete]@1"], rows["m[eraser=mask]@1"]
    assert d["ground_truth_first"]["verdict"] == "yes"
    assert d["ground_truth_first"]["against"] == "a"
    assert d["ground_truth_first"]["mean"] == pytest.approx(0.2)
    assert d["inverted_last"]["verdict"] == "yes" and d["tau"] == pytest.approx(1.0)
    assert m["ground_truth_first"]["verdict"] == "no"
    assert m["ground_truth_first"]["mean"] == pytest.approx(-0.2)  # 0.5 - b's 0.7
    order = list(truth)
    expected_tau = kendalltau([truth[e] for e in order], [masked[e] for e in order]).statistic
    assert m["tau"] == pytest.approx(expected_tau)
    flips = sum((good[x] - good[y]) * (masked[x] - masked[y]) < 0
                for x, y in combinations(order, 2)) / 10
    assert d["eraser_flips"] == pytest.approx(flips) == pytest.approx(0.3)
    assert m["rank_of_truth"] == 3


def test_a_lower_is_better_metric_is_read_the_right_way(tmp_path):
    truth = {"ground_truth": 1.0, "a": 0.5, "inverted_ground_truth": 0.0}
    suff = {"ground_truth": 0.1, "a": 0.2, "inverted_ground_truth": 0.4}
    rows = meta_eval.metric_table(_values(tmp_path, {"r_precision@2": truth, "suff@1": suff}))
    assert rows[0]["ground_truth_first"]["verdict"] == "yes"
    assert rows[0]["inverted_last"]["verdict"] == "yes" and rows[0]["tau"] == pytest.approx(1)


def test_a_gap_within_noise_is_a_tie(tmp_path):
    rng = np.random.default_rng(0)
    noise = lambda: list(rng.normal(0, 1, 40))
    truth = {"ground_truth": 1.0, "a": 0.5, "inverted_ground_truth": 0.0}
    values = _values(tmp_path, {"r_precision@2": truth,
                                "m@1": {"ground_truth": noise(), "a": noise(),
                                        "inverted_ground_truth": noise()}}, n=40)
    row = meta_eval.metric_table(values)[0]
    assert row["ground_truth_first"]["verdict"] == "tie"


def test_explainer_table_interval_is_the_seed_interval(tmp_path):
    per_seed = {0: [1.0, 0.0, 1.0, 1.0], 1: [0.0, 0.0, 1.0, 1.0]}
    path = tmp_path / "values.jsonl"
    for seed, v in per_seed.items():
        model = meta_eval.Model("t@1", seed, "c", "all")
        meta_eval.write_values(path, model, "g", "r_precision@2", "higher", list("abcd"), v)
    row = meta_eval.explainer_table(meta_eval.Values.read(path))[0]
    from faithbench.benchmark.core.stats import seed_estimate

    e = seed_estimate([per_seed[0], per_seed[1]])
    assert row["r_precision"]["mean"] == pytest.approx(0.625)
    # the seed interval, cut to precision's range [0, 1]
    assert (row["r_precision"]["ci_low"], row["r_precision"]["ci_high"]) == (
        max(0.0, e.ci_low), min(1.0, e.ci_high))
    assert e.ci_low < 0 and e.ci_high > 1  # three-seed t intervals do leave it


def test_meta_eval_on_synthetic_end_to_end_and_resumes(tmp_path, capsys, one_thread):
    out = tmp_path / "out"
    args = ["meta-eval", "--explainers", "occlusion", "random", "--metrics", "aopc_morf",
            "aopc_morf[eraser=mask]", "sufficiency", "--out", str(out), *FAST]
    assert main(args) == 0
    text = capsys.readouterr().out
    path = out / "meta_eval" / "values.jsonl"
    rows = read_jsonl(path)
    values = [r for r in rows if r["kind"] == "values"]
    # 4 explainers (2 + the oracles) x (3 metrics + 2 truth measures)
    assert len(values) == 4 * 5 and len({r["key"] for r in values}) == 20
    by = {(r["explainer"], r["metric"].split("[")[0].split("@")[0]): r for r in values}
    # the oracles against the truth, by construction
    assert set(by[("ground_truth", "r_precision")]["values"]) == {1.0}
    assert set(by[("inverted_ground_truth", "r_precision")]["values"]) == {0.0}
    # mean rank: |R| for the truth first, n for the truth last (one example at a time)
    from faithbench.tasks.synthetic import generate

    examples = generate("test", 24, 0)
    assert by[("ground_truth", "mean_rank")]["values"] == [float(sum(e.reference))
                                                           for e in examples]
    assert by[("inverted_ground_truth", "mean_rank")]["values"] == [float(len(e.tokens))
                                                                    for e in examples]
    assert "precision@k" in text and "· 1st " in text and "occlusion" in text
    reliance = next(r for r in rows if r["kind"] == "reliance")
    assert reliance["n"] == 24 and 0 <= reliance["flip_when_deleted"] <= 1
    # resumed: nothing computed again, nothing duplicated
    assert main(args) == 0
    assert len(read_jsonl(path)) == len(rows)
    # interrupted after 7 rows: the rest is computed, the first 7 are kept as they were
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines()[:7])
                    + '{"kind": "val')
    assert main(args) == 0
    again = read_jsonl(path)
    assert len(again) == len(rows)
    first = {r["key"]: r.get("values") for r in rows}
    assert {r["key"] for r in again} == set(first)
    for r in again:  # recomputed rows: the same up to float32 rounding of other batches
        assert r.get("values") == pytest.approx(first[r["key"]], abs=1e-6)
    # tables from the file alone
    capsys.readouterr()
    assert main(["meta-eval", "--tables-only", "--out", str(out)]) == 0
    assert capsys.readouterr().out.split("values:")[0] == text.split("values:")[0]


def test_meta_eval_refuses_a_task_without_ground_truth(tmp_path, capsys):
    for task in ("alignment", "sentiment"):  # none, or human rationales: not what a model used
        assert main(["meta-eval", "--tasks", task, "--out", str(tmp_path), *FAST]) == 2
        assert "planted ground truth" in capsys.readouterr().err


def test_tables_only_without_values_names_the_file(tmp_path, capsys):
    assert main(["meta-eval", "--tables-only", "--out", str(tmp_path)]) == 2
    assert "values.jsonl" in capsys.readouterr().err


def test_bilstm_learns_the_sst2_shortcut_and_the_truth_is_found(shared_data, tmp_path, capsys,
                                                                one_thread):
    out = tmp_path / "out"
    assert main(["meta-eval", "--tasks", "shortcut_single", "--data-dir", str(shared_data),
                 "--train-limit", "2000", "--epochs", "2", "--explainers", "gradient_x_input",
                 "random", "--metrics", "comprehensiveness", "--out", str(out), *FAST]) == 0
    rows = read_jsonl(out / "meta_eval" / "values.jsonl")
    reliance = next(r for r in rows if r["kind"] == "reliance")
    # the model relies on the shortcut: right by the shortcut even against the sentence
    assert reliance["accuracy"]["test_contradict"] > 0.9
    assert reliance["accuracy"]["test"] > 0.9 and reliance["flip_when_deleted"] > 0.2
    precision = {r["explainer"].split("[")[0].split("@")[0]: np.mean(r["values"]) for r in rows
                 if r["kind"] == "values" and r["metric"].startswith("r_precision")}
    assert precision["ground_truth"] == 1.0 and precision["inverted_ground_truth"] == 0.0
    assert precision["gradient_x_input"] > precision["random"]


def _record(seed, metric, explainer, mean, direction="higher", family="faithfulness"):
    return {"record_type": "result", "task": "t@1", "model_seed": seed, "metric": metric,
            "explainer": explainer, "direction": direction, "family": family,
            "estimate": {"mean": mean}}


def test_metric_agreement_is_kendall_tau_per_seed_with_a_t_interval():
    means = {  # seed -> metric -> explainer -> mean
        0: {"a@1": [0.1, 0.2, 0.3, 0.4], "b@1": [0.4, 0.3, 0.2, 0.1], "c@1": [1, 3, 2, 4]},
        1: {"a@1": [0.1, 0.3, 0.2, 0.4], "b@1": [0.4, 0.3, 0.2, 0.1], "c@1": [1, 2, 3, 4]},
    }
    directions = {"a@1": "higher", "b@1": "lower", "c@1": "higher"}
    records = [_record(s, m, f"e{i}", v, directions[m])
               for s, by in means.items() for m, vs in by.items() for i, v in enumerate(vs)]
    records.append(_record(0, "r_precision@2", "e0", 0.5, family="plausibility"))  # not ranked
    rows = {(r["a"], r["b"]): r for r in meta_eval.metric_agreement(records)}
    assert set(rows) == {("a@1", "b@1"), ("a@1", "c@1"), ("b@1", "c@1")}
    # b is lower-is-better: its reversed values rank the explainers as a does on seed 0
    ab = rows[("a@1", "b@1")]
    assert ab["tau_seeds"] == pytest.approx([1.0, kendalltau([1, 3, 2, 4], [1, 2, 3, 4]).statistic])
    ac = rows[("a@1", "c@1")]
    expected = [kendalltau(means[s]["a@1"], means[s]["c@1"]).statistic for s in (0, 1)]
    assert ac["tau_seeds"] == pytest.approx(expected)
    from scipy.stats import t

    half = t.ppf(0.975, 1) * np.std(expected, ddof=1) / np.sqrt(2)
    assert ac["mean"] == pytest.approx(np.mean(expected))
    assert ac["ci_low"] == pytest.approx(max(-1, np.mean(expected) - half))
    assert ac["ci_high"] == pytest.approx(min(1, np.mean(expected) + half))


def test_metric_agreement_verb(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    from faithbench.benchmark.core.records import append_jsonl

    for s in (0, 1, 2):
        for m, vs in {"a@1": [1, 2, 3], "b@1": [1, 3, 2]}.items():
            for i, v in enumerate(vs):
                append_jsonl(run / "results.jsonl", _record(s, m, f"e{i}", v + 0.01 * s))
    assert main(["meta-eval", "--metric-agreement", str(run)]) == 0
    out = capsys.readouterr().out
    assert "a / b" in out and "0.33" in out and "0.33, 0.33, 0.33" in out
    assert main(["meta-eval", "--metric-agreement", str(tmp_path / "none")]) == 2
    assert "results.jsonl" in capsys.readouterr().err


def test_the_site_draws_the_meta_evaluation(tmp_path, capsys):
    truth = {"ground_truth": 1.0, "a": 0.5, "inverted_ground_truth": 0.0}
    _values(tmp_path, {"r_precision@2": truth, "m@1": truth})
    meta_eval.write_reliance(tmp_path / "values.jsonl", meta_eval.Model("t@1", 0, "c", "all"),
                             {"accuracy": {"test": 0.99}, "scored_accuracy": 0.99,
                              "flip_when_deleted": 0.5, "n": 5})
    site = tmp_path / "site"
    assert main(["site", "--meta-eval", str(tmp_path / "values.jsonl"), "--out", str(site)]) == 0
    page = (site / "meta-eval.html").read_text()
    assert page.count("<table") == 3 and "inverted_ground_truth" in page and "0.990" in page
    assert 'href="meta-eval.html"' in (site / "index.html").read_text()
    assert main(["site", "--meta-eval", str(tmp_path / "nothing"), "--out", str(site)]) == 2


def test_a_plugin_is_scored_against_the_truth_and_a_failing_one_is_reported(tmp_path, capsys,
                                                                             one_thread):
    template = str(Path(__file__).parent.parent / "submissions" / "TEMPLATE.py")
    broken = str(Path(__file__).parent / "plugins" / "raises_in_explain.py")
    out = tmp_path / "out"
    code = main(["meta-eval", "--explainers", template, broken, "--metrics", "aopc_morf",
                 "--out", str(out), "--limit", "8", "--no-progress"])
    assert code == 1  # a plugin failed; the rest was computed
    assert "FAILED" in capsys.readouterr().err
    rows = read_jsonl(out / "meta_eval" / "values.jsonl")
    explainers = {r["explainer"].split("@")[0].split("[")[0] for r in rows if r["kind"] == "values"}
    assert explainers == {"my_explainer", "ground_truth", "inverted_ground_truth"}
    assert [f["explainer"] for f in read_jsonl(out / "failures.jsonl")] == ["broken_raises@1"]


def test_a_model_that_ignores_its_ground_truth_is_left_out(tmp_path):
    """The protocol's condition: a model not right on (nearly) every example whose label
    the planted tokens decide has no ground truth; its values leave every table."""
    truth = {"ground_truth": 1.0, "a": 0.5, "inverted_ground_truth": 0.0}
    _values(tmp_path, {"r_precision@2": truth, "m@1": truth}, seeds=(0, 1))
    path = tmp_path / "values.jsonl"
    for seed, acc in ((0, 0.99), (1, 0.6)):
        meta_eval.write_reliance(path, meta_eval.Model("t@1", seed, "c", "all"),
                                 {"accuracy": {}, "scored_accuracy": acc,
                                  "flip_when_deleted": 0.5, "n": 5})
    values = meta_eval.Values.read(path)
    assert [r["relies"] for r in meta_eval.reliance_table(values)] == [True, False]
    assert meta_eval.explainer_table(values)[0]["seeds"] == [0]
    assert meta_eval.metric_table(values)[0]["seeds"] == [0]
    assert "no: left out" in meta_eval.render(values, tables=["reliance"], captions=False)


def test_oracles_survive_words_summed_from_pieces():
    """On a subword model a metric sums a word's pieces: a long word of ordinary pieces
    must still rank below the truth (it did not when the oracle added 1 to random scores
    in [0, 1): three pieces could outscore a two-piece shortcut word)."""
    import torch

    from faithbench.benchmark.core.api import Batch, MetricInput
    from faithbench.metrics.plausibility import r_precision

    # words: 0 = pieces 0-1 (the shortcut word), 1 = pieces 2-5 (a four-piece word), 2 = piece 6
    ref = (True, True, False, False, False, False, False)
    base = [[0.0, 0.0, 0.99, 0.99, 0.99, 0.99, 0.5]]
    words = torch.tensor([[0, 0, 1, 1, 1, 1, 2]])
    batch = Batch(torch.arange(5, 12).unsqueeze(0), torch.ones(1, 7, dtype=torch.bool), ("x",),
                  words=words)
    for name, expected in ((meta_eval.GROUND_TRUTH, 1.0), (meta_eval.INVERTED, 0.0)):
        scores = torch.tensor(meta_eval.oracle_scores(name, [ref], base))
        inp = MetricInput(batch, scores, torch.tensor([0]), torch.full((1, 2), 0.5), None,
                          torch.tensor([ref]))
        assert r_precision(inp, granularity=None).item() == expected
    gt = meta_eval.oracle_scores(meta_eval.GROUND_TRUTH, [ref], base)[0]
    assert sum(gt[:2]) > sum(gt[2:6]) > gt[6]  # summed: the truth, then the rest as random
