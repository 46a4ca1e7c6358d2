"""The transformer family: the Hugging Face adapter against the library's own forward,
attention and rollout against hand computation, word-level erasure, the ferret
presets against an independent re-implementation of ferret's evaluators over text,
label mapping of a user's checkpoint, and a small fine-tuning run."""


import importlib

import numpy as np
import pytest
import torch
from scipy.stats import kendalltau

from faithbench.benchmark.core.api import Batch, MetricInput, TaskOptions, capabilities
from faithbench.benchmark.core.errors import DataFileError, InputError, PluginError
from faithbench.benchmark.core.isolation import plugin_caller
from faithbench.benchmark.core.perturb import Perturber
from faithbench.benchmark.core.vocab import collate

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")

SENTENCES = ["a gorgeous , witty , seductive movie .", "the unbearable lightness of being",
             "it 's not a bad film at all"]
HYPOTHESES = ["it is good", "a dog sat on the mat .", "nobody watched"]


@pytest.fixture(scope="module")
def tokenizer():
    from faithbench.tasks.transformer import base_path, load_tokenizer
    return load_tokenizer(base_path())


@pytest.fixture(scope="module")
def tiny(tokenizer):
    """A randomly initialised two-layer BERT over MiniLM's vocabulary, and its adapter."""
    from transformers import BertConfig, BertForSequenceClassification

    from faithbench.benchmark.core.models.transformer import TransformerClassifier
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, num_labels=2,
                        attn_implementation="eager")
    hf = BertForSequenceClassification(config).eval()
    return hf, TransformerClassifier(hf, tokenizer).eval()


def pieces(tokenizer, text):
    return tokenizer(text.split(), is_split_into_words=True, add_special_tokens=False)


def single_batch(tokenizer, texts):
    enc = [pieces(tokenizer, t) for t in texts]
    return collate([e["input_ids"] for e in enc], [f"r{i}" for i in range(len(texts))],
                   words=[e.word_ids() for e in enc])


def pair_batch(tokenizer, premises, hypotheses):
    a = [pieces(tokenizer, t)["input_ids"] for t in premises]
    b = [pieces(tokenizer, t)["input_ids"] for t in hypotheses]
    return collate([x + y for x, y in zip(a, b)], [f"p{i}" for i in range(len(a))],
                   segments=[[0] * len(x) + [1] * len(y) for x, y in zip(a, b)])


@torch.no_grad()
def test_adapter_logits_equal_the_library_forward_on_text(tokenizer, tiny):
    hf, model = tiny
    want = hf(**tokenizer(SENTENCES, return_tensors="pt", padding=True)).logits
    assert torch.allclose(model.logits(single_batch(tokenizer, SENTENCES)), want, atol=1e-5)
    want = hf(**tokenizer(SENTENCES, HYPOTHESES, return_tensors="pt", padding=True)).logits
    assert torch.allclose(model.logits(pair_batch(tokenizer, SENTENCES, HYPOTHESES)), want,
                          atol=1e-5)


@torch.no_grad()
def test_an_emptied_row_keeps_its_special_tokens(tokenizer, tiny):
    hf, model = tiny
    empty = Batch(torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, 1, dtype=torch.bool), ("e",))
    want = hf(**tokenizer([""], return_tensors="pt")).logits  # [CLS] [SEP]
    assert torch.allclose(model.logits(empty), want, atol=1e-5)


def test_gradients_reach_every_piece_and_no_padding(tokenizer, tiny):
    _, model = tiny
    batch = single_batch(tokenizer, SENTENCES)
    embeds = model.embed(batch).detach().requires_grad_(True)
    model.logits_from_embeddings(embeds, batch)[:, 1].sum().backward()
    norms = embeds.grad.norm(dim=-1)
    assert (norms[batch.mask] > 0).all() and (norms[~batch.mask] == 0).all()


def test_a_worker_explains_pieces_as_this_process_does(tokenizer, tiny):
    """A worker gets the adapter (the library model and its tokenizer) as a file and the
    pieces with their word ids over the wire; its scores are this process's."""
    from faithbench import submissions
    from faithbench.benchmark.core.isolation import InProcess, plugin_caller

    _, model = tiny
    batch = single_batch(tokenizer, SENTENCES)
    target = torch.ones(len(batch), dtype=torch.long)
    for name in ("gradient", "attention"):
        explainer = submissions.get_explainer(name)
        here = InProcess(explainer, model, None).explain(batch, target, seed=0)
        with plugin_caller(explainer, model, time_budget_s=None, isolation="process") as caller:
            torch.testing.assert_close(caller.explain(batch, target, seed=0), here)


@torch.no_grad()
def test_default_attention_is_the_last_layer_cls_row_over_pieces(tokenizer, tiny):
    hf, model = tiny
    batch = single_batch(tokenizer, SENTENCES)
    enc = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    last = hf(**enc, output_attentions=True).attentions[-1]  # (B, H, S, S)
    got = model.attention(batch)
    for r, n in enumerate(batch.lengths.tolist()):
        row = last[r, :, 0, 1 : n + 1].mean(0)  # [CLS] row, the pieces between [CLS] and [SEP]
        assert torch.allclose(got[r, :n], row / row.sum(), atol=1e-6)
        assert (got[r, n:] == 0).all()


@torch.no_grad()
def test_rollout_matches_a_hand_product_of_layers(tokenizer, tiny):
    hf, model = tiny
    from faithbench.submissions.attention_rollout import EXPLAINER
    batch = single_batch(tokenizer, SENTENCES[:1])
    enc = tokenizer(SENTENCES[:1], return_tensors="pt")
    layers = [a[0].mean(0).double().numpy() for a in hf(**enc, output_attentions=True).attentions]
    rolled = np.eye(layers[0].shape[0])
    for a in layers:  # R = Â_L ... Â_1, Â = (A + I) / 2 with rows renormalised
        a_hat = 0.5 * a + 0.5 * np.eye(len(a))
        rolled = (a_hat / a_hat.sum(1, keepdims=True)) @ rolled
    n = int(batch.lengths[0])
    want = rolled[0, 1 : n + 1] / rolled[0, 1 : n + 1].sum()
    got = EXPLAINER.explain(model, batch, torch.tensor([0]), rng=torch.Generator())
    assert np.allclose(got[0, :n].numpy(), want, atol=1e-6)


def test_layer_attention_explainers_are_refused_on_a_bilstm(model, batch):
    from faithbench.benchmark.runner import configured
    from faithbench.submissions import get_explainer
    assert "layer_attention" not in capabilities(model)
    for explainer in (get_explainer("attention_rollout"), configured("attention[layer=0]")):
        with pytest.raises(PluginError, match="layer_attention"), \
                plugin_caller(explainer, model, time_budget_s=None):
            pass


def test_default_run_on_a_bilstm_leaves_rollout_out(model):
    from faithbench import submissions
    from faithbench.benchmark.runner import serviceable
    kept = serviceable([submissions.get_explainer(n) for n in submissions.REFERENCE], model, "t")
    # rollout and value zeroing need a Transformer's layers; the rest, in registry order
    transformer_only = {"attention_rollout", "value_zeroing"}
    assert [e.spec.name for e in kept] == [n for n in submissions.REFERENCE
                                           if n not in transformer_only]


@torch.no_grad()
def test_attention_layer_and_heads_parameters(tokenizer, tiny):
    hf, model = tiny
    from faithbench.benchmark.runner import configured
    batch = single_batch(tokenizer, SENTENCES[:1])
    n = int(batch.lengths[0])
    first = hf(**tokenizer(SENTENCES[:1], return_tensors="pt"), output_attentions=True).attentions[0]
    row = first[0, :, 0, 1 : n + 1].max(0).values
    got = configured("attention[layer=0;heads=max]").explain(model, batch, None, rng=None)
    assert torch.allclose(got[0, :n], row / row.sum(), atol=1e-6)


class WordVotes:
    """Votes (metrics.variants) with words: p(c) ∝ 1 + pieces voting for c."""

    pad_id, mask_id, baseline_id = 0, 1, 0

    def logits(self, batch):
        votes = [((batch.ids == 2 + c) & batch.mask).sum(1) for c in (0, 1)]
        return torch.log1p(torch.stack(votes, 1).float())


def test_word_level_erasure_takes_whole_words_ranked_by_summed_scores():
    from faithbench.metrics import get_metric, resolve, with_params
    # pieces [2, 2 | 3 | 2]: word 0 has two pieces voting class 0; p0(x) = 4/6
    batch = Batch(torch.tensor([[2, 2, 3, 2]]), torch.ones(1, 4, dtype=torch.bool), ("a",),
                  words=torch.tensor([[0, 0, 1, 2]]))
    scores = torch.tensor([[0.3, 0.3, 0.5, 0.4]])  # word sums 0.6, 0.5, 0.4: word 0 first
    perturber = Perturber(WordVotes())
    inp = MetricInput(batch, scores, torch.tensor([0]), perturber.probs(batch), perturber)
    # flip at k = 1 word: erasing word 0 leaves [3, 2], p0 = 2/4, no flip; k counts words (n = 3)
    comp = with_params(get_metric("comprehensiveness"), bins=(0.34,)).compute(inp).values.item()  # k = ceil(1.02) = 2
    # k = 2 words: word 0 and word 1 go, leaving [2]: p0 = 2/3; drop = 4/6 - 2/3 = 0
    assert comp == pytest.approx(0.0, abs=1e-9)
    sub = with_params(get_metric("comprehensiveness"), bins=(0.5,),
                      granularity="subword").compute(inp).values.item()
    # pieces: n = 4, k = 2, top pieces 2 (0.5) and 3 (0.4): leaves [2, 2], p0 = 3/4
    assert sub == pytest.approx(4 / 6 - 3 / 4)
    frac = resolve("flip_fraction").compute(inp).values.item()
    # words in order 0, 1, 2: [3, 2] p0 = .5 (tie, argmax 0), [2] p0 = 2/3, [] p0 = .5: never
    assert frac == 1.0


def ferret_reference(hf, tokenizer, text, scores, target, *, sufficiency=False):
    """ferret-xai 0.4.2's AOPC evaluator, re-implemented over text from its source:
    thresholds np.arange(0.1, 1.1, 0.1), k = int(p·n), top-k by argsort keeping only
    positive scores, a bin skipped when empty or equal to the last kept rationale,
    perturbations decoded and tokenized again."""
    def prob(texts):
        enc = tokenizer(texts, return_tensors="pt", padding=True, truncation=True)
        with torch.no_grad():
            return torch.softmax(hf(**enc).logits, -1)[:, target].numpy()

    ids = tokenizer(text)["input_ids"][1:-1]
    scores = np.asarray(scores, dtype=float)
    base, texts, last = prob([text])[0], [], None
    for p in np.arange(0.1, 1.1, 0.1):
        k = int(p * len(scores))
        if not 0 < k <= len(scores):
            continue
        top = [i for i in scores.argsort()[-k:][::-1] if scores[i] > 0]
        if not top or (last is not None and set(top) == last):
            continue
        last = set(top)
        kept = ([ids[i] for i in sorted(top)] if sufficiency
                else [t for i, t in enumerate(ids) if i not in last])
        texts.append(tokenizer.decode(kept))
    if not texts:
        return 1.0 if sufficiency else 0.0
    return float(np.mean(base - prob(texts)))


def ferret_loo(hf, tokenizer, text, scores, target):
    ids = tokenizer(text)["input_ids"][1:-1]
    enc = lambda ts: tokenizer(ts, return_tensors="pt", padding=True)
    with torch.no_grad():
        base = torch.softmax(hf(**enc([text])).logits, -1)[0, target].item()
        texts = [tokenizer.decode(ids[:i] + ids[i + 1 :]) for i in range(len(ids))]
        loo = torch.softmax(hf(**enc(texts)).logits, -1)[:, target].numpy()
    return kendalltau(base - loo, scores)[0]


def test_ferret_presets_match_ferret_definitions_over_text(tokenizer, tiny):
    from faithbench.metrics import resolve
    hf, model = tiny
    texts = SENTENCES + ["do n't waste your time on this un-funny mess .",
                         "an unflinchingly bleak and desperate vision"]
    batch = single_batch(tokenizer, texts)
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(batch.ids.shape, generator=gen).masked_fill(~batch.mask, 0)
    scores[0, 1:5] = scores[1, 1:4] = 0.5  # tied positive scores: numpy's argsort order decides
    perturber = Perturber(model)
    probs = perturber.probs(batch)
    target = probs.argmax(1)
    inp = MetricInput(batch, scores, target, probs, perturber)
    got = {m: resolve(f"{m}[preset=ferret]").compute(inp).values
           for m in ("comprehensiveness", "sufficiency", "taucorr_loo")}
    for r, text in enumerate(texts):
        s = scores[r, : int(batch.lengths[r])].tolist()
        t = int(target[r])
        assert got["comprehensiveness"][r].item() == pytest.approx(
            ferret_reference(hf, tokenizer, text, s, t), abs=1e-5)
        assert got["sufficiency"][r].item() == pytest.approx(
            ferret_reference(hf, tokenizer, text, s, t, sufficiency=True), abs=1e-5)
        assert got["taucorr_loo"][r].item() == pytest.approx(
            ferret_loo(hf, tokenizer, text, s, t), abs=1e-5)
    by_position = resolve("comprehensiveness[preset=ferret;ties=None]").compute(inp).values
    assert not torch.allclose(by_position[:2], got["comprehensiveness"][:2])  # the ties matter


def test_ferret_thresholds_give_exact_rational_sizes():
    """int(p·n) over numpy's float thresholds equals floor(p·n) in exact arithmetic for
    every length a sentence has, so the preset's decimal bins reproduce ferret's k."""
    from faithbench.metrics import FERRET_BINS
    from faithbench.metrics.rationale import bin_sizes
    n = torch.arange(1, 513)
    want = [[int(p * m) for p in np.arange(0.1, 1.1, 0.1)] for m in n.tolist()]
    assert bin_sizes(n, FERRET_BINS, "trunc").tolist() == want


def test_retokenize_eraser_sees_what_the_typed_text_gives(tokenizer, tiny):
    _, model = tiny
    batch = single_batch(tokenizer, ["a valueless film"])  # a value ##less film
    toks = tokenizer.convert_ids_to_tokens(batch.ids[0].tolist())
    head = next(i for i in range(len(toks) - 1) if toks[i + 1].startswith("##"))
    keep = torch.tensor([[i != head for i in range(len(toks))]])  # a word's tail is left over
    kept_ids = [i for i, k in zip(batch.ids[0].tolist(), keep[0].tolist()) if k]
    want = tokenizer(tokenizer.decode(kept_ids), add_special_tokens=False)["input_ids"]
    out = model.retokenize(batch.replace(ids=torch.tensor([kept_ids]),
                                         mask=torch.ones(1, len(kept_ids), dtype=torch.bool)))
    assert out.ids[0][out.mask[0]].tolist() == want != kept_ids


def test_label_order_of_a_users_checkpoint(tmp_path, tokenizer):
    from faithbench.tasks.transformer import label_order
    labels = ("negative", "positive")
    assert label_order(tmp_path, {0: "POSITIVE", 1: "NEGATIVE"}, labels) == [1, 0]
    with pytest.raises(InputError, match="are not the task's"):
        label_order(tmp_path, {0: "negative", 1: "neutral"}, labels)
    with pytest.raises(InputError, match="3 labels"):
        label_order(tmp_path, {0: "a", 1: "b", 2: "c"}, labels)


def save_tiny(tmp_path, tokenizer, id2label):
    from transformers import BertConfig, BertForSequenceClassification
    torch.manual_seed(1)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, num_labels=len(id2label),
                        id2label=id2label, label2id={v: k for k, v in id2label.items()})
    hf = BertForSequenceClassification(config).eval()
    hf.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    return hf


def test_model_path_checkpoint_is_evaluated_with_outputs_in_task_order(
        tmp_path, tokenizer, shared_data):
    from faithbench import tasks
    hf = save_tiny(tmp_path, tokenizer, {0: "positive", 1: "negative"})
    task = tasks.get_task("sentiment")
    ready = task.prepare(TaskOptions(data_dir=str(shared_data), variant="sentences",
                                     model_path=str(tmp_path), train_limit=50), progress=False)
    assert ready.spec.id == "sentiment[model=hf]@1"
    ex = ready.examples("validation", 4)
    batch, _, _ = next(ready.batches(ex, 4))
    sentences = [" ".join(e.tokens).replace(" ##", "") for e in ex]
    with torch.no_grad():
        raw = hf(**tokenizer(sentences, return_tensors="pt", padding=True)).logits
        assert torch.allclose(ready.model.logits(batch), raw[:, [1, 0]], atol=1e-5)
    assert set(ready.accuracy) == {"validation", "test"}
    bad = tmp_path / "bad"
    save_tiny(bad, tokenizer, {0: "entailment", 1: "contradiction"})
    with pytest.raises(InputError, match="are not the task's"):
        task.prepare(TaskOptions(data_dir=str(shared_data), variant="sentences",
                                 model_path=str(bad), train_limit=50), progress=False)


@pytest.mark.parametrize("task, labels, files, train", [
    ("sentiment", {0: "negative", 1: "positive"}, "sst2", ("sst2_phrases", ("train",))),
    ("nli", {0: "entailment", 1: "neutral", 2: "contradiction"}, "snli",
     ("snli", ("train", "validation", "test"))),
])
def test_a_model_path_checkpoint_reads_no_training_split(tmp_path, tokenizer, shared_data,
                                                         monkeypatch, task, labels, files,
                                                         train):
    """A checkpoint evaluated as is needs no training data (SST-2's 67k phrases, SNLI's
    training pairs): not read, and the model's data fingerprint and cache key are those
    of a full read, which left them out after reading them."""
    from faithbench import tasks
    module = importlib.import_module(f"faithbench.tasks.{task}")
    save_tiny(tmp_path, tokenizer, labels)
    options = TaskOptions(data_dir=str(shared_data), model_path=str(tmp_path))
    read, load = [], module.load_local

    def recorded(folder, splits, *args, **kwargs):
        read.append((folder.name, tuple(splits)))
        return load(folder, splits, *args, **kwargs)

    monkeypatch.setattr(module, "load_local", recorded)
    kept = {}  # the rows ``read_once`` keeps, emptied so that each prepare reads the files
    monkeypatch.setattr("faithbench.tasks.data._READ", kept)
    ready = tasks.get_task(task).prepare(options, progress=False)
    assert read == [(files, ("validation", "test"))]
    read.clear()
    kept.clear()
    monkeypatch.setattr(TaskOptions, "reads_training_split", property(lambda self: True))
    full = tasks.get_task(task).prepare(options, progress=False)
    assert train in read  # as before: read, then left out
    assert (ready.data_fingerprint, ready.cache_key) == (full.data_fingerprint, full.cache_key)
    assert set(ready.splits) == set(full.splits) == {"validation", "test"}


def test_pieces_carry_words_segments_and_word_rationales(tokenizer):
    from faithbench.benchmark.core.api import Example
    from faithbench.tasks.transformer import to_pieces
    ex = Example("x", ("valueless", "film", "ok"), 1, reference=(True, False, True),
                 segments=(0, 0, 1))
    out = to_pieces(tokenizer, ex, 100)
    n = len(tokenizer.tokenize("valueless"))
    assert n > 1 and out.tokens[:n] == tuple(tokenizer.tokenize("valueless"))
    assert out.words == (0,) * n + (1, 2)
    assert out.segments == (0,) * (n + 1) + (1,)
    assert out.reference == (True,) * n + (False, True)
    short = to_pieces(tokenizer, ex, 2)  # the longer sentence loses pieces first
    assert len(short.tokens) == 2 and short.segments == (0, 1)


def test_explanation_rows_must_carry_the_models_pieces(tmp_path, tokenizer, shared_data):
    from faithbench import tasks
    save_tiny(tmp_path, tokenizer, {0: "negative", 1: "positive"})
    ready = tasks.get_task("sentiment").prepare(TaskOptions(
        data_dir=str(shared_data), variant="sentences", model_path=str(tmp_path),
        train_limit=50), progress=False)
    rows = [{"id": "a", "tokens": ["the", "value", "##less", "film"], "words": [0, 1, 1, 2]}]
    assert ready.examples_from_rows("f.jsonl", rows)[0].words == (0, 1, 1, 2)
    with pytest.raises(DataFileError, match="line 2.*tokens.*not a piece"):
        ready.examples_from_rows("f.jsonl", rows + [{"id": "b", "tokens": ["Unbearable!"]}])
    with pytest.raises(DataFileError, match="words"):
        ready.examples_from_rows("f.jsonl", [{**rows[0], "words": [0, 2, 2, 2]}])
    # no words field: the task's own example of that id and those pieces groups them.
    # test-1 has SST's token "'s" (moore 's): two pieces, ' and s, of one word, which
    # a ## rule would split in two
    task_ex = next(e for e in ready.examples("test") if e.id == "test-1")
    at = task_ex.tokens.index("moore")
    assert task_ex.tokens[at : at + 3] == ("moore", "'", "s")
    [got] = ready.examples_from_rows("f.jsonl", [{"id": "test-1", "tokens": list(task_ex.tokens)}])
    w = got.words
    assert w == task_ex.words and w[at + 1] == w[at + 2] == w[at] + 1
    # another id, or other pieces: no grouping is guessed
    [other] = ready.examples_from_rows("f.jsonl", [{"id": "x", "tokens": list(task_ex.tokens)}])
    assert other.words is None


def test_small_finetuning_learns_and_is_cached(shared_data):
    from faithbench import tasks
    options = TaskOptions(data_dir=str(shared_data), variant="sentences", model="transformer",
                          model_layers=2, train_limit=2000, epochs=2)
    task = tasks.get_task("sentiment")
    ready = task.prepare(options, progress=False)
    assert ready.spec.id == "sentiment[model=transformer]@1"
    assert ready.config["model"]["layers"] == 2 and ready.config["train"]["optimizer"] == "adamw"
    assert ready.accuracy["validation"] > 0.6, ready.history
    again = task.prepare(options, progress=False)
    assert again.loaded_from_cache and again.checkpoint == ready.checkpoint
    with pytest.raises(InputError, match="BiLSTM family"):
        task.prepare(TaskOptions(data_dir=str(shared_data), model="transformer",
                                 masked_training=True), progress=False)


@pytest.mark.parametrize("name", __import__("submissions").REFERENCE)
def test_every_reference_explainer_passes_the_plugin_checks_on_a_transformer(
        name, tokenizer, tiny):
    from faithbench.benchmark.core.isolation import InProcess
    from faithbench.benchmark.core.validation import run_checks
    from faithbench.submissions import get_explainer
    _, model = tiny
    batch = single_batch(tokenizer, SENTENCES)
    explainer = get_explainer(name)
    results = run_checks(explainer, InProcess(explainer, model, 5.0), batch,
                         torch.tensor([0, 1, 0]))
    failed = [(r.check, r.detail) for r in results if not r.passed]
    assert not failed, failed


def hand_probs(hf, tokenizer, words_list, target):
    """p_target of each word list, tokenized as text words, one forward pass each."""
    out = []
    with torch.no_grad():
        for words in words_list:
            enc = tokenizer(words, is_split_into_words=True, return_tensors="pt")
            out.append(torch.softmax(hf(**enc).logits, -1)[0, target].item())
    return out


OCCLUDED = ["the unbearable lightness of being", "it 's not a bad film at all",
            "do n't waste your time on this un-funny mess .", "a valueless film"]


@pytest.fixture(scope="module")
def lively(tokenizer):
    """``tiny`` with weights drawn 10x wider: its probabilities move by 0.004-0.36 when a
    word goes (``tiny``'s by ~1e-5, too close to float32 noise to tell operators apart)."""
    from transformers import BertConfig, BertForSequenceClassification

    from faithbench.benchmark.core.models.transformer import TransformerClassifier
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, num_labels=2,
                        attn_implementation="eager", initializer_range=0.2)
    hf = BertForSequenceClassification(config).eval()
    return hf, TransformerClassifier(hf, tokenizer).eval()


def test_occlusion_leaves_out_whole_words_on_a_transformer(tokenizer, lively):
    """Each word's pieces share that word's leave-one-out drop, recomputed here on the
    text with the word left out; word-level taucorr_loo is then 1 (its card's claim).
    ``granularity=subword`` deletes single pieces (recomputed on the piece ids)."""
    from faithbench.metrics import resolve
    from faithbench.submissions.occlusion import OcclusionExplainer
    hf, model = lively
    batch = single_batch(tokenizer, OCCLUDED)
    target = torch.tensor([0, 1, 0, 1])
    scores = OcclusionExplainer().explain(model, batch, target, rng=torch.Generator())
    assert any(len(tokenizer.tokenize(w)) > 1 for t in OCCLUDED for w in t.split())
    for r, text in enumerate(OCCLUDED):
        words, t = text.split(), int(target[r])
        base = hand_probs(hf, tokenizer, [words], t)[0]
        left = hand_probs(hf, tokenizer, [words[:i] + words[i + 1:] for i in range(len(words))], t)
        want = [(base - p) / len(tokenizer.tokenize(w))
                for w, p in zip(words, left) for _ in tokenizer.tokenize(w)]
        n = int(batch.lengths[r])
        assert np.allclose(scores[r, :n].numpy(), want, atol=1e-6)
        assert (scores[r, n:] == 0).all()
    perturber = Perturber(model)
    inp = MetricInput(batch, scores, target, perturber.probs(batch), perturber)
    assert resolve("taucorr_loo").compute(inp).values.tolist() == pytest.approx([1.0] * 4)

    pieces = OcclusionExplainer(granularity="subword")
    assert pieces.spec.id == "occlusion[eraser=delete;granularity=subword]@1"
    assert OcclusionExplainer().spec.id == "occlusion[eraser=delete]@1"
    got = pieces.explain(model, batch, target, rng=torch.Generator())
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    for r in range(len(OCCLUDED)):
        ids, t = batch.tokens_of(r), int(target[r])
        with torch.no_grad():
            p = [torch.softmax(hf(torch.tensor([[cls, *x, sep]])).logits, -1)[0, t].item()
                 for x in [ids] + [ids[:j] + ids[j + 1:] for j in range(len(ids))]]
        assert np.allclose(got[r, : len(ids)].numpy(), [p[0] - q for q in p[1:]], atol=1e-6)


def hash_words(pieces):
    """The ## rule: a piece not starting with ## starts a word (what pieces alone say)."""
    out = []
    for i, piece in enumerate(pieces):
        out.append(out[-1] if i and piece.startswith("##") else (out[-1] + 1 if out else 0))
    return out


def test_run_and_explain_then_score_give_the_same_values_on_a_transformer(
        tmp_path, tokenizer, shared_data):
    """`faithbench explain` writes each piece's word, so `score` groups pieces into the
    words `run` groups them into, and every per-example value is the same."""
    from faithbench.benchmark import verbs
    from faithbench.benchmark.core.records import read_jsonl, write_jsonl_atomic
    from faithbench.benchmark.plan import RunConfig
    from faithbench.benchmark.runner import run
    save_tiny(tmp_path / "model", tokenizer, {0: "negative", 1: "positive"})
    metrics = ("comprehensiveness", "taucorr_loo")
    config = RunConfig(tasks=("sentiment",), data_dir=str(shared_data), variant="sentences",
                       model_path=str(tmp_path / "model"), limit=10, batch_size=4,
                       explainers=("gradient_x_input",), metrics=metrics,
                       out=str(tmp_path / "out"), progress=False, write_leaderboard=False,
                       allow_weak_model=True)  # a random checkpoint: at chance
    summary = run(config)
    assert summary.exit_code == 0 and summary.computed == 2, summary.failures
    by_run = {r.metric: {row["id"]: row["value"]
                         for row in read_jsonl(tmp_path / "out" / r.per_example_file)}
              for r in summary.results}

    def scored(path, **change):
        import dataclasses
        out = tmp_path / "per_example.jsonl"
        verbs.score_file("sentiment", str(path), dataclasses.replace(config, **change),
                         per_example_out=str(out))
        values = {}
        for row in read_jsonl(out):
            values.setdefault(row["metric"], {})[row["id"]] = row["value"]
        return values

    exp = tmp_path / "e.jsonl"
    verbs.explain_to_file("sentiment", "gradient_x_input", str(exp), config)
    rows = read_jsonl(exp)
    # the file's words are SST's tokens: e.g. "'s" is one word of two pieces, which the
    # ## rule would count as two; on these rows the two groupings differ
    assert sum(row["words"] != hash_words(row["tokens"]) for row in rows) >= 3
    assert scored(exp) == by_run
    # a file without words (e.g. explained elsewhere): regrouped by the task's examples
    bare = tmp_path / "bare.jsonl"
    write_jsonl_atomic(bare, [{k: v for k, v in row.items() if k != "words"} for row in rows])
    assert scored(bare) == by_run
    # a row that is no example of the task, and says nothing of its words: refused where
    # a metric counts words, scored where every metric ranks pieces
    no_words = {k: v for k, v in rows[0].items() if k != "words"}
    write_jsonl_atomic(bare, [{**no_words, "id": "mine"}] + rows[1:])
    with pytest.raises(DataFileError, match="line 1: field 'words'.*granularity=subword"):
        scored(bare)
    pieces = scored(bare, metrics=("comprehensiveness[granularity=subword]",))
    [(metric, values)] = pieces.items()
    assert "granularity=subword" in metric
    assert set(values) == {"mine"} | {row["id"] for row in rows[1:]}


def test_model_path_runs_every_seed(tmp_path, tokenizer, shared_data):
    """One checkpoint evaluated with --seeds 0 1 gives two units per metric: the random
    explainer runs once per seed, with that seed."""
    from faithbench.benchmark.core.records import read_jsonl, read_results
    from faithbench.benchmark.plan import RunConfig
    from faithbench.benchmark.runner import run
    from faithbench.benchmark.session import open_session
    from faithbench.submissions import get_explainer
    save_tiny(tmp_path / "model", tokenizer, {0: "negative", 1: "positive"})
    config = RunConfig(tasks=("sentiment",), data_dir=str(shared_data), variant="sentences",
                       model_path=str(tmp_path / "model"), limit=6, seeds=(0, 1),
                       explainers=("random",), metrics=("comprehensiveness", "sufficiency"),
                       out=str(tmp_path / "out"), progress=False, write_leaderboard=False,
                       allow_weak_model=True)  # a random checkpoint: at chance
    summary = run(config)
    assert (summary.computed, summary.skipped) == (4, 0)
    records = read_results(tmp_path / "out" / "results.jsonl")
    assert sorted(r.model_seed for r in records) == [0, 0, 1, 1]
    assert len({r.provenance.checkpoint for r in records}) == 1
    files = sorted((tmp_path / "out" / "explanations").glob("*.jsonl"))
    assert len(files) == 2
    random = get_explainer("random")
    want = {seed: open_session("sentiment", config, seed).explain(random, cache=False).scores
            for seed in (0, 1)}
    assert want[0] != want[1]
    assert sorted([row["scores"] for row in read_jsonl(f)] for f in files) == sorted(
        want.values())
    again = run(config)
    assert (again.computed, again.skipped) == (0, 4)
