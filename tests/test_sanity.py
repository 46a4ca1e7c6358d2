"""The sanity checks (Adebayo et al. 2018), family "sanity": an explainer that ignores
the model scores ρ = 1; gradient's ρ recomputed by hand (autograd on a copy
re-initialized here, module by module); one group re-initialized leaves every other
weight and the evaluated model as they were; the label permutation of data
randomization; and `faithbench run` / `faithbench leaderboard` end to end.

The CI of every sanity record is the run's per-example percentile bootstrap (no new
interval): ``test_a_run_writes_sanity_records_and_the_leaderboard_shows_them`` checks it
against the bootstrap written out."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from faithbench import metrics as metric_registry
from faithbench.benchmark.cli import main
from faithbench.benchmark.core import randomize
from faithbench.benchmark.core.api import Example, TaskOptions
from faithbench.benchmark.core.errors import InputError, PluginError
from faithbench.benchmark.core.records import read_jsonl, read_results
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import run
from faithbench.benchmark.session import EvaluationSession
from faithbench.metrics.sanity import PermutedLabels, similarity
from faithbench.submissions import get_explainer
from faithbench.tasks.synthetic import TASK as SYNTHETIC

pytestmark = pytest.mark.usefixtures("one_thread")
FAST = {"limit": 24, "batch_size": 8, "progress": False}
POSITIONAL = '''
import torch
from faithbench.api import ExplainerSpec


class Positional:
    """score_t = t: a fixed function of the position, blind to the model."""

    spec = ExplainerSpec(name="positional", version="1")

    def explain(self, model, batch, target, *, rng):
        return torch.arange(batch.ids.shape[1], dtype=torch.float32).expand(len(batch), -1)


EXPLAINER = Positional()
'''


def weights_hash(model: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def session_of(prepared, tmp_path, **change) -> EvaluationSession:
    config = RunConfig(out=str(tmp_path), **{**FAST, **change})
    return EvaluationSession(prepared, config, seed=0, task=SYNTHETIC, options=TaskOptions())


def scored(session, metric: str, explainer):
    return session.score(metric_registry.resolve(metric), session.explain(explainer).scores,
                         explainer=explainer)


# -- (a) an explainer blind to the model ---------------------------------------------------


def test_an_explainer_that_ignores_the_model_scores_rho_1_in_its_worker(tmp_path,
                                                                        synthetic_ready):
    """score_t = t, loaded as a plugin (so it runs in a worker on the randomized copy
    too): the same ranking on both models, ρ = 1 exactly for every example."""
    plugin = tmp_path / "positional.py"
    plugin.write_text(POSITIONAL)
    summary = run(RunConfig(out=str(tmp_path / "out"), explainers=(str(plugin),),
                            metrics=("randomization_cascading",), **FAST))
    assert summary.exit_code == 0, summary.failures
    (record,) = read_results(tmp_path / "out" / "results.jsonl")
    assert record.metric == "randomization_cascading[absolute=True;depth=all]@1"
    assert record.family == "sanity" and record.direction == "lower"
    rows = read_jsonl(tmp_path / "out" / record.per_example_file)
    assert len(rows) == record.estimate.n == 24 and record.estimate.undefined == 0
    assert [r["value"] for r in rows] == [1.0] * 24
    assert record.estimate.mean == 1.0


# -- (b) gradient, recomputed by hand --------------------------------------------------------


def hand_randomized(model, seed: int):
    """Every group of the BiLSTM classifier re-initialized here, module by module, each
    from its own seed (``group_seed``), in the order the modules are listed."""
    twin = copy.deepcopy(model)
    for name, parts in (("out", [twin.out]), ("attention", [twin.attn.key, twin.attn.v]),
                        ("encoder", [twin.encoder.rnn]), ("embedding", [twin.embedding])):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(randomize.group_seed(seed, name))
            for module in parts:
                module.reset_parameters()
    return twin.eval()


def hand_gradient(model, prepared, examples, targets) -> list[list[float]]:
    """‖d logit_ŷ / d e_t‖₂ per token, one example at a time."""
    out = []
    for example, target in zip(examples, targets):
        batch, _, _ = next(iter(prepared.batches([example], 1)))
        embeds = model.embed(batch).detach().requires_grad_(True)
        logit = model.logits_from_embeddings(embeds, batch)[0, int(target)]
        (grad,) = torch.autograd.grad(logit, embeds)
        out.append(grad[0].norm(dim=-1).tolist())
    return out


def test_gradient_changes_under_full_randomization_as_computed_by_hand(tmp_path,
                                                                       synthetic_ready):
    session = session_of(synthetic_ready, tmp_path)
    got = scored(session, "randomization_cascading", get_explainer("gradient"))
    model = synthetic_ready.model.eval()
    targets = session.targets  # the trained model's predictions, on both models
    assert targets.tolist() == [int(model.logits(b).argmax()) for b, _, _ in
                                synthetic_ready.batches(session.examples, 1)]
    before = hand_gradient(model, synthetic_ready, session.examples, targets)
    after = hand_gradient(hand_randomized(model, seed=0), synthetic_ready, session.examples,
                          targets)
    want = [spearmanr(np.abs(a), np.abs(b))[0] for a, b in zip(before, after)]
    assert got.values.tolist() == pytest.approx(want, rel=1e-6)
    assert all(v < 1 for v in got.values) and np.mean(got.values) < 0.5


def test_the_cascade_stage_by_stage(tmp_path, synthetic_ready):
    """Attention weights are computed below the output layer: re-initializing ``out``
    (depth 1) leaves them exactly as they were (ρ = 1), re-initializing the attention too
    (depth 2) does not. Depth 4 is every group of the BiLSTM, i.e. depth=all; depth 1
    is the independent randomization of ``out`` (the same draw)."""
    session = session_of(synthetic_ready, tmp_path)
    attention, gradient = get_explainer("attention"), get_explainer("gradient")
    assert scored(session, "randomization_cascading[depth=1]", attention).values.tolist() == [
        1.0] * 24
    assert (scored(session, "randomization_cascading[depth=2]", attention).values < 1).all()
    full = scored(session, "randomization_cascading", gradient).values.tolist()
    assert scored(session, "randomization_cascading[depth=4]", gradient).values.tolist() == full
    one = scored(session, "randomization_cascading[depth=1]", gradient).values.tolist()
    assert scored(session, "randomization_independent[layer=out]", gradient
                  ).values.tolist() == one != full


def test_similarity_is_spearman_of_absolute_or_signed_scores():
    rng = np.random.default_rng(0)
    for _ in range(50):
        a, b = rng.normal(size=9).round(1), rng.normal(size=9).round(1)  # ties included
        assert similarity(a, b, absolute=True) == pytest.approx(
            spearmanr(np.abs(a), np.abs(b))[0], abs=1e-12)
        assert similarity(a, b, absolute=False) == pytest.approx(spearmanr(a, b)[0], abs=1e-12)
    assert similarity([3.0, 1.0, 2.0], [3.0, 1.0, 2.0], absolute=True) == 1.0  # exactly
    assert np.isnan(similarity([1.0], [2.0], absolute=True))  # one token: nothing to rank


# -- (c) independent randomization touches one group only ------------------------------------


def test_one_group_is_reinitialized_and_nothing_else_is_touched(tmp_path, synthetic_ready):
    model = synthetic_ready.model
    before = weights_hash(model)
    session = session_of(synthetic_ready, tmp_path)
    got = scored(session, "randomization_independent[layer=attention]", get_explainer("gradient"))
    assert weights_hash(model) == before  # the evaluated model is untouched
    assert len(got.values) == 24 and set(got.flags) == {"prediction_changed",
                                                        "one_side_constant"}
    twin = randomize.randomized(model, ["attention"], seed=0)
    before_scores = hand_gradient(model, synthetic_ready, session.examples, session.targets)
    after = hand_gradient(twin, synthetic_ready, session.examples, session.targets)
    assert got.values.tolist() == pytest.approx(
        [spearmanr(a, b)[0] for a, b in zip(before_scores, after)], rel=1e-6)
    assert weights_hash(model) == before
    mine = {k: v for k, v in model.state_dict().items()}
    for key, value in twin.state_dict().items():
        if key.startswith("attn."):
            assert not torch.equal(value, mine[key]), key
        else:
            assert torch.equal(value, mine[key]), key  # bit-identical
    # a group gets the same fresh weights alone and in a cascade (so the curve is one draw)
    cascade = randomize.randomized(model, ["out", "attention"], seed=0)
    assert torch.equal(cascade.attn.v.weight, twin.attn.v.weight)
    assert not torch.equal(cascade.attn.v.weight,
                           randomize.randomized(model, ["attention"], seed=1).attn.v.weight)
    assert torch.equal(cascade.encoder.rnn.weight_hh_l0, model.encoder.rnn.weight_hh_l0)
    # the global generator is neither reseeded nor advanced
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    randomize.randomized(model, ["encoder"], seed=0)
    assert torch.equal(torch.rand(3), expected)


def test_every_task_model_lists_groups_output_first(synthetic_ready):
    from faithbench.benchmark.core.models.pair_classifier import PairAttentionClassifier, PairConfig
    from faithbench.benchmark.core.models.seq2seq import AttentionSeq2Seq, Seq2SeqConfig

    assert randomize.group_names(synthetic_ready.model) == ["out", "attention", "encoder",
                                                            "embedding"]
    pair = PairAttentionClassifier(PairConfig(vocab_size=30, num_classes=3, embed_dim=8,
                                              hidden=8, attn_dim=8, mlp_dim=8,
                                              shared_encoder=True))
    assert randomize.group_names(pair) == ["out", "hidden", "attention", "encoder", "embedding"]
    twin = randomize.randomized(pair, randomize.group_names(pair), seed=0)
    assert twin.premise_encoder is twin.hypothesis_encoder  # still shared
    assert all(not torch.equal(a, b) for a, b in zip(pair.parameters(), twin.parameters())
               if a.dim() > 1)
    seq = AttentionSeq2Seq(Seq2SeqConfig(src_vocab_size=30, tgt_vocab_size=20, embed_dim=8,
                                         hidden=8, attn_dim=8))
    assert randomize.group_names(seq) == ["out", "readout", "attention", "decoder", "encoder",
                                          "embedding"]
    grouped = {id(p) for _, mods in randomize.layer_groups(seq) for m in mods
               for p in m.parameters()}
    assert grouped == {id(p) for p in seq.parameters()}  # every weight is in some group
    with pytest.raises(InputError, match="no layer group 'decoder'.*out, attention"):
        randomize.randomized(synthetic_ready.model, ["decoder"], seed=0)


def test_a_transformer_lists_head_pooler_layers_embeddings():
    transformers = pytest.importorskip("transformers")
    from faithbench.benchmark.core.models.transformer import TransformerClassifier
    from faithbench.tasks.transformer import base_path, load_tokenizer

    tokenizer = load_tokenizer(base_path())
    torch.manual_seed(0)
    hf = transformers.BertForSequenceClassification(transformers.BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=32, num_labels=2,
        attn_implementation="eager")).eval()
    model = TransformerClassifier(hf, tokenizer).eval()
    assert randomize.group_names(model) == ["out", "pooler", "layer_1", "layer_0", "embedding"]
    before = weights_hash(model)
    twin = randomize.randomized(model, ["layer_1"], seed=0)
    changed = {k for k, v in twin.state_dict().items() if not torch.equal(v, model.state_dict()[k])}
    assert changed and all(k.startswith("hf.bert.encoder.layer.1.") for k in changed)
    assert weights_hash(model) == before


# -- (d) data randomization --------------------------------------------------------------------


def test_permuted_labels_keep_the_multiset_and_tokens_with_a_fixed_seed():
    rows = [Example(f"e{i}", ("w", str(i)), i % 3) for i in range(60)]
    transform = PermutedLabels(seed=0, splits=("train", "validation"))
    once, again = transform.apply("train", rows), transform.apply("train", rows)
    assert [e.label for e in once] == [e.label for e in again]  # seeded
    assert sorted(e.label for e in once) == sorted(e.label for e in rows)  # the multiset
    assert [e.label for e in once] != [e.label for e in rows]  # permuted
    assert [(e.id, e.tokens) for e in once] == [(e.id, e.tokens) for e in rows]
    assert transform.apply("test", rows) == rows  # the evaluated split is left alone
    other = PermutedLabels(seed=1, splits=("train", "validation"))
    assert [e.label for e in other.apply("train", rows)] != [e.label for e in once]
    assert [e.label for e in transform.apply("validation", rows)] != [e.label for e in once]
    assert len({transform.key, other.key, PermutedLabels(0, ("train",)).key}) == 3


def test_data_randomization_retrains_on_permuted_labels(tmp_path, monkeypatch):
    """A model of 600 examples, 2 epochs, and its twin on permuted labels: the clean one
    learns the planted words, the twin stays near chance (binary: 0.5) on the 60 scored."""
    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "cache"))
    config = RunConfig(out=str(tmp_path / "out"), explainers=("gradient",), limit=60,
                       batch_size=30, progress=False, train_limit=600, epochs=2,
                       metrics=("randomization_data",))
    summary = run(config)
    assert summary.exit_code == 0, summary.failures
    (record,) = read_results(tmp_path / "out" / "results.jsonl")
    assert record.metric == "randomization_data[absolute=True]@1" and record.family == "sanity"
    options = TaskOptions(seed=0, train_limit=600, epochs=2)
    clean = SYNTHETIC.prepare(options, progress=False)
    permuted = PermutedLabels(0, ("train", "validation"))
    twin = SYNTHETIC.prepare(TaskOptions(seed=0, train_limit=600, epochs=2, transform=permuted),
                             progress=False)
    assert twin.loaded_from_cache  # the run trained exactly this model, under its own key
    assert twin.cache_key != clean.cache_key
    assert [e.label for e in twin.splits["train"]] == [
        e.label for e in permuted.apply("train", clean.splits["train"])]
    assert twin.splits["test"] == clean.splits["test"]
    assert clean.accuracy["test"] > 0.8
    assert abs(record.extra["retrained_correct"] / 60 - 0.5) < 0.2  # near chance
    assert abs(twin.accuracy["test"] - 0.5) < 0.1


# -- (e) through the CLI, with the leaderboard --------------------------------------------------


def percentile_ci(values, n_resamples=2000, seed=0, alpha=0.05):
    """The run's bootstrap written out: resample n of n with numpy's generator seeded 0."""
    v = np.asarray(values, dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(v), size=(n_resamples, len(v)))
    return tuple(np.quantile(v[draws].mean(axis=1), [alpha / 2, 1 - alpha / 2]))


def test_a_run_writes_sanity_records_and_the_leaderboard_shows_them(tmp_path, synthetic_ready,
                                                                     capsys):
    out = tmp_path / "res"
    curve = ["randomization_cascading[depth=1]", "randomization_cascading[depth=2]",
             "randomization_cascading"]
    assert main(["run", "--out", str(out), "--explainers", "gradient", "random",
                 "--metrics", "comprehensiveness", *curve, "--limit", "24", "--batch-size", "8",
                 "--no-progress"]) == 0
    records = read_results(out / "results.jsonl")
    sanity = [r for r in records if r.family == "sanity"]
    assert len(sanity) == 6 and all(r.direction == "lower" for r in sanity)
    assert {r.family for r in records} == {"faithfulness", "sanity"}
    for r in sanity:
        values = [row["value"] for row in read_jsonl(out / r.per_example_file)]
        assert r.estimate.n == len(values) == 24
        assert (r.estimate.ci_low, r.estimate.ci_high) == pytest.approx(percentile_ci(values),
                                                                       abs=1e-12)
        if r.explainer.startswith("random"):  # same seed, same draws, whatever the model
            assert values == [1.0] * 24
    capsys.readouterr()
    assert main(["leaderboard", "--entries", str(out / "leaderboard"), "--wide"]) == 0
    tables = capsys.readouterr().out.split("Overlap or separation")[:-1]  # each table's last note
    assert len(tables) == 2  # the faithfulness table, then the sanity checks' own
    assert "comprehensiveness" in tables[0] and "randomization" not in tables[0]
    assert "depth=1" in tables[1] and "comprehensiveness" not in tables[1]
    assert main(["leaderboard", "--entries", str(out / "leaderboard"), "--wide", "--family",
                 "sanity", "--format", "csv", "--metrics", *curve]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    stages = [h.split(" ")[0] for h in header.split(",") if h.endswith(" mean")]
    assert stages == [metric_registry.resolve(m).spec.id for m in curve]  # the curve, in order
    assert main(["leaderboard", "--entries", str(out / "leaderboard"), "--family", "sanity",
                 "--format", "csv"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines()[1:] if line]
    assert len(rows) == 6 and all(",sanity," in row for row in rows)
    assert main(["list"]) == 0
    assert "re-explaining" in capsys.readouterr().out


def test_a_plugin_failing_on_the_randomized_model_is_recorded_not_fatal(tmp_path,
                                                                         synthetic_ready,
                                                                         monkeypatch):
    def fails(self, explainer, model=None, *, prepared=None):
        raise PluginError(explainer.spec.name, "explain", "fails on the randomized model")

    monkeypatch.setattr(EvaluationSession, "explain_on", fails)
    summary = run(RunConfig(out=str(tmp_path), explainers=("gradient",),
                            metrics=("comprehensiveness", "randomization_cascading"), **FAST))
    assert summary.exit_code == 1
    assert [f.stage for f in summary.failures] == ["explain"]
    assert [r.metric.split("[")[0] for r in read_results(tmp_path / "results.jsonl")] == [
        "comprehensiveness"]
    failure = json.loads((tmp_path / "failures.jsonl").read_text().splitlines()[0])
    assert "randomized model" in failure["message"]


def test_bad_depth_or_layer_is_refused(tmp_path, synthetic_ready):
    with pytest.raises(InputError, match="depth"):
        metric_registry.resolve("randomization_cascading[depth=0]")
    session = session_of(synthetic_ready, tmp_path)
    with pytest.raises(InputError, match="has 4 layer groups"):
        scored(session, "randomization_cascading[depth=5]", get_explainer("random"))
    with pytest.raises(InputError, match="no layer group 'pooler'"):
        scored(session, "randomization_independent[layer=pooler]", get_explainer("random"))
    assert not Path(tmp_path / "results.jsonl").exists()
