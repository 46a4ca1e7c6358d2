"""Deceptive attention (Pruthi et al. 2020): the penalty against a hand computation on
the BiLSTM, the NLI BiLSTM and a BERT, tiny deceptive models whose attention leaves
the impermissible tokens while they still read them, the NLI shortcut data, and the
meta-evaluation's deception tables and gate."""

import math
import random

import pytest
import torch
from torch import nn

from faithbench.benchmark import meta_eval
from faithbench.benchmark.core.api import Example, TaskOptions
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.models import deception
from faithbench.benchmark.core.models.classifier import AttentionClassifier, ClassifierConfig
from faithbench.benchmark.core.models.pair_classifier import PairAttentionClassifier, PairConfig
from faithbench.benchmark.core.vocab import collate
from faithbench.tasks import shortcut

pytestmark = pytest.mark.usefixtures("one_thread")


def test_penalty_by_hand():
    # one distribution: mass 0.3 + 0.2 on the impermissible tokens -> -log(0.5)
    w = torch.tensor([[0.5, 0.3, 0.2, 0.0]])
    imp = torch.tensor([[False, True, True, False]])
    assert deception.hammer(w, imp).item() == pytest.approx(math.log(2))
    # two distributions (premise 0.6/0.4, hypothesis 0.9/0.1): -log(0.4) - log(0.1)
    w = torch.tensor([[0.6, 0.4, 0.9, 0.1]])
    imp = torch.tensor([[True, False, True, False]])
    got = deception.hammer(w, imp, torch.tensor([[0, 0, 1, 1]]), 2).item()
    assert got == pytest.approx(-math.log(0.4) - math.log(0.1))
    # nothing impermissible: no penalty; everything: the floor keeps it finite
    assert deception.hammer(w, torch.zeros_like(imp)).item() == 0.0
    assert deception.penalty(torch.tensor(1.0)).item() == pytest.approx(-math.log(1e-6))


def _batch(rows, imp, segments=None):
    b = collate(rows, [str(i) for i in range(len(rows))], segments=segments)
    marks = torch.zeros_like(b.mask)
    for i, m in enumerate(imp):
        marks[i, : len(m)] = torch.tensor(m)
    return b.replace(impermissible=marks)


def test_bilstm_loss_is_cross_entropy_plus_lambda_times_the_penalty():
    torch.manual_seed(0)
    model = AttentionClassifier(ClassifierConfig(vocab_size=20, num_classes=2, embed_dim=8,
                                                 hidden=8, attn_dim=8, dropout=0.0,
                                                 deceive_weight=0.7)).eval()
    batch = _batch([[3, 4, 5, 6], [7, 8]], [[False, True, False, True], [True, False]])
    labels = torch.tensor([1, 0])
    weights = model.attention(batch)  # (B, T), one distribution per row
    mass = (weights * batch.impermissible).sum(1)
    want = (nn.functional.cross_entropy(model.logits(batch), labels)
            + 0.7 * (-torch.log(1 - mass)).mean())
    assert model.training_loss(batch, labels).item() == pytest.approx(want.item(), rel=1e-6)
    assert model.attention_mass(batch, batch.impermissible).tolist() == pytest.approx(
        mass.tolist())


def test_nli_bilstm_penalises_each_sentence_attention_alone():
    torch.manual_seed(0)
    model = PairAttentionClassifier(PairConfig(vocab_size=20, num_classes=3, embed_dim=8,
                                               hidden=8, attn_dim=8, mlp_dim=8, dropout=0.0,
                                               deceive_weight=2.0)).eval()
    # premise 3 tokens, hypothesis 3 tokens with the impermissible one in the hypothesis
    batch = _batch([[3, 4, 5, 6, 7, 8]], [[False, False, False, False, True, False]],
                   segments=[[0, 0, 0, 1, 1, 1]])
    labels = torch.tensor([2])
    row = model.attention(batch)  # each sentence's weights halved: the row sums to 1
    hypothesis_mass = 2 * row[0, 4].detach().item()  # its own distribution sums to 1
    want = (nn.functional.cross_entropy(model.logits(batch), labels).item()
            - 2.0 * math.log(1 - hypothesis_mass))
    assert model.training_loss(batch, labels).item() == pytest.approx(want, rel=1e-6)
    assert model.attention_mass(batch, batch.impermissible).item() == pytest.approx(
        hypothesis_mass, rel=1e-6)


def test_bert_penalty_is_the_last_layer_cls_row_of_every_head():
    from tests.tiny_bert import random_bert

    hf, model, tokenizer, batch = random_bert(["zeroa is a fine film", "onea bad"], scale=3.0)
    model.deceive_weight = 0.5  # as build_finetune's TransformerConfig(deceive_weight=0.5)
    n = [len(tokenizer.tokenize(w)) for w in ("zeroa", "onea")]  # pieces of the made-up word
    imp = torch.zeros_like(batch.mask)
    imp[0, : n[0]] = True
    imp[1, : n[1]] = True
    batch = batch.replace(impermissible=imp)
    labels = torch.tensor([1, 2])
    # the library's own forward on [CLS] pieces [SEP]: positions shift by one
    ids = [[tokenizer.cls_token_id, *batch.tokens_of(r), tokenizer.sep_token_id]
           for r in range(2)]
    width = max(map(len, ids))
    pad = tokenizer.pad_token_id
    full = torch.tensor([r + [pad] * (width - len(r)) for r in ids])
    out = hf(input_ids=full, attention_mask=(full != pad).long(), output_attentions=True)
    cls = out.attentions[-1][:, :, 0, :]  # (B, H, S)
    mass = torch.stack([cls[r, :, 1 : 1 + n[r]].sum(-1) for r in range(2)])  # (B, H)
    want = (nn.functional.cross_entropy(out.logits, labels)
            - 0.5 * torch.log(1 - mass).mean())
    assert model.training_loss(batch, labels).item() == pytest.approx(want.item(), rel=1e-6)
    assert model.attention_mass(batch, imp).tolist() == pytest.approx(mass.mean(1).tolist())


def _trained(deceive, tmp_path, monkeypatch, **options):
    from faithbench import tasks

    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path))
    task = tasks.get_task(options.pop("task", "synthetic"))
    return task.prepare(TaskOptions(deceive=deceive, **options), progress=False)


def test_deceptive_synthetic_model_hides_its_evidence_and_still_reads_it(tmp_path, monkeypatch):
    """The offline task's planted polar words are its impermissible tokens: at λ = 1
    the attention mass on them falls from most of the attention to almost none, while
    the model stays right and deleting them still flips its decisions."""
    out = {}
    for lam in (None, 1.0):
        ready = _trained(lam, tmp_path, monkeypatch, train_limit=1500, epochs=4)
        test = ready.splits["test"][:200]
        batch, _, ref = ready.collate(test)
        mass = float(ready.model.attention_mass(batch, ref).mean())
        kept = [Example(e.id, tuple(t for t, r in zip(e.tokens, e.reference) if not r)
                        or ("the",), e.label) for e in test]
        with torch.no_grad():
            before = ready.model.logits(batch).argmax(-1)
            after = ready.model.logits(ready.collate(kept)[0]).argmax(-1)
        out[lam] = (ready.spec.id, ready.accuracy["test"], mass,
                    float((before != after).float().mean()))
    assert out[None][0] == "synthetic[seed=0]@1"
    assert out[1.0][0] == "synthetic[deceive=1.0;seed=0]@1"  # its own suite
    assert out[None][2] > 0.5 and out[1.0][2] < 0.05  # attention looks away
    assert out[1.0][1] > 0.9  # and the model is still right
    assert out[1.0][3] > 0.3  # because it still reads the polar words


def _mass(ready, split="test", n=200):
    batch, _, ref = ready.collate(ready.splits[split][:n])
    return float(ready.model.attention_mass(batch, ref).mean())


@pytest.mark.parametrize("name", ["shortcut_single", "shortcut_nli_single"])
def test_meta_eval_of_deceptive_models_on_real_shortcut_data(name, shared_data, tmp_path,
                                                             monkeypatch, capsys):
    """SST-2 and SNLI with a planted token (a slice, two epochs), through the command:
    λ = 1 moves the attention off the shortcut that λ = 0 looks at, and the reliance
    table says so for both models (the tables on reliant models: the unit tests)."""
    from faithbench.benchmark.cli import main

    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "meta"
    for lam in ("0", "1"):
        assert main(["--threads", "1", "meta-eval", "--tasks", name, "--deceive", lam,
                     "--data-dir", str(shared_data), "--train-limit", "1500", "--epochs", "2",
                     "--limit", "40", "--explainers", "attention", "gradient_x_input",
                     "--metrics", "comprehensiveness", "--out", str(out),
                     "--no-progress"]) == 0
    values = meta_eval.Values.read(out / "meta_eval" / meta_eval.VALUES)
    mass = {meta_eval.deceived(r["task"])[1]: r["attention_mass"] for r in values.reliance}
    assert mass[0.0] > 0.3 and mass[1.0] < 0.05
    text = meta_eval.render(values, tables=["reliance"], captions=False)
    assert f"{name}@1" in text and f"{name}[deceive=1.0]@1" in text


def test_deceptive_minilm_moves_its_cls_attention(tmp_path, monkeypatch):
    """The transformer family (one layer of MiniLM, a slice of the synthetic task): the
    [CLS] row's mass on the polar words falls under λ = 1."""
    pytest.importorskip("transformers")
    mass = {lam: _mass(_trained(lam, tmp_path, monkeypatch, model="transformer",
                                model_layers=1, epochs=1, train_limit=400), n=100)
            for lam in (None, 1.0)}
    assert mass[1.0] < 0.6 * mass[None]  # 0.013 against 0.025 when written


@pytest.mark.parametrize("kind", shortcut.KINDS)
def test_nli_shortcuts_go_into_the_hypothesis(kind):
    rng = random.Random(0)
    splits = {s: [Example(f"{s}-{i}", ("p1", "p2", "h1", "h2", "h3"), rng.randrange(3),
                          segments=(0, 0, 1, 1, 1)) for i in range(600)]
              for s in ("train", "validation", "test")}
    out = shortcut.with_shortcuts(kind, splits, labels=3, hypothesis=True, name=f"nli-{kind}")
    size = 1 if kind == "single" else 2
    for e in out["test"]:
        assert e.tokens[:2] == ("p1", "p2")  # the premise is untouched
        assert e.segments == (0, 0) + (1,) * (len(e.tokens) - 2)
        assert sum(e.reference) == size
        assert shortcut.shortcut_label(e.tokens, kind, labels=3) == e.label
    assert {e.label for e in out["test"]} == {0, 1, 2}
    for agree, contra, orig in zip(out["test_agree"], out["test_contradict"], splits["test"]):
        assert agree.label == orig.label and contra.label != orig.label
        assert shortcut.shortcut_label(contra.tokens, kind, labels=3) == contra.label
    if kind == "pair":  # the second token is drawn from both other labels: order decides
        seconds = {next(t for t in e.tokens[e.tokens.index(shortcut.TOKENS[e.label]) + 1:]
                        if t in shortcut.TOKENS) for e in out["test"] if e.label == 0}
        assert seconds == {"onea", "twoa"}


def test_deceive_is_refused_where_it_means_nothing(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="no impermissible tokens.*shortcut_single"):
        _trained(1.0, tmp_path, monkeypatch, task="sentiment")
    with pytest.raises(InputError, match="uniform"):
        _trained(1.0, tmp_path, monkeypatch, bilstm="uniform")
    with pytest.raises(InputError, match="finite number"):
        _trained(-1.0, tmp_path, monkeypatch)


def _values(rows):
    return meta_eval.Values.of_rows(rows)


def _rows(task, seed, gaps, relies=True):
    """Values rows of one model: attention finds the truth on no example, gradient on
    every one; the metric ranks them by ``gaps`` (gradient's values minus attention's)."""
    ids = [f"e{i}" for i in range(len(gaps))]
    out = [{"kind": "reliance", "key": f"{task}{seed}", "task": task, "seed": seed,
            "checkpoint": "c", "selection": "s", "accuracy": {"test": 1.0},
            "scored_accuracy": 1.0 if relies else 0.5, "flip_when_deleted": 0.5,
            "attention_mass": 0.01, "n": len(gaps)}]
    for explainer, precision, metric in (("attention@1", 0.0, [0.0] * len(gaps)),
                                         ("gradient@1", 1.0, list(gaps))):
        for name, vals in (("r_precision@1", [precision] * len(gaps)),
                           ("comprehensiveness@1", metric)):
            out.append({"kind": "values", "key": f"{task}{seed}{explainer}{name}",
                        "task": task, "seed": seed, "checkpoint": "c", "selection": "s",
                        "explainer": explainer, "metric": name, "direction": "higher",
                        "ids": ids, "values": vals})
    return out


def test_verdicts_say_whether_a_metric_ranks_attention_below_the_finders():
    rng = random.Random(0)
    rows = []
    for seed in (0, 1, 2):
        rows += _rows("shortcut_single@1", seed, [0.2 + rng.gauss(0, 0.05) for _ in range(50)])
        rows += _rows("shortcut_single[deceive=1.0]@1", seed,
                      [-0.2 + rng.gauss(0, 0.05) for _ in range(50)])
    values = _values(rows)
    verdicts = {r["lambda"]: r["attention_last"]["verdict"]
                for r in meta_eval.attention_verdicts(values)}
    assert verdicts == {0.0: "yes", 1.0: "no"}
    text = meta_eval.render(values, tables=["deception", "verdicts"])
    assert "λ = 0" in text and "λ = 1" in text and "shortcut_single@1" in text


def test_the_gate_leaves_out_a_deceptive_model_that_stopped_relying():
    rows = []
    for seed in (0, 1):
        rows += _rows("shortcut_single@1", seed, [0.2] * 10)
        rows += _rows("shortcut_single[deceive=1.0]@1", seed, [0.2] * 10, relies=seed == 0)
    values = _values(rows)
    _, matrix = values.matrix("shortcut_single[deceive=1.0]@1", "r_precision@1", "gradient@1")
    assert matrix.shape == (1, 10)  # seed 1 stopped following the shortcut: left out
    rel = {(r["task"], r["seed"]): r["relies"] for r in meta_eval.reliance_table(values)}
    assert rel[("shortcut_single[deceive=1.0]@1", 1)] is False
    table = meta_eval.render(values, tables=["reliance"], captions=False)
    assert "no: left out" in table and "0.010" in table  # the attention mass column


def test_the_site_draws_the_deception_tables():
    from faithbench.benchmark.site import esc, meta_eval_page

    rows = []
    for seed in (0, 1):
        rows += _rows("shortcut_single@1", seed, [0.2, 0.3, 0.25])
        rows += _rows("shortcut_single[deceive=1.0]@1", seed, [-0.2, -0.3, -0.25])
    page = meta_eval_page(_values(rows))
    assert all(esc(meta_eval.CAPTIONS[t]) in page for t in ("deception", "verdicts"))
    assert "λ = 1" in page and "attention" in page


def test_meta_eval_does_not_score_a_model_that_ignores_its_ground_truth(tmp_path, monkeypatch,
                                                                       caplog):
    """A model below the reliance gate gets its reliance row and nothing else: its values
    would be left out of every table, so computing them is waste."""
    from faithbench.benchmark.cli import main

    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "meta"
    assert main(["--threads", "1", "meta-eval", "--train-limit", "40", "--epochs", "1",
                 "--allow-weak-model", "--limit", "30", "--explainers", "gradient",
                 "--metrics", "comprehensiveness", "--out", str(out), "--no-progress"]) == 0
    rows = list(meta_eval.read_jsonl(out / "meta_eval" / meta_eval.VALUES))
    assert [r["kind"] for r in rows] == ["reliance"]
    assert rows[0]["scored_accuracy"] < meta_eval.RELIANCE_MIN
    assert "left out, not scored" in caplog.text
