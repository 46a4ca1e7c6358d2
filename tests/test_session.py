"""The Task protocol and the evaluation session: every registered task satisfies the
protocol, the session does the setup once for the runner and every verb, planned
units keep the schema-1 keys, transformed training data get their own model, and a
metric that retrains is handed what it needs through one typed input."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from faithbench import metrics as metric_registry
from faithbench import tasks as task_registry
from faithbench.benchmark import plan, verbs
from faithbench.benchmark.core.api import (
    CLASSIFICATION,
    Example,
    MetricOutput,
    MetricSpec,
    PreparedTask,
    Task,
    TaskOptions,
    TrainingInput,
)
from faithbench.benchmark.core.files import content_hash
from faithbench.benchmark.core.records import read_jsonl, read_results
from faithbench.benchmark.core.vocab import UNK
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import run
from faithbench.benchmark.session import EvaluationSession, open_session
from faithbench.tasks.classification import data_fingerprint
from faithbench.tasks.synthetic import TASK as SYNTHETIC

FAST = {"limit": 24, "batch_size": 8, "progress": False}


@pytest.mark.parametrize("name", task_registry.REGISTRY.names())
def test_every_registered_task_is_a_task(name):
    assert isinstance(task_registry.get_task(name), Task)


def test_a_prepared_classification_task_is_a_prepared_task(synthetic_ready):
    assert isinstance(synthetic_ready, PreparedTask)
    assert synthetic_ready.n_outputs == 2


def test_the_default_split_is_chosen_once(synthetic_ready):
    spec = synthetic_ready.spec
    assert spec.split(None) == spec.eval_split == "test" and spec.split("validation") == "validation"
    session = EvaluationSession(synthetic_ready, RunConfig(limit=5), seed=0)
    assert session.split == "test"
    assert [e.id for e in session.examples] == [e.id for e in synthetic_ready.splits["test"][:5]]
    with pytest.raises(TypeError):
        synthetic_ready.examples()  # no hidden default below the session


def test_session_computes_base_probs_and_targets_once(synthetic_ready):
    session = EvaluationSession(synthetic_ready, RunConfig(limit=10, progress=False), seed=0)
    probs = session.base_probs
    assert session.base_probs is probs and session.perturber.rows_requested == 10
    with torch.no_grad():
        batch, _, _ = synthetic_ready.collate(session.examples)
        expected = torch.softmax(synthetic_ready.model.logits(batch), -1)
    assert torch.allclose(probs, expected, atol=1e-6)
    assert torch.equal(session.targets, expected.argmax(-1))
    session.targets = [1 - int(t) for t in session.targets]  # a user's explicit targets
    assert torch.equal(session.targets, 1 - expected.argmax(-1))


def test_every_verb_prepares_the_model_once(tmp_path, synthetic_ready, monkeypatch):
    """explain, score, predict and agreement each open one session: one prepare call."""
    calls = []
    real = type(SYNTHETIC).prepare

    def counted(self, options, *, progress=True):
        calls.append(options)
        return real(self, options, progress=progress)

    monkeypatch.setattr(type(SYNTHETIC), "prepare", counted)
    config = RunConfig(out=str(tmp_path), explainers=("random", "gradient"), **FAST)
    exp = tmp_path / "e.jsonl"
    verbs.explain_to_file("synthetic", "gradient", str(exp), config)
    verbs.score_file("synthetic", str(exp), dataclasses.replace(config, metrics=("flip_rate",)))
    tokens = tmp_path / "t.jsonl"
    tokens.write_text('{"id": "x", "tokens": ["great", "film"]}\n')
    verbs.predict("synthetic", str(tokens), config)
    verbs.agreement("synthetic", config)
    assert len(calls) == 4


def test_units_are_keyed_by_weights_seed_and_data(synthetic_ready):
    config = RunConfig(limit=7)
    [unit] = plan.units(config, "synthetic", 0, "abc", "test", ["e@1"], ["m@1"], data="fp")
    assert unit == plan.Unit("synthetic", 0, "e@1", "m@1", "test", 7, unit.key)
    assert unit.key == content_hash({"checkpoint": "abc", "seed": 0, "data": "fp",
                                     "explainer": "e@1", "metric": "m@1", "split": "test",
                                     "limit": 7})
    with pytest.raises(dataclasses.FrozenInstanceError):
        unit.key = "x"
    assert plan.models(RunConfig(tasks=("a", "b"), seeds=(0, 1))) == [
        ("a", 0), ("a", 1), ("b", 0), ("b", 1)]


class MaskTop1:
    """Replaces each listed example's top token (by id -> position) with <unk>."""

    def __init__(self, positions: dict[str, int], key: str):
        self.positions, self.key = positions, key

    def apply(self, split, examples):
        out = []
        for e in examples:
            tokens = list(e.tokens)
            if e.id in self.positions:
                tokens[self.positions[e.id]] = UNK
            out.append(dataclasses.replace(e, tokens=tuple(tokens)))
        return out


def _top1(examples: list[Example], scores) -> dict[str, int]:
    return {e.id: max(range(len(s)), key=lambda i: (s[i], -i)) for e, s in zip(examples, scores)}


class RetrainTop1:
    """A one-ratio ROAR: mask every example's top-1 token on all splits, retrain, and
    score the retrained model's correctness on the masked evaluation examples."""

    spec = MetricSpec(name="retrain_top1", version="1", direction="lower",
                      kinds=frozenset({CLASSIFICATION}), needs_training=True)

    def __init__(self):
        self.seen: list[TrainingInput] = []

    def evaluate(self, inp: TrainingInput) -> MetricOutput:
        self.seen.append(inp)
        positions = _top1(inp.session.examples, inp.scores)
        for split in ("train", "validation"):
            other = inp.session.on_split(split)
            positions.update(_top1(other.examples, other.explain(inp.explainer).scores))
        transform = MaskTop1(positions, content_hash(
            {"checkpoint": inp.session.prepared.checkpoint, "explainer": inp.explainer.spec.id,
             "mask": "top1"}))
        retrained = inp.retrain(transform, inp.options.seed)
        masked = retrained.examples(inp.session.split)[: len(inp.session.examples)]
        right = []
        with torch.no_grad():
            for batch, labels, _ in retrained.batches(masked, 16):
                right.append((retrained.model.logits(batch).argmax(-1) == labels).double())
        return MetricOutput(torch.cat(right))


def test_a_retraining_metric_gets_task_and_retrainer(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "cache"))
    metric = RetrainTop1()
    registry = metric_registry.REGISTRY
    monkeypatch.setattr(registry, "_items", {**registry._items, "retrain_top1": metric})
    config = RunConfig(out=str(tmp_path / "out"), explainers=("occlusion",),
                       metrics=("retrain_top1",), train_limit=300, epochs=2, **FAST)
    summary = run(config)
    assert summary.exit_code == 0, summary.failures
    [record] = read_results(tmp_path / "out" / "results.jsonl")
    [inp] = metric.seen
    assert inp.task is SYNTHETIC and inp.options.seed == 0 and len(inp.scores) == 24
    # the retrained model: its own cache entry, trained on masked data
    clean = SYNTHETIC.prepare(TaskOptions(train_limit=300, epochs=2), progress=False)
    assert clean.loaded_from_cache and "transform" not in clean.config
    # a clean model's key: what training reads (train + validation) + config, no transform
    trained_on = data_fingerprint({s: clean.splits[s] for s in ("train", "validation")})
    assert clean.cache_key == content_hash({"data": trained_on, **clean.config})
    transform = _transform_of(inp)
    again = inp.retrain(transform, 0)
    assert again.loaded_from_cache and again.cache_key != clean.cache_key
    assert again.config["transform"] == transform.key
    for a, b in zip(clean.splits["train"], again.splits["train"]):  # exactly the top token
        expected = list(a.tokens)
        expected[transform.positions[a.id]] = UNK
        assert list(b.tokens) == expected
    # the record's value is the retrained model's accuracy on the masked test examples,
    # recounted here one example at a time
    masked = again.examples("test")[:24]
    with torch.no_grad():
        right = [int(again.model.logits(again.collate([e])[0]).argmax()) == e.label
                 for e in masked]
    assert record.estimate.mean == pytest.approx(sum(right) / 24, abs=1e-12)
    assert [r["value"] for r in read_jsonl(tmp_path / "out" / record.per_example_file)] == [
        float(x) for x in right]


def _transform_of(inp: TrainingInput) -> MaskTop1:
    """The transform RetrainTop1 built for this input, rebuilt from the cached explanations."""
    positions = _top1(inp.session.examples, inp.scores)
    for split in ("train", "validation"):
        other = inp.session.on_split(split)
        positions.update(_top1(other.examples, other.explain(inp.explainer).scores))
    return MaskTop1(positions, content_hash(
        {"checkpoint": inp.session.prepared.checkpoint, "explainer": inp.explainer.spec.id,
         "mask": "top1"}))


def test_open_session_on_a_users_examples(synthetic_ready):
    session = open_session("synthetic", RunConfig(progress=False))
    rows = [{"id": "x", "tokens": ["great", "film"]}, {"id": "y", "tokens": ["awful"]}]
    mine = session.on(session.prepared.examples_from_rows("file.jsonl", rows))
    assert mine.from_file and mine.split is None and [e.id for e in mine.examples] == ["x", "y"]
    assert mine.base_probs.shape == (2, 2)
    from faithbench.benchmark.core.errors import DataFileError

    with pytest.raises(DataFileError, match="file.jsonl, line 2: field 'tokens'"):
        session.prepared.examples_from_rows("file.jsonl", [rows[0], {"id": "z", "tokens": "no"}])


def test_specs_take_their_lists_from_one_place():
    from faithbench.benchmark.core.api import TaskSpec
    from faithbench.benchmark.core.names import FAMILIES

    with pytest.raises(ValueError, match="unknown family 'faithful' .*known: " + ", ".join(FAMILIES)):
        MetricSpec(name="m", version="1", direction="higher", kinds=frozenset({CLASSIFICATION}),
                   family="faithful")
    with pytest.raises(ValueError, match="unknown direction 'up'"):
        MetricSpec(name="m", version="1", direction="up", kinds=frozenset({CLASSIFICATION}))
    with pytest.raises(ValueError, match="unknown kind 'regression'"):
        MetricSpec(name="m", version="1", direction="higher", kinds=frozenset({"regression"}))
    with pytest.raises(ValueError, match="task 't': unknown kind 'seq'"):
        TaskSpec(name="t", version="1", kind="seq", dataset="x", eval_split="test", labels=())


def test_score_file_refuses_a_plausibility_metric_without_references(tmp_path, synthetic_ready):
    from faithbench.benchmark.core.errors import InputError

    exp = tmp_path / "e.jsonl"
    exp.write_text('{"id": "x", "tokens": ["great", "film"], "scores": [1.0, 0.0]}\n')
    config = RunConfig(metrics=("token_f1_micro",), progress=False)
    with pytest.raises(InputError, match="token_f1_micro compares with reference rationales"):
        verbs.score_file("synthetic", str(exp), config)


def test_reference_explainers_are_a_registry_with_did_you_mean():
    from faithbench import submissions
    from faithbench.benchmark.core.errors import FaithbenchError, UnknownNameError
    from faithbench.benchmark.runner import resolve_explainer

    assert submissions.REFERENCE == tuple(submissions.REGISTRY.names())
    assert resolve_explainer("gradient") is submissions.get_explainer("gradient")
    with pytest.raises(UnknownNameError, match="did you mean 'gradient'"):  # bad input, exit 2
        resolve_explainer("gradiant")
    with pytest.raises(UnknownNameError, match="did you mean 'occlusion'"):
        submissions.get_explainer("occlusoin")
    with pytest.raises(FaithbenchError, match="already registered"):
        submissions.REGISTRY.add("random", submissions.get_explainer("random"))


def test_run_summary_counts_rows_requested_and_forwarded(tmp_path, synthetic_ready):
    """Every unit's rows plus the base predictions (one row per example, once per model)
    plus what occlusion asked the engine for: each input and each one-token deletion."""
    summary = run(RunConfig(out=str(tmp_path), explainers=("random", "occlusion"),
                            metrics=("aopc_morf", "flip_rate", "comprehensiveness"), **FAST))
    units = [r.timing for r in summary.results]
    assert len(units) == 6
    tokens = sum(len(e.tokens) for e in synthetic_ready.examples("test", 24))
    occlusion = next(t for r, t in zip(summary.results, units) if "occlusion" in r.explainer)
    assert summary.rows_requested == sum(t.rows_requested for t in units) + 24 + 24 + tokens
    assert summary.rows_forwarded == (sum(t.rows_forwarded for t in units) + 24
                                      + occlusion.explain_forward_rows)
    # flip_rate's variant is aopc_morf's k = 1: forwarded by aopc_morf, free afterwards
    flip = [t for r, t in zip(summary.results, units) if r.metric.startswith("flip_rate")]
    assert all(t.rows_requested == 24 and t.rows_forwarded == 0 for t in flip)


class _Counting:
    """Scores = token ids; records each call's example ids; raises on call ``fail_at``."""

    def __init__(self, fail_at: int | None = None):
        from faithbench.benchmark.core.api import ExplainerSpec

        self.spec = ExplainerSpec(name="counting", version="1")
        self.calls, self.fail_at = [], fail_at

    def explain(self, model, batch, target, *, rng):
        self.calls.append(batch.example_ids)
        if len(self.calls) == self.fail_at:
            raise RuntimeError("fails on this batch")
        return batch.ids.float()


def test_a_failed_explainer_keeps_its_finished_batches(tmp_path, synthetic_ready):
    """Batch 3 of 3 fails: batches 1-2 stay in a partial file beside the explanation
    cache, and the rerun explains batch 3 only. Before: everything explained was lost
    (the audit's 96 IMDB reviews), and the rerun explained all 3 batches again."""
    from faithbench.benchmark.core.errors import PluginError

    config = RunConfig(out=str(tmp_path), isolation="none", **FAST)  # 24 examples, batches of 8
    session = EvaluationSession(synthetic_ready, config, seed=0)
    first = _Counting(fail_at=3)
    with pytest.raises(PluginError, match="fails on this batch"):
        session.explain(first)
    ids = [e.id for e in session.examples]
    assert first.calls == [tuple(ids[0:8]), tuple(ids[8:16]), tuple(ids[16:24])]
    again = _Counting()
    explained = session.explain(again)
    assert again.calls == [tuple(ids[16:24])]
    want = [synthetic_ready.encode(e.tokens) for e in session.examples]  # scores = token ids
    assert explained.scores == [[float(i) for i in row] for row in want]
    assert explained.targets == session.targets.tolist()
    assert [p.name.endswith(".partial.jsonl") for p in (tmp_path / "explanations").glob("*.jsonl")] \
        == [False]  # the partial file is gone; the whole cache is there
    third = _Counting()
    assert session.explain(third).scores == explained.scores and third.calls == []


def test_finished_batches_of_another_batch_size_are_not_reused(tmp_path, synthetic_ready):
    """The partial file holds batches of 8; a rerun with batches of 4 cannot reuse them
    (its batch 0 is other examples than the file's), so it explains all 6 batches."""
    from faithbench.benchmark.core.errors import PluginError

    config = RunConfig(out=str(tmp_path), isolation="none", **FAST)
    with pytest.raises(PluginError):
        EvaluationSession(synthetic_ready, config, seed=0).explain(_Counting(fail_at=3))
    smaller = EvaluationSession(synthetic_ready, dataclasses.replace(config, batch_size=4), seed=0)
    again = _Counting()
    explained = smaller.explain(again)
    assert len(again.calls) == 6
    assert explained.scores == [[float(i) for i in synthetic_ready.encode(e.tokens)]
                                for e in smaller.examples]


def test_predict_refuses_an_empty_row_before_preparing_a_model(tmp_path, monkeypatch):
    """Before: ``{"tokens": []}`` came back with probabilities (of an empty input)."""
    from faithbench.benchmark.core.errors import DataFileError, NotUtf8Error

    def no_model(*args, **kwargs):
        raise AssertionError("bad input must be refused before a model is prepared")

    monkeypatch.setattr(verbs, "open_session", no_model)
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "tokens": ["good"]}\n{"id": "b", "tokens": []}\n')
    with pytest.raises(DataFileError, match="empty token list") as info:
        verbs.predict("synthetic", str(path), RunConfig(progress=False))
    assert (info.value.line, info.value.field) == (2, "tokens")
    path.write_bytes(b'{"id": "a", "tokens": ["good"]}\n{"id": "b", "tokens": ["\xff"]}\n')
    with pytest.raises(NotUtf8Error) as info:
        verbs.predict("synthetic", str(path), RunConfig(progress=False))
    assert (info.value.line, info.value.offset) == (2, 32 + 24)  # 24 bytes before it on line 2
