"""Attention's stronger forms — ``attention_norm`` (Kobayashi et al. 2020),
``attention_x_gradient`` (Serrano & Smith 2019's AttGrad) and ``value_zeroing``
(Mohebbi et al. 2023) — against values computed here by other routes: numpy forward
passes of the BiLSTMs from their weights (``tests/test_lrp.py``'s) with closed-form
gradients, the library BERT's own forward on text with the last layer rebuilt by hand,
and value zeroing as its authors compute it, one (layer, token) at a time with a forward
hook that zeroes the value vector in a full forward pass. Plus the plugin checks, zero
at padding, and refusal by name where a model lacks the capability."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from faithbench import submissions
from faithbench.benchmark.core.api import (
    ATTENTION_GRADIENT,
    ATTENTION_VECTORS,
    VALUE_ZEROING,
    Batch,
    capabilities,
)
from faithbench.benchmark.core.errors import PluginError
from faithbench.benchmark.core.isolation import plugin_caller
from faithbench.benchmark.core.models.seq2seq import AttentionSeq2Seq, Seq2SeqConfig
from faithbench.benchmark.runner import configured, serviceable
from faithbench.submissions.attention_norm import EXPLAINER as NORM
from faithbench.submissions.attention_norm import AttentionNormExplainer
from faithbench.submissions.attention_x_gradient import EXPLAINER as ATTGRAD
from faithbench.submissions.value_zeroing import EXPLAINER as ZEROING
from faithbench.testing import check_explainer, three_row_batch, tiny_classifier
from tests.test_lrp import classifier, numpy_attention, numpy_bilstm, pair_model
from tests.tiny_bert import random_bert

pytestmark = pytest.mark.usefixtures("one_thread")

NEW = ("attention_norm", "attention_x_gradient", "value_zeroing")
REL = 1e-5


def np_(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy()


def close(got: torch.Tensor, want, rel=REL) -> None:
    want = np.asarray(want, dtype=np.float64)
    np.testing.assert_allclose(np_(got), want, rtol=rel, atol=rel * np.abs(want).max())


def no_failures(explainer, model, batch, target) -> None:
    failed = [(r.check, r.detail) for r in check_explainer(explainer, model, batch, target)
              if not r.passed]
    assert not failed, failed


# -- the BiLSTM classifier: numpy forward from the weights ------------------------------

IDS = torch.tensor([[3, 4, 5, 6, 0, 0, 0], [7, 8, 9, 10, 11, 12, 13], [2, 0, 0, 0, 0, 0, 0],
                    [14, 15, 3, 0, 0, 0, 0]])
TARGET = torch.tensor([0, 1, 2, 1])


def lstm_batch(segments=None) -> Batch:
    return Batch(ids=IDS, mask=IDS != 0, example_ids=tuple("abcd"), segments=segments)


def numpy_classifier_parts(model, ids):
    """Encoder states (T, 2H) and attention (T,) of one sentence, in numpy."""
    states, _ = numpy_bilstm(model.encoder, [np_(model.embedding.weight[i]) for i in ids])
    return states, numpy_attention(model.attn, states)


def test_attention_norm_on_the_classifier_is_the_norm_of_alpha_times_the_output_map():
    model = classifier()
    b = lstm_batch()
    got = NORM.explain(model, b, TARGET, rng=None)
    w_out = np_(model.out.weight)
    for r in range(len(b)):
        states, alpha = numpy_classifier_parts(model, b.tokens_of(r))
        norms = np.linalg.norm(alpha[:, None] * (states @ w_out.T), axis=1)  # ‖α_t W_out h_t‖
        n = len(norms)
        close(got[r, :n], norms / norms.sum())
        assert (got[r, n:] == 0).all()


def test_attention_x_gradient_on_the_classifier_is_alpha_times_w_target_dot_h():
    """logit_y = w_y · Σ_t α_t h_t + b_y, so ∂ logit_y / ∂α_t = w_y · h_t."""
    model = classifier()
    b = lstm_batch()
    got = ATTGRAD.explain(model, b, TARGET, rng=None)
    w_out = np_(model.out.weight)
    for r in range(len(b)):
        states, alpha = numpy_classifier_parts(model, b.tokens_of(r))
        n = len(alpha)
        close(got[r, :n], alpha * (states @ w_out[int(TARGET[r])]))
        assert (got[r, n:] == 0).all()


# -- the NLI BiLSTM: each side's attention, the MLP's gradient by hand --------------------

PAIR_IDS = torch.tensor([[3, 4, 5, 6, 0, 0, 0], [7, 8, 9, 10, 11, 12, 13], [2, 9, 0, 0, 0, 0, 0],
                         [14, 15, 3, 0, 0, 0, 0]])
PAIR_SEGMENTS = torch.tensor([[0, 0, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1, 1],
                              [0, 1, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0, 0]])


def pair_batch() -> Batch:
    return Batch(ids=PAIR_IDS, mask=PAIR_IDS != 0, example_ids=tuple("abcd"),
                 segments=PAIR_SEGMENTS)


def numpy_pair(model, ids, segments, target):
    """Per side: positions, states, attention; and ∂ logit_target / ∂ context per side."""
    sides = []
    for s, encoder in ((0, model.premise_encoder), (1, model.hypothesis_encoder)):
        where = [k for k, g in enumerate(segments) if g == s]
        states, _ = numpy_bilstm(encoder, [np_(model.embedding.weight[ids[k]]) for k in where])
        sides.append([where, states])
    (p_where, p_states), (h_where, h_states) = sides
    p_alpha = numpy_attention(model.premise_attn, p_states, h_states.mean(0))
    h_alpha = numpy_attention(model.hypothesis_attn, h_states, p_states.mean(0))
    c_p, c_h = p_alpha @ p_states, h_alpha @ h_states
    first, last = model.mlp[0], model.mlp[3]
    features = np.concatenate([c_p, c_h, np.abs(c_p - c_h), c_p * c_h])
    hidden = np.tanh(np_(first.weight) @ features + np_(first.bias))
    g = np_(first.weight).T @ (np_(last.weight)[target] * (1 - hidden ** 2))  # ∂y/∂features
    d, sign = len(c_p), np.sign(c_p - c_h)
    g_p = g[:d] + sign * g[2 * d:3 * d] + c_h * g[3 * d:]
    g_h = g[d:2 * d] - sign * g[2 * d:3 * d] + c_p * g[3 * d:]
    return [(p_where, p_states, p_alpha, g_p), (h_where, h_states, h_alpha, g_h)]


def test_nli_forms_follow_each_sides_attention():
    """f(h_t) = h_t on the NLI model (the contexts meet |·| and ⊙ at once): the norm is
    ‖α_t h_t‖ over both sides, renormalized; AttGrad is α_t (∂y/∂c_side · h_t)."""
    model = pair_model()
    b = pair_batch()
    norm = NORM.explain(model, b, TARGET, rng=None)
    grad = ATTGRAD.explain(model, b, TARGET, rng=None)
    for r in range(len(b)):
        n = int(b.lengths[r])
        ids, segments = b.ids[r, :n].tolist(), b.segments[r, :n].tolist()
        want_norm, want_grad = np.zeros(n), np.zeros(n)
        for where, states, alpha, g in numpy_pair(model, ids, segments, int(TARGET[r])):
            want_norm[where] = np.linalg.norm(alpha[:, None] * states, axis=1)
            want_grad[where] = alpha * (states @ g)
        close(norm[r, :n], want_norm / want_norm.sum())
        close(grad[r, :n], want_grad)
        assert (norm[r, n:] == 0).all() and (grad[r, n:] == 0).all()


# -- the alignment seq2seq: the explained step's readout, by hand ----------------------

def seq2seq():
    torch.manual_seed(0)
    config = Seq2SeqConfig(src_vocab_size=12, tgt_vocab_size=9, embed_dim=6, hidden=5,
                           attn_dim=4, dropout=0.0)
    return AttentionSeq2Seq(config).double().eval()


def seq2seq_rows() -> tuple[Batch, torch.Tensor]:
    src = torch.tensor([[3, 4, 5, 6, 0], [7, 8, 9, 10, 11], [5, 3, 0, 0, 0]])
    prefix = torch.tensor([[2, 4, 5, 0], [2, 0, 0, 0], [2, 3, 6, 7]])
    return (Batch(ids=src, mask=src != 0, example_ids=("s0:t2", "s1:t0", "s2:t3"),
                  prefix=prefix, prefix_mask=prefix != 0), torch.tensor([3, 8, 1]))


def test_seq2seq_forms_read_the_explained_steps_attention():
    """At the step explained, logit_y = w_y · tanh(R_s s + R_c Σ_t α_t h_t + b): the norm
    is ‖α_t R_c h_t‖, and ∂y/∂α_t = (R_c^T ((1 − o²) ⊙ w_y)) · h_t. The decoder state s and
    the encoder states h_t are read off the model's modules by hooks."""
    model = seq2seq()
    b, target = seq2seq_rows()
    seen: dict[str, list] = {"cell": []}
    hooks = [model.encoder.register_forward_hook(lambda m, a, out: seen.update(enc=out[0])),
             model.cell.register_forward_hook(lambda m, a, out: seen["cell"].append(out))]
    try:
        logits = model.logits(b)
        alpha = model.attention(b)
    finally:
        for h in hooks:
            h.remove()
    h = model.config.hidden
    r_s, r_c = np_(model.readout.weight)[:, :h], np_(model.readout.weight)[:, h:]
    w_out, b_out = np_(model.out.weight), np_(model.out.bias)
    norm = NORM.explain(model, b, target, rng=None)
    grad = ATTGRAD.explain(model, b, target, rng=None)
    steps = len(seen["cell"]) // 2  # logits, then attention: one decode each
    for r in range(len(b)):
        n, k = int(b.lengths[r]), int(b.prefix_mask[r].sum()) - 1
        states, a = np_(seen["enc"][r, :n]), np_(alpha[r, :n])
        s = np_(seen["cell"][k][r])
        o = np.tanh(r_s @ s + r_c @ (a @ states) + np_(model.readout.bias))
        np.testing.assert_allclose(w_out @ o + b_out, np_(logits[r]), rtol=1e-10)
        norms = np.linalg.norm(a[:, None] * (states @ r_c.T), axis=1)
        close(norm[r, :n], norms / norms.sum())
        g_c = r_c.T @ ((1 - o ** 2) * w_out[int(target[r])])
        close(grad[r, :n], a * (states @ g_c))
    assert steps == b.prefix.shape[1]


# -- a tiny BERT: the library's own forward on text -----------------------------------

SENTENCES = ["a gorgeous , witty movie .", "the lightness of being", "it 's not bad"]


@pytest.fixture(scope="module")
def bert():
    """A random two-layer BERT (weights x 6: attention far from uniform), its adapter,
    its tokenizer, and the three sentences as one padded batch of pieces."""
    return random_bert(SENTENCES, scale=6)


def library_run(hf, tokenizer, text):
    enc = tokenizer(text.split(), is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        return enc, hf(**enc, output_attentions=True, output_hidden_states=True)


@pytest.mark.parametrize("layer", [None, 0])
def test_attention_norm_on_bert_is_the_norm_of_the_head_sum_of_alpha_f(bert, layer):
    """‖Σ_h α_h,0,j (x_j W_V^h + b_V^h) W_O^h‖ at the [CLS] row, in numpy from the weights
    and the library's own hidden states and attentions, pieces renormalized."""
    hf, model, tokenizer, b = bert
    explainer = NORM if layer is None else AttentionNormExplainer(layer=layer)
    got = explainer.explain(model, b, None, rng=None)
    heads = hf.config.num_attention_heads
    size = hf.config.hidden_size // heads
    for r, text in enumerate(SENTENCES):
        _, out = library_run(hf, tokenizer, text)
        at = len(out.attentions) - 1 if layer is None else layer
        module = hf.bert.encoder.layer[at]
        x = np_(out.hidden_states[at][0])  # the layer's input, (S, D)
        v = x @ np_(module.attention.self.value.weight).T + np_(module.attention.self.value.bias)
        w_o = np_(module.attention.output.dense.weight)
        alpha = np_(out.attentions[at][0])  # (H, S, S)
        total = sum(alpha[h, 0, :, None] * (v[:, h * size:(h + 1) * size]
                                            @ w_o[:, h * size:(h + 1) * size].T)
                    for h in range(heads))
        n = int(b.lengths[r])
        norms = np.linalg.norm(total, axis=1)[1:n + 1]  # the pieces between [CLS] and [SEP]
        close(got[r, :n], norms / norms.sum())
        assert (got[r, n:] == 0).all()


def test_attention_x_gradient_on_bert_matches_a_hand_built_last_layer(bert):
    """The last layer rebuilt for the [CLS] position from the library's hidden states,
    with its attention row as a torch leaf: context_h = Σ_j α_h,j v_h,j, then output map,
    LayerNorm, feed-forward, LayerNorm, pooler, classifier; score = mean_h α_h,j ∂y/∂α_h,j."""
    hf, model, tokenizer, b = bert
    target = torch.tensor([0, 2, 1])
    got = ATTGRAD.explain(model, b, target, rng=None)
    heads = hf.config.num_attention_heads
    for r, text in enumerate(SENTENCES):
        _, out = library_run(hf, tokenizer, text)
        last = hf.bert.encoder.layer[-1]
        x = out.hidden_states[-2][0]  # (S, D), the last layer's input
        v = last.attention.self.value(x).view(x.shape[0], heads, -1).detach()
        alpha = out.attentions[-1][0, :, 0, :].clone().requires_grad_(True)  # (H, S)
        context = torch.einsum("hs,shd->hd", alpha, v).reshape(-1)
        h0 = last.attention.output.LayerNorm(last.attention.output.dense(context) + x[0])
        inner = last.intermediate.intermediate_act_fn(last.intermediate.dense(h0))
        o0 = last.output.LayerNorm(last.output.dense(inner) + h0)
        logits = hf.classifier(torch.tanh(hf.bert.pooler.dense(o0)))
        torch.testing.assert_close(logits, out.logits[0], rtol=1e-10, atol=1e-12)
        (g,) = torch.autograd.grad(logits[int(target[r])], alpha)
        n = int(b.lengths[r])
        close(got[r, :n], np_((alpha * g).mean(0))[1:n + 1])
        assert (got[r, n:] == 0).all()


def hand_value_zeroing(hf, tokenizer, text) -> np.ndarray:
    """Mohebbi et al.'s procedure, one example, one (layer, token) at a time: zero token
    t's value vector (all heads) in layer l by a forward hook, run the whole model, read
    layer l's output; cosine distance 1 − cos per token; rows normalized; rollout
    without identity; the [CLS] row over the pieces."""
    enc, base = library_run(hf, tokenizer, text)
    layers = hf.bert.encoder.layer
    width = enc["input_ids"].shape[1]
    scores = np.zeros((len(layers), width, width))
    for l, layer in enumerate(layers):
        original = np_(base.hidden_states[l + 1][0])
        for t in range(width):
            def zero(module, args, output, t=t):
                output = output.clone()
                output[:, t] = 0.0
                return output

            handle = layer.attention.self.value.register_forward_hook(zero)
            try:
                with torch.no_grad():
                    changed = np_(hf(**enc, output_hidden_states=True).hidden_states[l + 1][0])
            finally:
                handle.remove()
            cos = (changed * original).sum(1) / (np.linalg.norm(changed, axis=1)
                                                 * np.linalg.norm(original, axis=1))
            scores[l, :, t] = 1 - cos
    scores /= scores.sum(-1, keepdims=True)
    rolled = scores[0]
    for l in range(1, len(layers)):
        rolled = scores[l] @ rolled
    row = rolled[0, 1:width - 1]
    return row / row.sum()


def test_value_zeroing_matches_the_authors_loop_over_layers_and_tokens(bert):
    """Batched (three sentences of different lengths, padded; every token's variant of a
    layer in one pass) against the per-example loop above."""
    hf, model, tokenizer, b = bert
    got = ZEROING.explain(model, b, None, rng=None)
    for r, text in enumerate(SENTENCES):
        n = int(b.lengths[r])
        close(got[r, :n], hand_value_zeroing(hf, tokenizer, text))
        assert (got[r, n:] == 0).all()


def test_value_zeroing_maps_are_row_normalized_and_blind_to_padding(bert):
    _, model, _, b = bert
    maps, index = model.value_zeroing_maps(b)
    width = maps.shape[-1]
    for r in range(len(b)):
        real = int(b.lengths[r]) + 2  # [CLS] pieces [SEP]
        torch.testing.assert_close(maps[r, :, :real].sum(-1),
                                   torch.ones(maps.shape[1], real, dtype=maps.dtype))
        assert (maps[r, :, real:] == 0).all() and (maps[r, :, :, real:] == 0).all()
        assert width >= real and index[r, : real - 2].tolist() == list(range(1, real - 1))


# -- the substitution is exact, the plugin checks pass ---------------------------------

def test_logits_from_the_models_own_attention_are_its_logits(bert):
    """``logits_from_attention(attention_leaf(batch))`` is ``logits(batch)`` on every model
    (the NLI batch of ``tests/test_lrp.py`` has a row whose premise is empty)."""
    from tests.test_lrp import SEGMENTS
    seq, (rows, _) = seq2seq(), seq2seq_rows()
    cases = [(classifier(), lstm_batch()), (pair_model(), lstm_batch(SEGMENTS)),
             (pair_model(), pair_batch()), (seq, rows), (bert[1], bert[3])]
    for model, b in cases:
        with torch.no_grad():
            weights, _ = model.attention_leaf(b)
            torch.testing.assert_close(model.logits_from_attention(weights, b), model.logits(b),
                                       rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NEW[:2])
def test_bilstm_forms_pass_every_plugin_check(name):
    explainer = submissions.get_explainer(name)
    no_failures(explainer, tiny_classifier(), *three_row_batch())
    no_failures(explainer, pair_model().float(), pair_batch(), TARGET)
    no_failures(explainer, seq2seq().float(), *seq2seq_rows())


@pytest.mark.parametrize("name", NEW)
def test_transformer_forms_pass_every_plugin_check(bert, name):
    _, model, _, b = bert
    no_failures(submissions.get_explainer(name), model, b, torch.tensor([0, 1, 2]))


def test_a_worker_gives_this_processs_scores(bert):
    """A worker process gets the model as a file (the Transformer rebuilt from its config
    and weights, no hooks left on it) and answers as this process does."""
    from faithbench.benchmark.core.isolation import InProcess

    cases = [(ATTGRAD, tiny_classifier(), *three_row_batch()),
             (ATTGRAD, bert[1], bert[3], torch.tensor([0, 1, 2])),
             (ZEROING, bert[1], bert[3], torch.tensor([0, 1, 2]))]
    for explainer, model, b, target in cases:
        here = InProcess(explainer, model, None).explain(b, target, seed=0)
        with plugin_caller(explainer, model, time_budget_s=None, isolation="process") as caller:
            torch.testing.assert_close(caller.explain(b, target, seed=0), here)


# -- capabilities: who serves what, and refusal by name --------------------------------

def test_a_bilstm_serves_the_norm_and_gradient_forms_but_not_value_zeroing():
    model = tiny_classifier()
    assert {ATTENTION_VECTORS, ATTENTION_GRADIENT} <= capabilities(model)
    assert VALUE_ZEROING not in capabilities(model)
    kept = {e.spec.name for e in serviceable([submissions.get_explainer(n) for n in NEW],
                                             model, "t")}
    assert kept == {"attention_norm", "attention_x_gradient"}
    with pytest.raises(PluginError, match="needs value_zeroing.*only a BERT-layout Transformer"), \
            plugin_caller(ZEROING, model, time_budget_s=None):
        pass
    with pytest.raises(PluginError, match="needs layer_attention"), \
            plugin_caller(configured("attention_norm[layer=0]"), model, time_budget_s=None):
        pass


def test_only_a_bert_layout_transformer_offers_the_forms(bert):
    transformers = pytest.importorskip("transformers")
    from faithbench.benchmark.core.models.transformer import TransformerClassifier

    _, model, tokenizer, _ = bert
    assert {ATTENTION_VECTORS, ATTENTION_GRADIENT, VALUE_ZEROING} <= capabilities(model)
    config = transformers.DistilBertConfig(vocab_size=tokenizer.vocab_size, dim=8, n_layers=1,
                                           n_heads=2, hidden_dim=12, num_labels=2)
    other = TransformerClassifier(transformers.DistilBertForSequenceClassification(config),
                                  tokenizer)
    assert not {ATTENTION_VECTORS, ATTENTION_GRADIENT, VALUE_ZEROING} & capabilities(other)
    with pytest.raises(PluginError, match="value_zeroing"), \
            plugin_caller(ZEROING, other, time_budget_s=None):
        pass


def test_ids_and_parameters():
    assert [submissions.get_explainer(n).spec.id for n in NEW] == [
        "attention_norm@1", "attention_x_gradient@1",
        "value_zeroing[aggregation=rollout;distance=cosine]@1"]
    assert configured("attention_norm[layer=-2]").spec.id == "attention_norm[layer=-2]@1"
    assert all(n in submissions.REFERENCE for n in NEW)
