"""The attention debate (``faithbench debate``): each experiment's quantity against an
independent computation.

Most tests use ``Pooled``, a model whose output under any attention is a softmax a
test can write down: logits = Σ_t α_t W[x_t] (the context is the attended embedding
rows, no encoder). Its hand-worked outputs are computed in plain Python here, never by
the library's readout. The synthetic task's BiLSTM checks that the readout on fixed
states is the model's own output, and the CLI runs end to end, resuming.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch

from faithbench.benchmark.core.api import Batch
from faithbench.benchmark.debate import jain_wallace, ops, serrano_smith, tables, vashishth
from faithbench.benchmark.debate.jain_wallace import row_generator


class Pooled(torch.nn.Module):
    """logits = Σ_t α_t W[x_t]; its own attention α = softmax(s[x_t]) over real tokens."""

    def __init__(self, weights: dict[int, list[float]], scores: dict[int, float]):
        super().__init__()
        vocab = max(max(weights), max(scores)) + 1
        classes = len(next(iter(weights.values())))
        self.w = torch.nn.Parameter(torch.zeros(vocab, classes))
        self.s = torch.nn.Parameter(torch.zeros(vocab))
        with torch.no_grad():
            for i, row in weights.items():
                self.w[i] = torch.tensor(row)
            for i, v in scores.items():
                self.s[i] = v
        self.pad_id = self.mask_id = 0

    def embed(self, batch):
        return self.w[batch.ids]

    def own(self, batch):
        """Softmax over the real tokens; an emptied row attends to nothing (logits 0)."""
        scores = self.s[batch.ids].masked_fill(~batch.mask, float("-inf"))
        return torch.nan_to_num(torch.softmax(scores, dim=1))

    def attention_leaf(self, batch):
        return self.own(batch).unsqueeze(1), None

    def logits_fixed_attention(self, embeds, batch, weights):
        return (weights[:, 0].unsqueeze(-1) * embeds * batch.mask.unsqueeze(-1)).sum(1)

    def logits_from_attention(self, weights, batch):
        return self.logits_fixed_attention(self.embed(batch), batch, weights)

    def attention_readout(self, batch):
        return lambda weights: self.logits_from_attention(weights, batch)

    def logits(self, batch):
        return self.logits_from_attention(self.own(batch).unsqueeze(1), batch)


W = {1: [2.0, -1.0], 2: [-1.5, 1.0], 3: [0.3, 0.2], 4: [-0.2, 0.9], 5: [1.2, 1.0]}
S = {1: 1.5, 2: 0.2, 3: -0.5, 4: 0.7, 5: 0.0}
ROWS = [[1, 2, 3], [2, 4, 5, 3], [5, 1]]


def batch_of(rows, ids=None):
    width = max(map(len, rows))
    ids_ = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[True] * len(r) + [False] * (width - len(r)) for r in rows])
    return Batch(ids_, mask, tuple(ids or (f"r{i}" for i in range(len(rows)))))


def softmax(xs):
    top = max(xs)
    e = [math.exp(x - top) for x in xs]
    return [v / sum(e) for v in e]


def hand_output(row, alpha):
    """softmax(Σ_t α_t W[x_t]) in plain Python."""
    return softmax([sum(a * W[x][c] for a, x in zip(alpha, row)) for c in range(2)])


def hand_attention(row):
    return softmax([S[x] for x in row])


def hand_tvd(p, q):
    return 0.5 * sum(abs(a - b) for a, b in zip(p, q))


def hand_jsd(p, q):
    m = [(a + b) / 2 for a, b in zip(p, q)]
    def kl(a):
        return sum(x * math.log(x / y) for x, y in zip(a, m) if x > 0)

    return 0.5 * kl(p) + 0.5 * kl(q)


@pytest.fixture
def pooled():
    model = Pooled(W, S)
    batch = batch_of(ROWS)
    base = torch.tensor([hand_output(r, hand_attention(r)) for r in ROWS], dtype=torch.float64)
    return model, batch, base


# ---- the operations --------------------------------------------------------------------------


def test_group_operations_keep_each_sentence_summing_to_one():
    batch = Batch(torch.tensor([[3, 4, 5, 6, 0]]), torch.tensor([[1, 1, 1, 1, 0]]).bool(),
                  ("p",), segments=torch.tensor([[0, 0, 1, 1, 0]]))
    group = ops.groups(batch)
    assert group.tolist() == [[0, 0, 1, 1, -1]]
    w = torch.tensor([[0.2, 0.6, 0.3, 0.1, 0.0]])
    assert ops.renormalise(w, group)[0].tolist() == pytest.approx([0.25, 0.75, 0.75, 0.25, 0.0])
    assert ops.uniform(group)[0].tolist() == [0.5, 0.5, 0.5, 0.5, 0.0]
    shuffled = ops.permuted(w, group, [torch.Generator().manual_seed(1)])
    assert sorted(shuffled[0, :2].tolist()) == pytest.approx([0.2, 0.6])  # within a sentence
    assert sorted(shuffled[0, 2:4].tolist()) == pytest.approx([0.1, 0.3])
    r = ops.random_weights(group, [torch.Generator().manual_seed(2)])
    assert float(r[0, :2].sum()) == pytest.approx(1.0) and float(r[0, 4]) == 0.0


def test_permutations_are_uniform_over_the_orders():
    """600 draws of a 3-token row: each of the 3! orders about 100 times."""
    w = torch.tensor([[0.5, 0.3, 0.2]])
    group = torch.zeros(1, 3, dtype=torch.long)
    gen = torch.Generator().manual_seed(0)
    seen = [tuple(ops.permuted(w, group, [gen])[0].tolist()) for _ in range(600)]
    counts = [seen.count(tuple(float(x) for x in torch.tensor(p).tolist()))
              for p in itertools.permutations([0.5, 0.3, 0.2])]
    assert len(counts) == 6 and min(counts) > 65 and max(counts) < 135


def test_tvd_and_jsd_by_hand():
    p = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64)
    q = torch.tensor([0.1, 0.3, 0.6], dtype=torch.float64)
    assert float(ops.tvd(p, q)) == pytest.approx(0.6)
    assert float(ops.jsd(p, q)) == pytest.approx(hand_jsd(p.tolist(), q.tolist()), abs=1e-8)
    assert float(ops.jsd(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]))) == pytest.approx(
        math.log(2), abs=1e-6)


# ---- Jain & Wallace ----------------------------------------------------------------------------


def test_permutation_median_tvd_by_hand(pooled):
    model, batch, base = pooled
    got = jain_wallace.permutation(model, batch, base, permutations=25)
    for b, row in enumerate(ROWS):
        alpha = hand_attention(row)
        gen = row_generator(batch.example_ids[b], "jain_wallace permutation")
        changes = []
        for _ in range(25):
            order = torch.randperm(len(row), generator=gen).tolist()
            changes.append(hand_tvd(hand_output(row, [alpha[i] for i in order]),
                                    hand_output(row, alpha)))
        assert got["median_tvd"][b] == pytest.approx(float(np.median(changes)), abs=1e-6)
        assert len({round(c, 9) for c in changes}) > 1  # the shuffles did change outputs
        assert got["max_attention"][b] == pytest.approx(max(alpha), abs=1e-6)


def test_correlations_by_hand(pooled):
    """Gradient importance |∂p_ŷ/∂e_t · e_t| with α fixed is the derivative of p_ŷ as
    e_t is scaled: a central finite difference on the hand-written output; leave-one-out
    deletes each token, the model's own attention over what is left."""
    from scipy.stats import kendalltau
    model, batch, base = pooled
    got = jain_wallace.correlations(model, batch, base)
    for b, row in enumerate(ROWS):
        alpha = hand_attention(row)
        p = hand_output(row, alpha)
        y = p.index(max(p))
        grads = []
        for t, x in enumerate(row):  # d p_y / d (scale of e_t) at scale 1 = ∇_e p_y · e_t
            h = 1e-6

            def scaled(k, t=t, alpha=alpha, row=row, y=y):
                logits = [sum(a * W[z][c] * (k if i == t else 1.0)
                              for i, (a, z) in enumerate(zip(alpha, row))) for c in range(2)]
                return softmax(logits)[y]
            grads.append(abs((scaled(1 + h) - scaled(1 - h)) / (2 * h)))
        loo = []
        for t in range(len(row)):
            rest = row[:t] + row[t + 1:]
            loo.append(hand_tvd(hand_output(rest, hand_attention(rest)), p))
        tau_g = kendalltau(alpha, grads).statistic
        tau_l = kendalltau(alpha, loo).statistic
        assert got["tau_gradient"][b] == pytest.approx(tau_g, abs=1e-9)
        assert got["tau_loo"][b] == pytest.approx(tau_l, abs=1e-9)
    assert math.isnan(jain_wallace.correlations(
        model, batch_of([[1]]), base[:1])["tau_gradient"][0])  # one token: undefined


def test_every_adversarial_distribution_is_within_the_budget(pooled):
    model, batch, base = pooled
    out = jain_wallace.adversarial(model, batch, base, steps=60, epsilon=0.05)
    for b, row in enumerate(ROWS):
        kept = out.weights[b, : len(row)].tolist()
        assert sum(kept) == pytest.approx(1.0, abs=1e-6) and min(kept) >= 0
        change = hand_tvd(hand_output(row, kept), hand_output(row, hand_attention(row)))
        assert change <= 0.05 + 1e-9
        assert out.tvd[b] == pytest.approx(change, abs=1e-6)
        assert out.jsd[b] == pytest.approx(hand_jsd(kept, hand_attention(row)), abs=1e-6)
    assert max(out.jsd) > 0.05  # the search moved away from the model's own attention


def test_an_adversary_outside_the_budget_is_never_kept(pooled):
    """With ε = 0 only the model's own attention qualifies (float32 noise aside): JSD 0
    everywhere."""
    model, batch, base = pooled
    out = jain_wallace.adversarial(model, batch, base, steps=5, epsilon=0.0)
    assert out.jsd == pytest.approx([0.0] * 3, abs=1e-9)
    assert max(out.tvd) <= jain_wallace.FLOAT_NOISE


# ---- Serrano & Smith ---------------------------------------------------------------------------


def hand_flip_fraction(row, order):
    """Zero weights in ``order`` one at a time, renormalising; the fraction zeroed at the
    first flip of the argmax, or NaN."""
    alpha = hand_attention(row)
    p = hand_output(row, alpha)
    y = p.index(max(p))
    zeroed = set()
    for k, t in enumerate(order, start=1):
        zeroed.add(t)
        left = [0.0 if i in zeroed else a for i, a in enumerate(alpha)]
        total = sum(left)
        q = hand_output(row, [a / total for a in left]) if total > 0 else softmax([0.0, 0.0])
        if q.index(max(q)) != y:
            return k / len(row)
    return float("nan")


def test_multiple_erasure_counts_by_hand(pooled):
    model, batch, base = pooled
    got = serrano_smith.multiple(model, batch, base)
    for b, row in enumerate(ROWS):
        alpha = hand_attention(row)
        by_attention = sorted(range(len(row)), key=lambda t: -alpha[t])
        want = hand_flip_fraction(row, by_attention)
        have = got["fraction_attention"][b]
        assert (math.isnan(want) and math.isnan(have)) or have == pytest.approx(want)
    # the worked row: [1, 2, 3] predicts class 0 (token 1 dominates); zeroing token 1
    # leaves tokens 2 and 3, whose weighted sum favours class 1: a flip after 1 of 3
    assert got["fraction_attention"][0] == pytest.approx(1 / 3)


def test_single_erasure_by_hand(pooled):
    model, batch, base = pooled
    got = serrano_smith.single(model, batch, base)
    for b, row in enumerate(ROWS):
        alpha = hand_attention(row)
        top = alpha.index(max(alpha))
        left = [0.0 if i == top else a for i, a in enumerate(alpha)]
        q = hand_output(row, [a / sum(left) for a in left])
        p = hand_output(row, alpha)
        assert got["js_max"][b] == pytest.approx(hand_jsd(q, p), abs=1e-6)
        assert got["flip_max"][b] == float(q.index(max(q)) != p.index(max(p)))
        assert got["delta_js"][b] == pytest.approx(got["js_max"][b] - got["js_random"][b])
    assert got["js_random"][2] == pytest.approx(  # two tokens: "random" is the other one
        hand_jsd(hand_output([5, 1], [0.0, 1.0]), hand_output([5, 1], hand_attention([5, 1]))),
        abs=1e-6)


# ---- Vashishth et al. --------------------------------------------------------------------------


def test_altered_attention_by_hand(pooled):
    model, batch, _ = pooled
    labels = torch.tensor([0, 1, 0])
    got = vashishth.altered(model, batch, labels)
    for b, row in enumerate(ROWS):
        learned = hand_output(row, hand_attention(row))
        uniform = hand_output(row, [1 / len(row)] * len(row))
        assert got["correct_learned"][b] == float(learned.index(max(learned)) == labels[b])
        assert got["correct_uniform"][b] == float(uniform.index(max(uniform)) == labels[b])
        assert got["changed_uniform"][b] == float(
            uniform.index(max(uniform)) != learned.index(max(learned)))


# ---- a real model: the readout is the model's own output ---------------------------------------


def test_the_readout_on_fixed_states_is_the_models_output(synthetic_ready):
    model = synthetic_ready.model
    model.eval()
    batch, _, _ = next(synthetic_ready.batches(synthetic_ready.splits["test"][:16], 16))
    weights, _ = model.attention_leaf(batch)
    with torch.no_grad():
        assert torch.allclose(model.attention_readout(batch)(weights), model.logits(batch),
                              atol=1e-5)
        other = ops.uniform(ops.groups(batch)).unsqueeze(1)
        assert torch.allclose(model.attention_readout(batch)(other),
                              model.logits_from_attention(other, batch), atol=1e-5)


# ---- verdicts: a false "holds" is rare at the threshold ----------------------------------------


def test_a_false_holds_is_rare_when_the_truth_sits_at_the_threshold():
    """400 simulated runs (3 seeds x 150 examples, seed effects sd 0.05, example noise
    sd 0.3) whose true mean is the threshold: "holds" should come out at most at the
    one-sided rate 2.5 % (allowing 2 sd of simulation error: 4.1 %); and with the truth
    0.15 below it, "holds" comes out most of the time."""
    rng = np.random.default_rng(0)

    def draw(mean):
        seeds = rng.normal(0, 0.05, size=(3, 1))
        return mean + seeds + rng.normal(0, 0.3, size=(3, 150))

    wrong = sum(tables.verdict(**_ci(draw(0.5)), threshold=0.5, side="below") == tables.HOLDS
                for _ in range(400))
    right = sum(tables.verdict(**_ci(draw(0.35)), threshold=0.5, side="below") == tables.HOLDS
                for _ in range(400))
    assert wrong / 400 <= 0.041
    assert right / 400 >= 0.5


def _ci(matrix):
    e = tables.estimate(matrix)
    return {"ci_low": e["ci_low"], "ci_high": e["ci_high"]}


# ---- the verb ------------------------------------------------------------------------------------


def test_seed_jsd_and_uniform_baseline_by_hand(tmp_path, synthetic_ready):
    """wp_seeds: JSD between the attention of seed 1's model and seed 0's, written out;
    wp_uniform: the uniform-trained model's correctness, from its own predictions."""
    from faithbench.benchmark import debate
    from faithbench.benchmark.plan import RunConfig
    from faithbench.benchmark.session import open_session
    config = RunConfig(limit=12, seeds=(0, 1), out=str(tmp_path), progress=False)
    path = debate.run(config, ["wp_seeds", "wp_uniform"])
    rows = {(r["experiment"], r["model"]["seed"]): r
            for r in map(json.loads, path.read_text().splitlines())}
    assert ("wp_seeds", 0) not in rows and ("wp_uniform", 1) in rows
    a, b = open_session("synthetic", config, 0), open_session("synthetic", config, 1)
    batch, labels, _ = a.batches(a.examples)[0]
    wa, wb = a.prepared.model.attention(batch), b.prepared.model.attention(batch)
    for i in range(len(batch)):
        n = int(batch.mask[i].sum())
        want = hand_jsd(wb[i, :n].tolist(), wa[i, :n].tolist())
        assert rows["wp_seeds", 1]["values"]["jsd_to_base_seed"][i] == pytest.approx(want,
                                                                                    abs=1e-6)
    from dataclasses import replace
    uniform = open_session("synthetic", replace(config, bilstm="uniform"), 0)
    net = uniform.prepared.model
    assert torch.allclose(net.attention(batch).sum(1), torch.ones(len(batch)))
    assert float(net.attention(batch)[0, 0]) == pytest.approx(1 / int(batch.mask[0].sum()))
    predicted = net.logits(batch).argmax(-1)
    assert rows["wp_uniform", 0]["values"]["correct_uniform_trained"] == (
        predicted == labels).double().tolist()


def test_debate_runs_resumes_and_renders(tmp_path, synthetic_ready, capsys):
    from faithbench.benchmark.cli import main
    cheap = ["jw_correlation", "jw_permutation", "jw_adversarial", "ss_single", "ss_multiple",
             "vashishth", "wp_uniform", "wp_seeds", "mohankumar"]  # those that train less
    args = ["--threads", "1", "debate", "--limit", "24", "--seeds", "0", "--out", str(tmp_path),
            "--no-progress", "--permutations", "5", "--adversary-steps", "5",
            "--experiments", *cheap]
    assert main(args) == 0
    values = tmp_path / "debate" / "values.jsonl"

    def strict(constant):  # NaN / Infinity: not JSON; strict parsers (orjson) refuse it
        raise AssertionError(f"values.jsonl holds {constant}")

    rows = [json.loads(line, parse_constant=strict) for line in values.read_text().splitlines()]
    assert any(v is None for r in rows for vals in r["values"].values() for v in vals)
    assert sorted(r["experiment"] for r in rows) == sorted(  # wp_seeds needs a second seed
        ["jw_correlation", "jw_permutation", "jw_adversarial", "ss_single", "ss_multiple",
         "vashishth", "wp_uniform", "mohankumar"])
    assert all(len(r["ids"]) == 24 and all(len(v) == 24 for v in r["values"].values())
               for r in rows)
    # mohankumar on a task whose evidence is planted: precision@k of attention, by hand
    [mh] = [r for r in rows if r["experiment"] == "mohankumar"]
    assert mh["model"]["checkpoint"] == synthetic_ready.checkpoint
    by_id = {e.id: e for e in synthetic_ready.splits["test"]}
    examples = [by_id[i] for i in mh["ids"]]
    batch, _, _ = next(iter(synthetic_ready.batches(examples, len(examples))))
    with torch.no_grad():
        attention = synthetic_ready.model.attention(batch)
    for b, (e, got) in enumerate(zip(examples, mh["values"]["precision_attention"])):
        k = sum(e.reference)
        top = np.argsort(-attention[b, : len(e.tokens)].numpy(), kind="stable")[:k]
        assert got == pytest.approx(sum(e.reference[i] for i in top) / k)
    out = capsys.readouterr().out
    assert "Jain & Wallace 2019" in out and "verdict" in out
    assert max(len(line) for line in out.splitlines()  # a terminal's width (the path aside)
               if not line.startswith("values: ")) <= 120
    assert main(args) == 0  # everything there: nothing computed, nothing appended
    assert len(values.read_text().splitlines()) == 8
    assert main(["debate", "--tables-only", "--out", str(tmp_path), "--table", "claims"]) == 0
    assert main(["debate", "--tables-only", "--out", str(tmp_path), "--table", "costs"]) == 0
    costs = capsys.readouterr().out
    assert "jw_adversarial" in costs and "ms per example" in costs
    site = tmp_path / "site"  # the site's debate page, from the same values file
    (tmp_path / "no_entries").mkdir()
    assert main(["site", "--entries", str(tmp_path / "no_entries"), "--debate", str(tmp_path),
                 "--out", str(site)]) == 0
    page = (site / "debate.html").read_text()
    claims = tables.claims(tables.Rows.read(values))
    assert page.count("<tr>") >= len(claims) + 1 and "Jain &amp; Wallace 2019" in page
    assert all(r["verdict"] in page for r in claims if r["verdict"])
    assert 'href="debate.html"' in (site / "index.html").read_text()
    assert main(["debate", "--experiments", "jw_permutaton", "--out", str(tmp_path)]) == 2
    assert "did you mean 'jw_permutation'" in capsys.readouterr().err



# ---- Wiegreffe & Pinter's diagnostic MLP and adversarial model -----------------------------


def test_the_diagnostic_mlp_pools_with_the_frozen_base_attention(synthetic_ready):
    from faithbench.benchmark.core.models.training import TrainConfig
    from faithbench.benchmark.debate import diagnostic
    base = synthetic_ready.model
    before = {k: v.clone() for k, v in base.state_dict().items()}
    quick = TrainConfig(epochs=1, patience=1, lr=1e-3, batch_size=32)
    small = type(synthetic_ready)(**{**synthetic_ready.__dict__, "splits": {
        **synthetic_ready.splits, "train": synthetic_ready.splits["train"][:200]}})
    mlp = diagnostic.fit(small, "base", 0, config=quick)
    assert all(torch.equal(v, base.state_dict()[k]) for k, v in before.items())  # frozen
    batch, _, _ = next(synthetic_ready.batches(synthetic_ready.splits["test"][:8], 8))
    hidden = torch.tanh(mlp.token(mlp.embedding(batch.ids)))
    assert torch.allclose(mlp.weights(batch, hidden), base.attention(batch), atol=1e-6)
    # no context: a token's pooled contribution does not depend on its neighbours
    other = batch.replace(ids=torch.where(torch.arange(batch.ids.shape[1]) == 0, batch.ids,
                                          batch.ids.flip(0)))
    h2 = torch.tanh(mlp.token(mlp.embedding(other.ids)))
    assert torch.equal(hidden[:, 0], h2[:, 0])
    uniform = diagnostic.fit(small, "uniform", 0, config=quick)
    w = uniform.weights(batch, hidden)
    n = batch.mask.sum(1, keepdim=True)
    assert torch.allclose(w, batch.mask / n)


def test_the_adversary_loss_is_tvd_minus_lambda_jsd_by_hand(synthetic_ready):
    from faithbench.benchmark.debate import adversary
    base = synthetic_ready.model
    torch.manual_seed(3)
    model = type(base)(base.config)
    model.eval()
    batch, labels, _ = next(synthetic_ready.batches(synthetic_ready.splits["test"][:6], 6))
    loss, n = adversary.objective(base, 0.7).loss(model, batch, labels)
    tvds, jsds = [], []
    for i in range(len(batch)):
        m = int(batch.mask[i].sum())
        p = torch.softmax(model.logits(batch)[i].double(), -1).tolist()
        q = torch.softmax(base.logits(batch)[i].double(), -1).tolist()
        tvds.append(hand_tvd(p, q))
        jsds.append(hand_jsd(model.attention(batch)[i, :m].tolist(),
                             base.attention(batch)[i, :m].tolist()))
    assert n == 6
    assert float(loss.detach()) == pytest.approx(np.mean(tvds) - 0.7 * np.mean(jsds), abs=1e-5)


def test_on_a_sentence_pair_each_sentence_keeps_its_own_distribution():
    """The NLI model attends within each sentence: the adversary's weights sum to one per
    sentence, the readout on fixed states is the model's output, and erasure runs."""
    from faithbench.benchmark.core.models.pair_classifier import PairAttentionClassifier, PairConfig
    torch.manual_seed(0)
    model = PairAttentionClassifier(PairConfig(vocab_size=30, num_classes=3, embed_dim=8,
                                               hidden=6, attn_dim=5, mlp_dim=5, dropout=0.0))
    model.eval()
    ids = torch.tensor([[3, 4, 5, 6, 7, 0], [8, 9, 10, 11, 12, 13]])
    mask = ids != 0
    segments = torch.tensor([[0, 0, 0, 1, 1, 0], [0, 0, 1, 1, 1, 1]])
    batch = Batch(ids, mask, ("a", "b"), segments=segments)
    with torch.no_grad():
        base = torch.softmax(model.logits(batch).double(), -1)
        weights, _ = model.attention_leaf(batch)
        assert torch.allclose(model.attention_readout(batch)(weights), model.logits(batch),
                              atol=1e-6)
    out = jain_wallace.adversarial(model, batch, base, steps=20)
    for b in range(2):
        for g in (0, 1):
            inside = (segments[b] == g) & mask[b]
            assert float(out.weights[b][inside].sum()) == pytest.approx(1.0, abs=1e-6)
    assert max(out.tvd) <= jain_wallace.EPSILON + jain_wallace.FLOAT_NOISE
    got = serrano_smith.multiple(model, batch, base)
    assert set(got) == {f"fraction_{o}" for o in serrano_smith.ORDERS}


def test_the_bins_by_max_attention_by_hand():
    rows = tables.Rows({("jw_permutation", "t@1", 0): {
        "ids": ["a", "b", "c", "d"],
        "values": {"median_tvd": [0.1, 0.3, 0.2, 0.9], "max_attention": [0.1, 0.2, 0.6, 1.0]}}})
    line = next(r for r in tables.render_bins(rows).splitlines() if "t@1" in r)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2:] == ["0.200 (50%)", "–", "0.200 (25%)", "0.900 (25%)"]


def test_the_frontier_by_hand():
    """One adversary per λ (sorted by value, not by name), then the per-example one."""
    rows = tables.Rows({
        ("wp_adversary", "t@1", 0): {"ids": ["a", "b"], "values": {
            "jsd_lambda_10": [0.6, 0.6], "tvd_lambda_10": [0.3, 0.5],
            "jsd_lambda_0.3": [0.2, 0.4], "tvd_lambda_0.3": [0.0, 0.1]}},
        ("jw_adversarial", "t@1", 0): {"ids": ["a", "b"], "values": {
            "jsd": [0.5, 0.3], "tvd": [0.01, 0.03], "max_attention": [0.5, 0.5]}}})
    got = [(r["model"], r["jsd"]["mean"], r["tvd"]["mean"]) for r in tables.frontier(rows)]
    assert [m for m, *_ in got] == ["trained adversary, λ = 0.3", "trained adversary, λ = 10",
                                    "per-example adversary (Jain & Wallace)"]
    assert [v for _, j, t in got for v in (j, t)] == pytest.approx([0.3, 0.05, 0.6, 0.4,
                                                                    0.4, 0.02])


def test_the_adversary_leaves_the_models_gradient_flags_as_they_were(pooled):
    model, batch, base = pooled
    model.s.requires_grad_(False)  # a frozen parameter stays frozen, a trainable one trainable
    jain_wallace.adversarial(model, batch, base, steps=2)
    assert (model.s.requires_grad, model.w.requires_grad) == (False, True)


def test_a_claim_skips_rows_without_its_quantity():
    """A values file written before a quantity existed (or by another kind of task)
    gives no row for the claims that read it, and no error."""
    rows = tables.Rows({("mohankumar", "t@1", 0): {
        "ids": ["a", "b"], "values": {"conicity": [0.2, 0.4], "correct": [1.0, 0.0],
                                      "comp_attention": [0.1, 0.2],
                                      "comp_integrated_gradients": [0.1, 0.3]}}})
    found = {r["claim"].key for r in tables.claims(rows)}
    assert "MH-3" in found and "MH-4" not in found
