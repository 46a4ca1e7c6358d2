"""The decoder family: the adapter against the library's own causal forward on the
typed text (GPT-2, Llama, Qwen2 and Mistral layouts built here from tiny configs, no
download), template tokens that are never scored or erased, attention read at the
answering position, language-model loss, tiny checkpoints run end to end through
``--model-path`` on the synthetic task, and a small decoder trained here."""

import pytest
import torch

from faithbench.benchmark.core.api import PromptOptions, TaskOptions, capabilities
from faithbench.benchmark.core.erasers import erase
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.vocab import collate

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["a gorgeous , witty , seductive movie .", "the unbearable lightness",
         "it 's not a bad film at all"]
TEMPLATE = "Review: {text} Verdict:"
WORDS = ("bad", "good")


@pytest.fixture(scope="module")
def tokenizer():
    from faithbench.tasks.transformer import base_path, load_tokenizer
    return load_tokenizer(base_path())


def library_config(layout: str, vocab: int, **extra):
    """A two-layer decoder of ``layout`` with 16-wide states (random weights)."""
    if layout == "gpt2":
        return transformers.GPT2Config(vocab_size=vocab, n_embd=16, n_layer=2, n_head=2,
                                       n_positions=128, **extra)
    kind = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
            "mistral": transformers.MistralConfig}[layout]
    return kind(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                **extra)


def causal(layout, tokenizer, head=False):
    torch.manual_seed(0)
    extra = {"num_labels": 2, "pad_token_id": tokenizer.pad_token_id} if head else {}
    kind = transformers.AutoModelForSequenceClassification if head else \
        transformers.AutoModelForCausalLM
    config = library_config(layout, len(tokenizer), **extra)
    return kind.from_config(config, attn_implementation="eager").double().eval()


def adapter(hf, tokenizer, template=TEMPLATE, words=WORDS, head=False):
    from faithbench.benchmark.core.models import decoder
    pair = "{a}" in template
    tpl = decoder.template_ids(tokenizer, template, pair)
    labels = None if head else decoder.label_word_ids(tokenizer, words)
    return decoder.DecoderClassifier(hf, tokenizer, tpl, labels).eval()


def batch_of(tokenizer, texts, pairs=None):
    def enc(t):
        return tokenizer(t.split(), is_split_into_words=True, add_special_tokens=False)
    if pairs is None:
        rows = [enc(t) for t in texts]
        return collate([r["input_ids"] for r in rows], [f"r{i}" for i in range(len(texts))],
                       words=[r.word_ids() for r in rows])
    a = [enc(t)["input_ids"] for t in texts]
    b = [enc(t)["input_ids"] for t in pairs]
    return collate([x + y for x, y in zip(a, b)], [f"p{i}" for i in range(len(a))],
                   segments=[[0] * len(x) + [1] * len(y) for x, y in zip(a, b)])


def typed(tokenizer, text):
    """The ids of ``text`` as typed, with the tokenizer's leading special token (BERT's
    [CLS] plays a decoder's <s>) and without its trailing [SEP]."""
    return tokenizer(text)["input_ids"][:-1]


LAYOUTS = ("gpt2", "llama", "qwen2", "mistral")


@pytest.mark.parametrize("layout", LAYOUTS)
@torch.no_grad()
def test_prompt_logits_are_the_library_next_token_logits_of_the_typed_text(layout, tokenizer):
    hf = causal(layout, tokenizer)
    model = adapter(hf, tokenizer)
    got = model.logits(batch_of(tokenizer, TEXTS))  # left-padded rows of three lengths
    good, bad = (tokenizer.convert_tokens_to_ids(w) for w in ("good", "bad"))
    for row, text in enumerate(TEXTS):
        ids = torch.tensor([typed(tokenizer, f"Review: {text} Verdict:")])
        last = hf(input_ids=ids).logits[0, -1]
        torch.testing.assert_close(got[row], last[[bad, good]], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("layout", ("llama", "gpt2"))
@torch.no_grad()
def test_a_pair_goes_into_its_two_slots(layout, tokenizer):
    hf = causal(layout, tokenizer)
    model = adapter(hf, tokenizer, "{a} Question: {b} Answer:", ("yes", "maybe", "no"))
    premises, hypotheses = TEXTS, ["it is good", "a dog sat on the mat .", "nobody"]
    got = model.logits(batch_of(tokenizer, premises, hypotheses))
    labels = [tokenizer.convert_tokens_to_ids(w) for w in ("yes", "maybe", "no")]
    for row, (a, b) in enumerate(zip(premises, hypotheses)):
        ids = torch.tensor([typed(tokenizer, f"{a} Question: {b} Answer:")])
        # Llama's eager attention takes its softmax in float32 (transformers 5.18), so a
        # padded row and the typed one can round apart there: float32 precision
        torch.testing.assert_close(got[row], hf(input_ids=ids).logits[0, -1, labels],
                                   rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("layout", ("llama", "qwen2", "gpt2"))
@torch.no_grad()
def test_a_head_reads_the_last_position_as_the_library_classifier_does(layout, tokenizer):
    hf = causal(layout, tokenizer, head=True)
    got = adapter(hf, tokenizer, head=True).logits(batch_of(tokenizer, TEXTS))
    for row, text in enumerate(TEXTS):
        ids = torch.tensor([typed(tokenizer, f"Review: {text} Verdict:")])
        torch.testing.assert_close(got[row], hf(input_ids=ids).logits[0], rtol=1e-9, atol=1e-9)


@torch.no_grad()
def test_template_tokens_are_never_erased_or_scored(tokenizer):
    from faithbench.submissions import get_explainer
    hf = causal("llama", tokenizer)
    model = adapter(hf, tokenizer)
    batch = batch_of(tokenizer, TEXTS)
    # every piece deleted: the model still reads the whole template
    empty = erase(batch, torch.zeros_like(batch.mask), "delete", pad_id=model.pad_id,
                  mask_id=model.mask_id)
    alone = hf(input_ids=torch.tensor([typed(tokenizer, "Review: Verdict:")])).logits[0, -1]
    labels = [tokenizer.convert_tokens_to_ids(w) for w in ("bad", "good")]
    torch.testing.assert_close(model.logits(empty), alone[labels].expand(3, 2),
                               rtol=1e-9, atol=1e-9)
    # explainers score exactly the pieces: one value per batch position, zero at padding
    with torch.enable_grad():
        scores = get_explainer("gradient_x_input").explain(
            model, batch, torch.tensor([0, 1, 0]), rng=torch.Generator().manual_seed(0))
    assert scores.shape == batch.ids.shape
    assert bool((scores[~batch.mask] == 0).all()) and bool((scores[batch.mask] != 0).all())


@torch.no_grad()
def test_attention_is_the_answering_positions_row_over_the_pieces(tokenizer):
    from faithbench.submissions import get_explainer
    hf = causal("qwen2", tokenizer)
    model = adapter(hf, tokenizer)
    batch = batch_of(tokenizer, TEXTS)
    got = model.attention(batch)
    rolled = get_explainer("attention_rollout").explain(model, batch, torch.zeros(3).long(),
                                                        rng=torch.Generator())
    prefix = len(typed(tokenizer, "Review:"))
    for row, text in enumerate(TEXTS):
        ids = torch.tensor([typed(tokenizer, f"Review: {text} Verdict:")])
        maps = hf(input_ids=ids, output_attentions=True).attentions
        n = int(batch.mask[row].sum())
        last = maps[-1][0, :, -1].mean(0)[prefix: prefix + n]
        torch.testing.assert_close(got[row, :n], last / last.sum(), rtol=1e-9, atol=1e-9)
        # rollout by hand: the product of (mean-head attention + I)/2 over the layers
        product = torch.eye(ids.shape[1], dtype=torch.float64)
        for layer in maps:
            step = 0.5 * layer[0].mean(0) + 0.5 * torch.eye(ids.shape[1], dtype=torch.float64)
            product = (step / step.sum(-1, keepdim=True)) @ product
        hand = product[-1, prefix: prefix + n]
        torch.testing.assert_close(rolled[row, :n].double(), hand / hand.sum(), rtol=1e-5,
                                   atol=1e-6)


def test_language_model_loss_is_the_librarys_on_the_typed_text(tokenizer):
    hf = causal("gpt2", tokenizer)
    model = adapter(hf, tokenizer)
    batch = batch_of(tokenizer, TEXTS[1:2])
    ids = torch.tensor([typed(tokenizer, f"Review: {TEXTS[1]} Verdict:")])
    with torch.no_grad():
        logits = hf(input_ids=ids).logits[0, :-1]  # each position predicts the next token
        hand = -logits.log_softmax(-1).gather(1, ids[0, 1:, None]).mean()
        torch.testing.assert_close(model.language_model_loss(batch), hand, rtol=1e-9, atol=1e-9)


def test_templates_and_label_words_are_checked(tokenizer):
    from faithbench.benchmark.core.models import decoder
    for bad, why in (("{text}", "text after the input"), ("Say {a} then", "exactly once"),
                     ("{b} and {a} Answer:", "before")):
        with pytest.raises(InputError, match=why):
            decoder.template_ids(tokenizer, bad, "{a}" in bad or "{b}" in bad)
    with pytest.raises(InputError, match="not all different"):
        decoder.label_word_ids(tokenizer, ("good", "good"))


def test_the_template_and_read_out_are_part_of_the_task_id(tokenizer):
    from faithbench import tasks
    from faithbench.tasks import decoder
    spec = tasks.get_task("synthetic").spec
    ids = set()
    for prompt in (None, PromptOptions(label_words=("awful", "great")),
                   PromptOptions(template="Text: {text} Label:"), PromptOptions(classify="head")):
        options = TaskOptions(model="decoder", prompt=prompt)
        ids.add(decoder.prompt_spec(spec, *decoder.prompt_of(spec, options)).id)
    assert len(ids) == 4
    assert "synthetic[classify=prompt;seed=0;template=default]@1" in ids


def save_checkpoint(path, layout, tokenizer):
    hf = causal(layout, tokenizer).float()
    hf.save_pretrained(path)
    tokenizer.save_pretrained(path)


@pytest.mark.parametrize("layout", ("gpt2", "llama", "qwen2"))
def test_a_causal_checkpoint_runs_end_to_end_with_every_explainer_it_serves(
        layout, tmp_path, tokenizer):
    from faithbench import submissions
    from faithbench.benchmark.core.records import read_jsonl
    from faithbench.benchmark.plan import RunConfig
    from faithbench.benchmark.runner import run
    save_checkpoint(tmp_path / "model", layout, tokenizer)
    config = RunConfig(tasks=("synthetic",), model_path=str(tmp_path / "model"), limit=4,
                       batch_size=4, out=str(tmp_path / "out"), progress=False,
                       write_leaderboard=False, allow_weak_model=True)  # random weights
    summary = run(config)
    assert summary.exit_code == 0, summary.failures
    model = next(iter(summary.models))
    assert model[0] == "synthetic[classify=prompt;model=hf;seed=0;template=default]@1"
    served = {r.explainer.split("[")[0].split("@")[0] for r in summary.results}
    # the explainers a decoder serves: everything but those reading BERT's layers, and
    # LRP (AttnLRP) and value zeroing on the Llama layouts only
    bert_only = {"attention_norm", "attention_x_gradient"}
    llama_only = {"lrp", "value_zeroing"}
    names = set(submissions.REFERENCE) - bert_only - (llama_only if layout == "gpt2" else set())
    assert served == names, (served ^ names)
    assert {r.metric.split("[")[0].split("@")[0] for r in summary.results} >= {
        "comprehensiveness", "sufficiency", "aopc_morf", "flip_rate", "taucorr_loo"}
    for record in summary.results:
        for row in read_jsonl(tmp_path / "out" / record.per_example_file):
            assert row["value"] == row["value"], (record.explainer, record.metric)  # no NaN


def test_a_small_decoder_trained_here_learns(tmp_path, monkeypatch):
    from faithbench import tasks
    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path))
    ready = tasks.get_task("synthetic").prepare(
        TaskOptions(model="decoder", model_layers=1, epochs=2, train_limit=1000), progress=False)
    assert ready.spec.id == "synthetic[classify=prompt;model=decoder;seed=0;template=default]@1"
    assert ready.accuracy["validation"] >= 0.9, ready.accuracy
    assert capabilities(ready.model) >= {"gradients", "layer_attention"}
    again = tasks.get_task("synthetic").prepare(
        TaskOptions(model="decoder", model_layers=1, epochs=2, train_limit=1000), progress=False)
    assert again.loaded_from_cache and again.checkpoint == ready.checkpoint


# -- AttnLRP (Achtibat et al. 2024) on Llama-layout decoders ----------------------------

def test_attnlrp_softmax_and_bilinear_rules_on_hand_worked_numbers():
    from faithbench.benchmark.core import lrp
    x = torch.tensor([[1.0, 2.0, 5.0]], dtype=torch.float64, requires_grad=True)
    keep = torch.tensor([[True, True, False]])
    s = lrp.softmax(x, keep)  # softmax of (1, 2): (0.26894, 0.73106), 0 where left out
    (r,) = torch.autograd.grad(s, x, grad_outputs=torch.tensor([[0.3, 0.7, 0.0]],
                                                                   dtype=torch.float64))
    # R_in_i = x_i (R_i − s_i ΣR): 1·(0.3 − 0.26894), 2·(0.7 − 0.73106), 0
    torch.testing.assert_close(r, torch.tensor([[0.031059, -0.062117, 0.0]],
                                               dtype=torch.float64), atol=1e-6, rtol=0)
    a = torch.tensor([[1.0, 2.0]], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([[3.0], [-1.0]], dtype=torch.float64, requires_grad=True)
    out = lrp.bilinear(a, b, eps=0.0)  # 1·3 + 2·(−1) = 1
    ra, rb = torch.autograd.grad(out, (a, b), grad_outputs=torch.ones_like(out))
    # the products 3 and −2 carry relevance 3 and −2 of the output's 1; half to each factor
    torch.testing.assert_close(ra, torch.tensor([[1.5, -1.0]], dtype=torch.float64))
    torch.testing.assert_close(rb, torch.tensor([[1.5], [-1.0]], dtype=torch.float64))


@pytest.mark.parametrize("layout", ("llama", "qwen2", "mistral"))
def test_attnlrp_conserves_the_logit_up_to_what_its_softmax_rule_leaves_to_the_bias(
        layout, tokenizer, monkeypatch):
    """The relevance of every position's embedding (template too) plus what each softmax
    rule leaves to its bias ((Σ_i s_i x_i) Σ_j R_j, recorded per call) is the logit:
    every other operation conserves (ε tiny; Qwen2's q/k/v biases absorb theirs, so its
    check allows that)."""
    from faithbench.benchmark.core import lrp
    hf = causal(layout, tokenizer)
    model = adapter(hf, tokenizer)
    batch = batch_of(tokenizer, TEXTS)
    left: list[torch.Tensor] = []
    rule = lrp._Softmax.backward

    def recording(ctx, relevance):
        out, none = rule(ctx, relevance)
        left.append(relevance.sum() - out.sum())
        return out, none

    monkeypatch.setattr(lrp._Softmax, "backward", staticmethod(recording))
    full, real, positions, _, _ = model._wrap(model.embed(batch), batch)
    full = full.detach().requires_grad_(True)
    logits = model.head_logits(model.lrp_hidden(full, real, positions, 1e-12)[:, -1], 1e-12)
    torch.testing.assert_close(logits, model.logits(batch), rtol=1e-8, atol=1e-8)
    start = torch.zeros_like(logits)
    start[:, 1] = logits[:, 1].detach()
    (relevance,) = torch.autograd.grad(logits, full, grad_outputs=start)
    total = relevance.sum() + torch.stack(left).sum()
    if layout == "qwen2":  # biases take a share: conserved to within it
        assert abs(float(total - start.sum())) < 0.2 * float(start.abs().sum())
    else:
        torch.testing.assert_close(total, start.sum(), rtol=1e-6, atol=1e-8)
    # and the padding positions of the left-padded rows receive nothing
    assert float(relevance[~real].abs().sum()) == 0.0


def test_lrp_scores_each_piece_by_its_relevance_and_is_refused_on_gpt2(tokenizer):
    """The explainer's score of a piece is the relevance (summed over dimensions) that
    AttnLRP gives the embedding at the piece's place in the full left-padded sequence,
    from the target logit; template positions are not pieces."""
    from faithbench.benchmark.core.errors import PluginError
    from faithbench.benchmark.core.isolation import plugin_caller
    from faithbench.submissions import get_explainer
    explainer = get_explainer("lrp")
    batch = batch_of(tokenizer, TEXTS)
    model = adapter(causal("llama", tokenizer), tokenizer)
    target = torch.tensor([0, 1, 0])
    scores = explainer.explain(model, batch, target, rng=torch.Generator())
    full, real, positions, index, _ = model._wrap(model.embed(batch), batch)
    full = full.detach().requires_grad_(True)
    logits = model.head_logits(model.lrp_hidden(full, real, positions, explainer.eps)[:, -1],
                               explainer.eps)
    start = torch.zeros_like(logits).scatter(1, target[:, None],
                                             logits.detach().gather(1, target[:, None]))
    (relevance,) = torch.autograd.grad(logits, full, grad_outputs=start)
    per_position = relevance.sum(-1)
    for row in range(3):
        n = int(batch.mask[row].sum())
        want = per_position[row, index[row, :n]]
        torch.testing.assert_close(scores[row, :n].double(), want, rtol=1e-5, atol=1e-7)
    assert bool((scores[~batch.mask] == 0).all())
    gpt2 = adapter(causal("gpt2", tokenizer), tokenizer)
    with pytest.raises(PluginError, match="lrp"), plugin_caller(explainer, gpt2,
                                                                time_budget_s=None):
        pass


def test_language_model_loss_of_a_padded_row_is_the_unpadded_texts(tokenizer):
    """Rows of three lengths in one left-padded batch: the batch loss is the mean over
    every real next-token prediction, each row's the one it has alone."""
    hf = causal("llama", tokenizer)
    model = adapter(hf, tokenizer)
    with torch.no_grad():
        together = model.language_model_loss(batch_of(tokenizer, TEXTS))
        sums, count = 0.0, 0
        for text in TEXTS:
            ids = torch.tensor([typed(tokenizer, f"Review: {text} Verdict:")])
            logits = hf(input_ids=ids).logits[0, :-1]
            sums += float(-logits.log_softmax(-1).gather(1, ids[0, 1:, None]).sum())
            count += ids.shape[1] - 1
    assert float(together) == pytest.approx(sums / count, rel=1e-9)


def test_deceive_is_refused_for_the_decoder_before_any_data_is_read():
    from faithbench import tasks
    with pytest.raises(InputError, match="decoder family does not offer it"):
        tasks.check_deceive("synthetic", TaskOptions(model="decoder", deceive=1.0))


def test_a_head_decoder_trains_without_language_model_pretraining(tmp_path, monkeypatch):
    from faithbench import tasks
    monkeypatch.setenv("FAITHBENCH_CACHE", str(tmp_path))
    options = TaskOptions(model="decoder", model_layers=1, epochs=1, train_limit=300,
                          prompt=PromptOptions(classify="head"))
    ready = tasks.get_task("synthetic").prepare(options, progress=False)
    assert ready.spec.id == "synthetic[classify=head;model=decoder;seed=0;template=default]@1"
    assert ready.config["model"]["pretrain_epochs"] == 0 and ready.model.mode == "head"
    assert ready.model.logits(next(ready.batches(ready.examples("test", 3), 3))[0]).shape == (3, 2)


def test_a_head_is_never_made_up_for_a_causal_checkpoint(tmp_path, tokenizer):
    from faithbench import tasks
    save_checkpoint(tmp_path, "llama", tokenizer)
    options = TaskOptions(model_path=str(tmp_path), prompt=PromptOptions(classify="head"))
    with pytest.raises(InputError, match="has none .*LlamaForCausalLM.*--classify prompt"):
        tasks.get_task("synthetic").prepare(options, progress=False)


@torch.no_grad()
def test_value_zeroing_is_each_layers_change_when_one_value_is_zeroed(tokenizer):
    """Every entry of every layer's map against its definition, computed one variant at
    a time on the typed text: a library forward with position j's value vector zeroed in
    layer l only, the cosine distance of each position's layer-l output to the original,
    rows normalized; the adapter batches left-padded rows of three lengths."""
    hf = causal("llama", tokenizer)
    model = adapter(hf, tokenizer)
    batch = batch_of(tokenizer, TEXTS)
    maps, _ = model.value_zeroing_maps(batch)
    layers = hf.base_model.layers
    for row, text in enumerate(TEXTS):
        ids = torch.tensor([typed(tokenizer, f"Review: {text} Verdict:")])
        n = ids.shape[1]
        seen = {}

        def keep(i, seen=seen):
            def hook(module, args, output):
                seen[i] = output[0] if isinstance(output, tuple) else output
            return hook

        handles = [layer.register_forward_hook(keep(i)) for i, layer in enumerate(layers)]
        hf(input_ids=ids)
        original = dict(seen)
        for li, layer in enumerate(layers):
            hand = torch.zeros(n, n, dtype=torch.float64)
            for j in range(n):
                def zero(module, args, output, j=j):
                    output = output.clone()
                    output[:, j] = 0
                    return output
                extra = layer.self_attn.v_proj.register_forward_hook(zero)
                hf(input_ids=ids)
                extra.remove()
                cos = torch.nn.functional.cosine_similarity(seen[li][0], original[li][0], dim=-1)
                hand[:, j] = 1 - cos
            hand = hand / hand.sum(-1, keepdim=True)
            torch.testing.assert_close(maps[row, li, -n:, -n:], hand, rtol=1e-6, atol=1e-9)
        for handle in handles:
            handle.remove()
        assert float(maps[row, :, :-n].abs().sum() + maps[row, :, :, :-n].abs().sum()) == 0.0
