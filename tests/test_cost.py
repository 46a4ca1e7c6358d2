"""Cost as a reported property of explainers (``faithbench.benchmark.core.cost``): rows
forwarded and backwarded through the model, counted by the proxy every explainer is
handed, the same in this process and in a plugin worker; peak memory; the cost in
the records of a run, kept by a cached explanation; the nominal cost in ``faithbench
list``; and ``faithbench leaderboard --cost``.

Expected counts are worked out from what each explainer does (one batch of the three
rows of lengths 4, 2 and 3: B = 3 rows, 9 real tokens), never by running it twice."""

from __future__ import annotations

import copy
import csv
import io
import json
import time
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from faithbench import submissions
from faithbench.api import EMBEDDINGS, GRADIENTS, ExplainerSpec, capabilities
from faithbench.benchmark.cli import main
from faithbench.benchmark.core import perturb
from faithbench.benchmark.core.cost import (
    PEAK_METHODS,
    Cost,
    CountingModel,
    Counts,
    PeakMemory,
)
from faithbench.benchmark.core.files import file_hash
from faithbench.benchmark.core.isolation import InProcess, plugin_caller
from faithbench.benchmark.core.perturb import Perturber, engine_for, share_engine
from faithbench.benchmark.core.plugins import load_explainer
from faithbench.benchmark.core.records import (
    ResultRecord,
    Timing,
    read_jsonl,
    read_results,
    write_jsonl_atomic,
)
from faithbench.benchmark.explanations import append_batch
from faithbench.benchmark.plan import RunConfig
from faithbench.benchmark.runner import resolve_explainer
from faithbench.benchmark.session import open_session
from faithbench.leaderboard.cost import explain_cost
from faithbench.leaderboard.entry import read_entries
from faithbench.submissions.integrated_gradients import IntegratedGradientsExplainer
from faithbench.submissions.occlusion import OcclusionExplainer
from faithbench.submissions.smoothgrad import SmoothGradExplainer
from faithbench.testing import three_row_batch, tiny_classifier

pytestmark = pytest.mark.usefixtures("one_thread")

SUBMISSIONS = Path(submissions.__file__).resolve().parent
TEMPLATE = SUBMISSIONS / "TEMPLATE.py"
B, TOKENS = 3, 4 + 2 + 3  # three_row_batch: rows of lengths 4, 2 and 3
COSTED = ("attention", "attention_rollout", "gradient", "gradient_x_input",
          "integrated_gradients", "lrp", "occlusion", "random", "smoothgrad", "vargrad")


def cost_of(explainer, model=None) -> Cost:
    """The cost of one explain call of ``three_row_batch`` in this process."""
    batch, target = three_row_batch()
    caller = InProcess(explainer, model or tiny_classifier(), time_budget_s=None)
    caller.explain(batch, target, seed=0)
    return caller.cost


def rows(cost: Cost) -> tuple:
    return cost.forward_rows, cost.backward_rows


# ---------------------------------------------------------------- counted rows


def test_gradient_is_one_forward_and_one_backward_row_per_example():
    cost = cost_of(submissions.get_explainer("gradient"))
    assert rows(cost) == (B, B)
    assert cost.forward_equivalents == B + 2 * B


def test_integrated_gradients_is_n_steps_rows_each_way_however_it_chunks():
    """Captum forwards the k scaled inputs of every row (k·B rows, in passes of
    ``rows_per_pass``) and differentiates each pass once; the two ``embed`` calls (the
    input and the baseline) are lookups, not forwards, so nothing else counts."""
    for rows_per_pass in (2048, 4, 2):
        cost = cost_of(IntegratedGradientsExplainer(n_steps=7, rows_per_pass=rows_per_pass))
        assert rows(cost) == (7 * B, 7 * B), rows_per_pass


def test_occlusion_is_the_batch_and_one_variant_per_real_token_forward_only():
    for chunk_size in (1024, 2):  # one pass of all variants, or five passes
        model = tiny_classifier()
        share_engine(model, Perturber(model, chunk_size=chunk_size))
        assert rows(cost_of(OcclusionExplainer(), model)) == (B + TOKENS, 0)


@pytest.mark.parametrize("name, want", [
    ("random", (0, 0)),  # calls no model
    ("attention", (B, 0)),  # one attention pass, no gradient
    ("gradient_x_input", (B, B)),
    ("lrp", (B, B)),  # the LRP forward, and the backward that carries relevance
])
def test_other_reference_explainers(name, want):
    assert rows(cost_of(submissions.get_explainer(name))) == want


def test_smoothgrad_is_n_samples_rows_each_way():
    assert rows(cost_of(SmoothGradExplainer(n_samples=5))) == (5 * B, 5 * B)


@dataclass(frozen=True)
class Probe:
    """Forwards with gradients on, then differentiates ``backwards`` times."""

    backwards: int
    spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(
        name="probe", version="1", requires=frozenset({GRADIENTS, EMBEDDINGS})))

    def explain(self, model, batch, target, *, rng):
        with torch.enable_grad():
            embeds = model.embed(batch).detach().requires_grad_(True)
            picked = model.logits_from_embeddings(embeds, batch).gather(
                1, target.view(-1, 1)).sum()
            for i in range(self.backwards):
                torch.autograd.grad(picked, embeds, retain_graph=i + 1 < self.backwards)
        return torch.zeros(batch.ids.shape)


def test_a_backward_counts_when_autograd_runs_through_the_forward_and_each_time():
    assert rows(cost_of(Probe(0))) == (B, 0)  # gradients on, never differentiated
    assert rows(cost_of(Probe(1))) == (B, B)
    assert rows(cost_of(Probe(2))) == (B, 2 * B)


@dataclass(frozen=True)
class ThroughTheEngine:
    """Forwards the batch through the perturbation engine shared with the metrics."""

    spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(name="engine_user",
                                                                      version="1"))

    def explain(self, model, batch, target, *, rng):
        engine_for(model).probs(batch)
        return torch.zeros(batch.ids.shape)


def test_rows_the_shared_engine_forwards_for_the_explainer_count():
    model = tiny_classifier()
    assert rows(cost_of(ThroughTheEngine(), model)) == (B, 0)  # an engine of its own
    shared = Perturber(model)
    share_engine(model, shared)  # as a session does: the metrics' engine
    assert rows(cost_of(ThroughTheEngine(), model)) == (B, 0)
    assert shared.rows_forwarded == B  # it was the shared one
    assert rows(cost_of(ThroughTheEngine(), model)) == (0, 0)  # answered from its memory
    assert not [k for k in perturb._ENGINES if type(k) is CountingModel]  # no proxy kept


def test_the_proxy_is_the_model_to_the_explainer():
    model = tiny_classifier()
    proxy = CountingModel(model, Counts())
    assert capabilities(proxy) == capabilities(model)
    assert (proxy.pad_id, proxy.mask_id, proxy.baseline_id) == (
        model.pad_id, model.mask_id, model.baseline_id)
    assert isinstance(proxy, torch.nn.Module) and isinstance(proxy, type(model))
    for name in ("attention_maps", "retokenize", "max_rows_per_pass", "lrp_logits"):
        assert hasattr(proxy, name) == hasattr(model, name), name
    assert getattr(proxy, "max_rows_per_pass", 7) == getattr(model, "max_rows_per_pass", 7)
    assert proxy.embedding is model.embedding and weakref.ref(proxy)() is proxy
    proxy.marker = 1  # attributes set on the proxy are the model's
    assert model.marker == 1
    batch, _ = three_row_batch()
    torch.testing.assert_close(proxy(batch), model(batch))  # calling it forwards
    assert proxy._counts.proxied_rows == B
    copied = copy.deepcopy(proxy)  # a copy is a copy of the model
    assert type(copied) is type(model) and copied is not model
    torch.testing.assert_close(copied.logits(batch), model.logits(batch))


def test_a_worker_answer_is_checked_field_by_field():
    good = {"forward_rows": 3, "backward_rows": 0, "peak_mib": 1.5, "peak_method": "rss_hwm"}
    assert Cost.from_dict(good) == Cost(3, 0, 1.5, "rss_hwm")
    bad = {"forward_rows": -1, "backward_rows": True, "peak_mib": float("nan"),
           "peak_method": "rss_hwm"}
    assert Cost.from_dict(bad) == Cost()
    assert Cost.from_dict({"peak_mib": 2.0, "peak_method": "guess"}) == Cost()
    assert Cost.from_dict("not a dict") == Cost() == Cost.from_dict({})
    assert Cost.total([Cost(3, 3, 1.0, "rss_hwm"), Cost(5, 0, 4.0, "rss_sampled")]) == Cost(
        8, 3, 4.0, "rss_sampled")
    assert Cost.total([Cost(3, 3, 1.0, "rss_hwm"), Cost()]) == Cost()


# ---------------------------------------------------------------- peak memory


@dataclass(frozen=True)
class Allocates:
    """Holds ``mib`` MiB of written memory for a moment, then frees it."""

    mib: int
    spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(name="allocates",
                                                                      version="1"))

    def explain(self, model, batch, target, *, rng):
        block = torch.ones(self.mib * 2 ** 20 // 4)  # float32, every page written
        time.sleep(0.05)
        del block
        return torch.zeros(batch.ids.shape)


@pytest.mark.parametrize("sample", [False, True])
def test_the_peak_is_what_the_block_held(sample):
    if not Path("/proc/self/statm").exists():
        pytest.skip("no /proc: no peak")

    with PeakMemory(sample=sample) as peak:
        block = torch.ones(64 * 2 ** 20 // 4)
        time.sleep(0.05)
        del block
    assert peak.method in PEAK_METHODS
    if sample:
        assert peak.method == "rss_sampled"
    assert 60 <= peak.mib < 200
    with PeakMemory(sample=sample) as quiet:
        pass
    assert quiet.mib < 8


def test_an_explain_call_reports_its_peak():
    if not Path("/proc/self/statm").exists():
        pytest.skip("no /proc: no peak")
    cost = cost_of(Allocates(64))
    assert cost.peak_method in PEAK_METHODS and 60 <= cost.peak_mib < 200


# ---------------------------------------------------------------- in a worker


@pytest.mark.parametrize("name, want", [("gradient", (B, B)),
                                        ("occlusion", (B + TOKENS, 0))])
def test_a_plugin_in_its_worker_reports_the_counts_of_this_process(name, want):
    plugin = load_explainer(str(SUBMISSIONS / f"{name}.py"))
    batch, target = three_row_batch()
    with plugin_caller(plugin, tiny_classifier(), time_budget_s=None) as caller:
        caller.explain(batch, target, seed=0)
        cost = caller.cost
    assert rows(cost) == want == rows(cost_of(submissions.get_explainer(name)))
    assert cost.peak_method in PEAK_METHODS and cost.peak_mib >= 0


def test_a_plugins_declared_cost_comes_back_from_its_worker():
    assert load_explainer(str(TEMPLATE)).spec.cost == "1 fwd + 1 bwd"
    ig = load_explainer(str(SUBMISSIONS / "integrated_gradients.py"))
    assert ig.spec.cost == "50 fwd + 50 bwd (n_steps)" == (
        submissions.get_explainer("integrated_gradients").spec.cost)


# ---------------------------------------------------------------- the spec's text


def test_cost_text_is_checked_and_changes_no_id():
    plain = ExplainerSpec(name="mine", version="1", params=(("k", 3),))
    assert replace(plain, cost="k fwd + k bwd").id == plain.id == "mine[k=3]@1"
    with pytest.raises(ValueError, match="cost must be printable"):
        ExplainerSpec(name="mine", version="1", cost="1 fwd\n| forged | row |")
    # the reference explainers' ids (and so every cache key) are those of before
    ids = {n: submissions.get_explainer(n).spec.id for n in submissions.REFERENCE}
    assert ids["integrated_gradients"] == ("integrated_gradients[baseline=baseline_id;"
                                           "method=gausslegendre;n_steps=50]@1")
    assert ids["gradient"] == "gradient[norm=l2]@1"
    assert ids["occlusion"] == "occlusion[eraser=delete]@1"
    assert all(submissions.get_explainer(n).spec.cost for n in COSTED)


def test_list_shows_each_explainers_nominal_cost(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "cost per example" in out
    line = next(x for x in out.splitlines() if x.startswith("integrated_gradients "))
    assert "embeddings, gradients  50 fwd + 50 bwd (n_steps)  " in line  # the id follows
    line = next(x for x in out.splitlines() if x.startswith("occlusion "))
    assert "T + 1 fwd (T = tokens; words on a subword model)" in line


# ---------------------------------------------------------------- a run's records


N = 12  # examples of the run (batches of 5: 5, 5, 2)
RUN = ["--limit", str(N), "--batch-size", "5", "--no-progress", "--explainers", "gradient",
       "occlusion", "random"]


@pytest.fixture(scope="module")
def cost_run(tmp_path_factory, synthetic_ready):
    out = tmp_path_factory.mktemp("cost-run")
    assert main(["run", "--out", str(out), *RUN, "--metrics", "comprehensiveness"]) == 0
    return out


def real_tokens(out: Path) -> int:
    session = open_session("synthetic", RunConfig(out=str(out), limit=N, batch_size=5,
                                                  progress=False))
    return sum(int(b.lengths.sum()) for b, *_ in session.batches(session.examples))


def by_explainer(records) -> dict:
    return {r.explainer.split("[")[0].split("@")[0]: r for r in records}


def test_occlusion_forwards_each_distinct_leave_one_out_input_once_and_shares_it(tmp_path):
    """Through the session's engine occlusion forwards exactly the distinct one-token
    deletions that are not an input themselves (counted here from the token ids), and
    the leave-one-out metrics that ask for the same variants forward nothing."""
    out = tmp_path / "occ"
    assert main(["run", "--out", str(out), "--limit", str(N), "--batch-size", "5",
                 "--no-progress", "--explainers", "occlusion", "--metrics", "taucorr_loo",
                 "flip_rate"]) == 0
    session = open_session("synthetic", RunConfig(out=str(out), limit=N, batch_size=5,
                                                  progress=False))
    inputs, deletions = set(), set()
    for b, *_ in session.batches(session.examples):
        for i in range(len(b)):
            ids = b.ids[i, : int(b.lengths[i])].tolist()
            inputs.add(tuple(ids))
            deletions.update(tuple(ids[:j] + ids[j + 1:]) for j in range(len(ids)))
    recs = {r.metric.split("[")[0]: r for r in read_results(out / "results.jsonl")}
    assert recs["taucorr_loo"].timing.explain_forward_rows == len(deletions - inputs)
    assert recs["taucorr_loo"].timing.rows_forwarded == 0
    assert recs["flip_rate"].timing.rows_forwarded == 0


def test_a_runs_records_carry_the_explainers_cost(cost_run):
    recs = by_explainer(read_results(cost_run / "results.jsonl"))
    tokens = real_tokens(cost_run)
    want = {"gradient": (N, N), "random": (0, 0)}
    for name, (fwd, bwd) in want.items():
        t = recs[name].timing
        assert t.n_examples == N
        assert (t.explain_forward_rows, t.explain_backward_rows) == (fwd, bwd), name
    # occlusion's variants go through the session's engine: the inputs themselves (its
    # base) and whatever gradient's metric forwarded before are answered from memory
    t = recs["occlusion"].timing
    assert 0 < t.explain_forward_rows < tokens and t.explain_backward_rows == 0
    for t in (recs[name].timing for name in ("gradient", "occlusion", "random")):
        assert t.explain_forward_equivalents == t.explain_forward_rows + 2 * t.explain_backward_rows
        assert t.explain_peak_method in PEAK_METHODS and t.explain_peak_mib >= 0
        assert t.explain_s > 0
    assert recs["gradient"].timing.per_example("explain_forward_equivalents") == 3.0
    # the explanation cache holds them too, on every line
    lines = read_jsonl(next((cost_run / "explanations").glob("synthetic-gradient-*.jsonl")))
    assert len(lines) == N and {(x["forward_rows"], x["backward_rows"]) for x in lines} == {
        (N, N)}


def test_a_cached_explanation_keeps_its_cost_and_an_old_cache_still_loads(cost_run):
    first = by_explainer(read_results(cost_run / "results.jsonl"))
    # another metric: its units reuse the cached explanations (the same seconds prove it)
    assert main(["run", "--out", str(cost_run), *RUN, "--metrics", "flip_rate"]) == 0
    again = by_explainer(r for r in read_results(cost_run / "results.jsonl")
                         if r.metric.startswith("flip_rate"))
    for name, r in again.items():
        old = first[name].timing
        assert r.timing.explain_s == old.explain_s, name  # not explained again
        for key in ("explain_forward_rows", "explain_backward_rows",
                    "explain_forward_equivalents", "explain_peak_mib", "explain_peak_method"):
            assert getattr(r.timing, key) == getattr(old, key), (name, key)
    # a cache file written before faithbench counted (no cost fields) still loads
    path = next((cost_run / "explanations").glob("synthetic-gradient-*.jsonl"))
    write_jsonl_atomic(path, [{k: v for k, v in x.items() if k in
                               ("id", "tokens", "scores", "target", "seconds")}
                              for x in read_jsonl(path)])
    path.with_suffix(".sha256").write_text(file_hash(path) + "\n")
    assert main(["run", "--out", str(cost_run), *RUN, "--metrics", "sufficiency"]) == 0
    suff = by_explainer(r for r in read_results(cost_run / "results.jsonl")
                        if r.metric.startswith("sufficiency"))
    t = suff["gradient"].timing
    assert t.explain_s == first["gradient"].timing.explain_s  # from the old cache file
    assert (t.explain_forward_rows, t.explain_backward_rows, t.explain_peak_mib) == (
        None, None, None)
    assert "explain_forward_rows" not in t.as_dict()  # written only when set


def test_a_resumed_explanation_adds_the_finished_batches_cost(tmp_path, synthetic_ready):
    config = RunConfig(out=str(tmp_path), limit=N, batch_size=5, progress=False)
    session = open_session("synthetic", config)
    explainer = resolve_explainer("gradient")
    batch, *_ = session.batches(session.examples)[0]
    targets = session.targets[:len(batch)]
    # batch 0 finished by an earlier run that was stopped, with the cost it recorded
    append_batch(session._cache().partial(explainer), 0, batch, targets,
                 [[0.0] * int(n) for n in batch.lengths], 0.5, Cost(100, 40, 900.0, "rss_hwm"))
    explained = session.explain(explainer)
    assert explained.scores[0] == [0.0] * int(batch.lengths[0])  # resumed, not redone
    assert rows(explained.cost) == (100 + (N - 5), 40 + (N - 5))
    assert explained.cost.peak_mib == 900.0  # the largest batch's


# ---------------------------------------------------------------- the leaderboard


def csv_rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_leaderboard_cost_is_one_row_per_explainer_charged_every_row_it_asks(cost_run, capsys):
    """``--cost``: one row per explainer. Occlusion asks for the N inputs and one
    deletion per real token, all through the engine it shares with the metrics, which
    answers some from memory: it is charged all N + tokens (its cost alone), not the
    fewer it forwarded (the 0 it was shown before when a metric forwarded them first).
    Gradient: N rows forward and back (3 per example); random asks for none."""
    board = str(cost_run / "leaderboard")
    tokens = real_tokens(cost_run)
    assert main(["leaderboard", "--entries", board, "--format", "csv", "--cost"]) == 0
    lines = {x["explainer"].split("[")[0]: x for x in csv_rows(capsys.readouterr().out)}
    assert set(lines) == {"gradient", "occlusion", "random"}
    rows = {k: int(x["explain_rows"]) for k, x in lines.items()}
    equivalents = {k: int(x["explain_forward_equivalents"]) for k, x in lines.items()}
    assert rows == {"gradient": N, "occlusion": N + tokens, "random": 0}
    assert equivalents == {"gradient": 3 * N, "occlusion": N + tokens, "random": 0}
    forwarded = by_explainer(read_results(cost_run / "results.jsonl"))["occlusion"].timing
    assert forwarded.explain_forward_rows < N + tokens  # the engine shared some
    assert sum(float(x["share"]) for x in lines.values()) == pytest.approx(1.0)
    assert all(float(x["explain_s"]) > 0 and float(x["metric_s"]) > 0 for x in lines.values())
    assert {int(x["examples"]) for x in lines.values()} == {N}
    # the table: one row per explainer, costliest share first, within 120 columns
    assert main(["leaderboard", "--entries", board, "--cost"]) == 0
    text = capsys.readouterr().out
    table = [line.split() for line in text.split("\n\n")[0].splitlines()[2:]]
    assert [t[0] for t in table] == sorted(lines, key=lambda k: -float(lines[k]["share"]))
    assert {t[0]: t[5] for t in table} == {k: f"{v / N:.1f}" for k, v in rows.items()}
    assert "Charging rule" in text and max(map(len, text.splitlines())) <= 120


def test_leaderboard_cost_is_a_mean_over_records_and_blank_without_them(cost_run):
    entry = next(e for e in read_entries(cost_run / "leaderboard")
                 if e.explainer.startswith("gradient"))
    task = entry.results[0].task
    rec = entry.results[0]
    one = replace(rec, timing=Timing(explain_s=2.0, explain_forward_equivalents=30,
                                     n_examples=10))
    two = replace(rec, timing=Timing(explain_s=4.0, explain_forward_equivalents=90,
                                     n_examples=10))
    none = replace(rec, timing=Timing(explain_s=None, n_examples=10))
    cost = explain_cost(SimpleNamespace(results=[one, two, none]), task)
    assert (cost.seconds, cost.forward_equivalents) == pytest.approx((0.3, 6.0))
    blank = explain_cost(SimpleNamespace(results=[none]), task)
    assert blank.cells() == ["", ""] and blank.values() == ["", ""]


def test_the_records_cost_fields_round_trip(cost_run):
    for line in read_jsonl(cost_run / "results.jsonl"):
        record = ResultRecord.from_dict(line)
        assert json.dumps(record.as_dict(), sort_keys=True) == json.dumps(line, sort_keys=True)
