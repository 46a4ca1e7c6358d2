"""LRP (``submissions/lrp.py``, rules in ``benchmark/core/lrp.py``) against an explicit
numpy implementation written here the way Arras et al.'s reference code is: a forward
pass per example over its real tokens, then relevance messages layer by layer, in
loops, with ``lrp_linear``'s formula (numer = w·x, denom = z + ε·sign(z), bias_factor
0). The implementation under test instead rebuilds the model's forward pass from
operations whose backward pass carries relevance; the two share no code.

Conservation, computed independently: with every bias zero and ε → 0 each rule passes
on all it receives, so a sentence's token scores sum to its target logit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from faithbench.benchmark.core.api import LRP, Batch
from faithbench.benchmark.core.models.classifier import AttentionClassifier, ClassifierConfig
from faithbench.benchmark.core.models.pair_classifier import PairAttentionClassifier, PairConfig
from faithbench.benchmark.runner import configured
from faithbench.submissions.lrp import EXPLAINER, LRPExplainer
from tests.tiny_bert import random_bert

IDS = torch.tensor([[3, 4, 5, 6, 0, 0, 0], [7, 8, 9, 10, 11, 12, 13], [2, 0, 0, 0, 0, 0, 0],
                    [14, 15, 3, 0, 0, 0, 0]])
TARGET = torch.tensor([0, 1, 2, 1])


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def stab(z, eps):
    return z + eps * np.where(z >= 0, 1.0, -1.0)


def lrp_linear(x, w, b, z, r_out, eps):
    """Relevance of x (D,) for z = w @ x + b (w: (M, D)), relevance r_out (M,) of z."""
    messages = np.zeros((len(x), len(z)))
    for i in range(len(x)):
        for j in range(len(z)):
            messages[i, j] = w[j, i] * x[i] / stab(z[j], eps) * r_out[j]
    return messages.sum(axis=1)


class NumpyLSTM:
    """One direction of a torch LSTM, forward over a list of vectors, then LRP."""

    def __init__(self, rnn: torch.nn.LSTM, suffix: str):
        def get(name):
            return getattr(rnn, name + suffix).detach().numpy()

        self.w_ih, self.w_hh = get("weight_ih_l0"), get("weight_hh_l0")
        self.b = get("bias_ih_l0") + get("bias_hh_l0")
        self.n = self.w_hh.shape[1]

    def forward(self, xs):
        n, h, c = self.n, np.zeros(self.n), np.zeros(self.n)
        self.xs, self.hs, self.cs, self.gates = xs, [h], [c], []
        for x in xs:
            pre = self.w_ih @ x + self.w_hh @ h + self.b
            i, f = sigmoid(pre[:n]), sigmoid(pre[n:2 * n])
            g, o = np.tanh(pre[2 * n:3 * n]), sigmoid(pre[3 * n:])
            c = f * c + i * g
            h = o * np.tanh(c)
            self.gates.append((i, f, g, pre[2 * n:3 * n]))
            self.hs.append(h)
            self.cs.append(c)
        return self.hs[1:]

    def relevance(self, r_h, eps):
        """Relevance of every input vector given that of every output state."""
        n, steps = self.n, len(self.xs)
        r_h = [r.copy() for r in r_h]
        r_c = [np.zeros(n) for _ in range(steps)]
        r_x = [None] * steps
        for t in reversed(range(steps)):
            i, f, g, z_g = self.gates[t]
            c_prev, c = self.cs[t], self.cs[t + 1]
            r_c[t] += r_h[t]  # h = o * tanh(c): all to c
            if t > 0:
                r_c[t - 1] += f * c_prev / stab(c, eps) * r_c[t]
            r_g = i * g / stab(c, eps) * r_c[t]
            w_x, w_h = self.w_ih[2 * n:3 * n], self.w_hh[2 * n:3 * n]
            r_x[t] = lrp_linear(self.xs[t], w_x, self.b[2 * n:3 * n], z_g, r_g, eps)
            if t > 0:
                r_h[t - 1] += lrp_linear(self.hs[t], w_h, self.b[2 * n:3 * n], z_g, r_g, eps)
        return r_x


def numpy_bilstm(encoder, xs):
    """(T, 2H) states of both directions, and the two directions (for their relevance)."""
    fwd, bwd = NumpyLSTM(encoder.rnn, ""), NumpyLSTM(encoder.rnn, "_reverse")
    states = np.concatenate([np.stack(fwd.forward(xs)), np.stack(bwd.forward(xs[::-1])[::-1])],
                            axis=1)
    return states, (fwd, bwd)


def numpy_attention(attn, states, query=None):
    key = attn.key.weight.detach().numpy(), attn.key.bias.detach().numpy()
    hidden = states @ key[0].T + key[1]
    if query is not None:
        hidden = hidden + attn.query.weight.detach().numpy() @ query
    scores = np.tanh(hidden) @ attn.v.weight.detach().numpy()[0]
    alpha = np.exp(scores - scores.max())
    return alpha / alpha.sum()


def context_relevance(alpha, states, context, r_context, eps):
    """Relevance of every state for context = Σ_t α_t states_t (α constant)."""
    return alpha[:, None] * states / stab(context, eps)[None, :] * r_context[None, :]


def bilstm_input_relevance(units, r_states, eps):
    fwd, bwd = units
    n = fwd.n
    r_f = fwd.relevance([r[:n] for r in r_states], eps)
    r_b = bwd.relevance([r[n:] for r in r_states][::-1], eps)[::-1]
    return [a + b for a, b in zip(r_f, r_b)]


def numpy_lrp_classifier(model: AttentionClassifier, ids, target, eps):
    """Token relevance of one sentence (its real ids) for ``target``."""
    xs = [model.embedding.weight[i].detach().numpy() for i in ids]
    states, units = numpy_bilstm(model.encoder, xs)
    alpha = numpy_attention(model.attn, states)
    context = alpha @ states
    w, b = model.out.weight.detach().numpy(), model.out.bias.detach().numpy()
    logits = w @ context + b
    r_out = np.zeros_like(logits)
    r_out[target] = logits[target]
    r_context = lrp_linear(context, w, b, logits, r_out, eps)
    r_states = context_relevance(alpha, states, context, r_context, eps)
    return np.array([r.sum() for r in bilstm_input_relevance(units, r_states, eps)]), logits


def numpy_lrp_pair(model: PairAttentionClassifier, ids, segments, target, eps):
    """Token relevance of one sentence pair, in the row's order."""
    emb = model.embedding.weight.detach().numpy()
    sides, positions = [], []
    for s, encoder in ((0, model.premise_encoder), (1, model.hypothesis_encoder)):
        where = [k for k, seg in enumerate(segments) if seg == s]
        positions.append(where)
        sides.append(numpy_bilstm(encoder, [emb[ids[k]] for k in where]))
    (p_states, _), (h_states, _) = sides
    p_alpha = numpy_attention(model.premise_attn, p_states, h_states.mean(0))
    h_alpha = numpy_attention(model.hypothesis_attn, h_states, p_states.mean(0))
    p, h = p_alpha @ p_states, h_alpha @ h_states
    diff = p - h
    features = np.concatenate([p, h, np.abs(diff), p * h])
    first, last = model.mlp[0], model.mlp[3]
    w1, b1 = first.weight.detach().numpy(), first.bias.detach().numpy()
    w2, b2 = last.weight.detach().numpy(), last.bias.detach().numpy()
    z1 = w1 @ features + b1
    hidden = np.tanh(z1)
    logits = w2 @ hidden + b2
    r_out = np.zeros_like(logits)
    r_out[target] = logits[target]
    r_hidden = lrp_linear(hidden, w2, b2, logits, r_out, eps)
    r_features = lrp_linear(features, w1, b1, z1, r_hidden, eps)  # tanh: unchanged
    d = len(p)
    r_p, r_h = r_features[:d].copy(), r_features[d:2 * d].copy()
    r_diff = r_features[2 * d:3 * d]  # |x|: unchanged
    r_p += p / stab(diff, eps) * r_diff
    r_h += -h / stab(diff, eps) * r_diff
    r_p += r_features[3 * d:] / 2
    r_h += r_features[3 * d:] / 2
    out = np.zeros(len(ids))
    for (states, units), alpha, ctx, r_ctx, where in (
            (sides[0], p_alpha, p, r_p, positions[0]), (sides[1], h_alpha, h, r_h, positions[1])):
        r_states = context_relevance(alpha, states, ctx, r_ctx, eps)
        for k, r in zip(where, bilstm_input_relevance(units, r_states, eps)):
            out[k] = r.sum()
    return out, logits


def classifier(seed=0, biases=True) -> AttentionClassifier:
    torch.manual_seed(seed)
    model = AttentionClassifier(ClassifierConfig(vocab_size=20, num_classes=3, embed_dim=5,
                                                 hidden=4, attn_dim=3)).double().eval()
    return _biases(model, biases)


def pair_model(seed=0, biases=True) -> PairAttentionClassifier:
    torch.manual_seed(seed)
    model = PairAttentionClassifier(PairConfig(vocab_size=20, num_classes=3, embed_dim=5,
                                               hidden=4, attn_dim=3, mlp_dim=6)
                                    ).double().eval()
    return _biases(model, biases)


def _biases(model, keep: bool):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "bias" in name:
                p.copy_(torch.randn_like(p) * 0.5 if keep else torch.zeros_like(p))
    return model


def batch(segments=None) -> Batch:
    return Batch(ids=IDS, mask=IDS != 0, example_ids=tuple("abcd"), segments=segments)


SEGMENTS = torch.tensor([[0, 0, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0, 0],
                         [0, 1, 1, 0, 0, 0, 0]])


@pytest.mark.parametrize("eps", [0.001, 0.1])
def test_the_classifier_equals_the_numpy_layer_by_layer_lrp(eps):
    model = classifier()
    scores = LRPExplainer(eps=eps).explain(model, batch(), TARGET, rng=None)
    for row in range(len(IDS)):
        n = int((IDS[row] != 0).sum())
        want, logits = numpy_lrp_classifier(model, IDS[row, :n].tolist(), int(TARGET[row]), eps)
        assert np.allclose(logits, model.logits(batch()).detach().numpy()[row], atol=1e-12)
        assert scores[row, :n].numpy() == pytest.approx(want, rel=1e-5, abs=1e-10)  # float32
        assert (scores[row, n:] == 0).all()


def test_the_nli_model_equals_the_numpy_layer_by_layer_lrp():
    model = pair_model()
    b = batch(SEGMENTS)
    scores = EXPLAINER.explain(model, b, TARGET, rng=None)
    # row 2 has no premise token: its empty side runs over one padding step, as the model
    for row in (0, 1, 3):
        n = int((IDS[row] != 0).sum())
        want, logits = numpy_lrp_pair(model, IDS[row, :n].tolist(), SEGMENTS[row, :n].tolist(),
                                      int(TARGET[row]), 0.001)
        assert np.allclose(logits, model.logits(b).detach().numpy()[row], atol=1e-12)
        assert scores[row, :n].numpy() == pytest.approx(want, rel=1e-5, abs=1e-10)


@pytest.mark.parametrize("make, segments", [(classifier, None), (pair_model, SEGMENTS)])
def test_relevance_is_conserved_without_biases(make, segments):
    """Zero biases, ε = 1e-9: every rule passes on all it gets, so the scores of a row
    sum to its target logit (to 1e-6 of it); with biases they do not."""
    b = batch(segments)
    model = make(biases=False)
    logit = model.logits(b).gather(1, TARGET.view(-1, 1)).squeeze(1).detach()
    rows = [0, 1, 3]  # row 2 of the pair batch has an empty side (one padding step)
    scores = LRPExplainer(eps=1e-9).explain(model, b, TARGET, rng=None).double()
    assert scores.sum(1)[rows] == pytest.approx(logit[rows], rel=1e-4, abs=1e-7)
    biased = make(biases=True)
    logit = biased.logits(b).gather(1, TARGET.view(-1, 1)).squeeze(1).detach()
    scores = LRPExplainer(eps=1e-9).explain(biased, b, TARGET, rng=None).double()
    assert (scores.sum(1)[rows] - logit[rows]).abs().max() > 1e-3


def test_lrp_logits_are_the_models_logits_and_need_the_capability():
    model = classifier()
    embeds = model.embed(batch())
    assert torch.allclose(model.lrp_logits(embeds, batch()),
                          model.logits_from_embeddings(embeds, batch()), atol=1e-12)
    assert LRP in model.capabilities
    assert configured("lrp[eps=0.01]").spec.id == "lrp[eps=0.01]@1"


# -- the Transformer family: conservative propagation (Ali et al. 2022) -------------------


@pytest.fixture(scope="module")
def tiny_bert():
    """A random two-layer BERT (``tests.tiny_bert``), its adapter, and a batch of two
    sentences."""
    hf, model, _, batch = random_bert(["a gorgeous , witty movie .", "the lightness of being"])
    return hf, model, batch


def _np(t):
    return t.detach().numpy()


def np_linear(x, layer):
    return x @ _np(layer.weight).T + _np(layer.bias)


def np_linear_relevance(x, layer, z, r_z, eps):
    """ε-rule messages x_i w_ji / stab(z_j) r_j, per position."""
    w = _np(layer.weight)
    return np.einsum("si,ji,sj->si", x, w, r_z / stab(z, eps))


def np_layer_norm(x, ln):
    sigma = np.sqrt(x.var(-1, keepdims=True) + ln.eps)
    return (x - x.mean(-1, keepdims=True)) / sigma * _np(ln.weight) + _np(ln.bias), sigma


def np_layer_norm_relevance(x, ln, sigma, y, r_y, eps):
    """The explicit (n x n) map J = diag(γ/σ)(I - 11ᵀ/n) of each position, σ constant."""
    n = x.shape[-1]
    out = np.zeros_like(x)
    for s in range(len(x)):
        jac = np.diag(_np(ln.weight) / sigma[s, 0]) @ (np.eye(n) - np.ones((n, n)) / n)
        out[s] = np.einsum("ji,i,j->i", jac, x[s], r_y[s] / stab(y[s], eps))
    return out


def np_sum_relevance(terms, r, eps):
    total = sum(terms)
    return [t * r / stab(total, eps) for t in terms]


def numpy_bert_lrp(hf, full, types, length, target, eps):
    """Relevance of each input position's word embedding (its first ``length``
    positions are real), by explicit messages, layer by layer."""
    from scipy.special import softmax

    bert, cfg = hf.bert, hf.config
    heads, size = cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads
    word = full[:length]
    pos = _np(bert.embeddings.position_embeddings.weight)[:length]
    kind = _np(bert.embeddings.token_type_embeddings.weight)[types[:length]]
    summed = word + pos + kind
    x, sigma = np_layer_norm(summed, bert.embeddings.LayerNorm)
    tape = [("embeddings", summed, sigma, x)]
    for layer in bert.encoder.layer:
        att = layer.attention.self
        q, k, v = (np_linear(x, m).reshape(length, heads, size) for m in (att.query, att.key,
                                                                             att.value))
        probs = softmax(np.einsum("ihd,jhd->hij", q, k) / np.sqrt(size), axis=-1)
        mixed = np.einsum("hij,jhd->ihd", probs, v).reshape(length, -1)
        dense = np_linear(mixed, layer.attention.output.dense)
        a_sum = dense + x
        a, a_sigma = np_layer_norm(a_sum, layer.attention.output.LayerNorm)
        inter = np_linear(a, layer.intermediate.dense)
        act = _np(layer.intermediate.intermediate_act_fn(torch.from_numpy(inter)))
        out = np_linear(act, layer.output.dense)
        o_sum = out + a
        y, o_sigma = np_layer_norm(o_sum, layer.output.LayerNorm)
        tape.append((layer, x, v, probs, mixed, dense, a_sum, a_sigma, a, inter, act, out,
                     o_sum, o_sigma, y))
        x = y
    pooled_z = np_linear(x[0], bert.pooler.dense)
    pooled = np.tanh(pooled_z)
    logits = np_linear(pooled, hf.classifier)
    r = np.zeros_like(logits)
    r[target] = logits[target]
    r_pooled = np_linear_relevance(pooled[None], hf.classifier, logits[None], r[None], eps)[0]
    r_x = np.zeros_like(x)
    r_x[0] = np_linear_relevance(x[:1], bert.pooler.dense, pooled_z[None], r_pooled[None],
                                 eps)[0]  # tanh: unchanged
    for (layer, x_in, v, probs, mixed, dense, a_sum, a_sigma, a, inter, act, out, o_sum,
         o_sigma, y) in reversed(tape[1:]):
        r_o_sum = np_layer_norm_relevance(o_sum, layer.output.LayerNorm, o_sigma, y, r_x, eps)
        r_out, r_a = np_sum_relevance([out, a], r_o_sum, eps)
        r_act = np_linear_relevance(act, layer.output.dense, out, r_out, eps)
        r_a = r_a + np_linear_relevance(a, layer.intermediate.dense, inter, r_act, eps)  # GELU
        r_a_sum = np_layer_norm_relevance(a_sum, layer.attention.output.LayerNorm, a_sigma, a,
                                          r_a, eps)
        r_dense, r_x = np_sum_relevance([dense, x_in], r_a_sum, eps)
        r_mixed = np_linear_relevance(mixed, layer.attention.output.dense, dense, r_dense, eps)
        r_mixed = r_mixed.reshape(length, heads, size)
        mixed_h = mixed.reshape(length, heads, size)
        r_v = np.zeros_like(v)
        for h in range(heads):
            for i in range(length):
                for j in range(length):
                    r_v[j, h] += (probs[h, i, j] * v[j, h] / stab(mixed_h[i, h], eps)
                                  * r_mixed[i, h])
        v_z = np_linear(x_in, layer.attention.self.value)
        r_x = r_x + np_linear_relevance(x_in, layer.attention.self.value, v_z,
                                        r_v.reshape(length, -1), eps)
    _, summed, sigma, x0 = tape[0]
    r_summed = np_layer_norm_relevance(summed, bert.embeddings.LayerNorm, sigma, x0, r_x, eps)
    return np_sum_relevance([word, pos, kind], r_summed, eps)[0].sum(-1), logits


@pytest.mark.parametrize("eps", [0.001, 0.05])
def test_the_transformer_equals_the_numpy_layer_by_layer_lrp(tiny_bert, eps):
    hf, model, b = tiny_bert
    target = torch.tensor([0, 2])
    scores = LRPExplainer(eps=eps).explain(model, b, target, rng=None)
    full, attention_mask, types, index = model._wrap(model.embed(b), b)
    logits = model.logits(b)
    for row in range(len(b)):
        length = int(attention_mask[row].sum())
        want, np_logits = numpy_bert_lrp(hf, _np(full[row]), _np(types[row]), length,
                                         int(target[row]), eps)
        assert np_logits == pytest.approx(_np(logits[row]), abs=1e-10)
        n = int(b.mask[row].sum())
        picked = want[_np(index[row, :n])]
        assert scores[row, :n].numpy() == pytest.approx(picked, rel=1e-5, abs=1e-10)


def test_transformer_relevance_is_conserved_without_biases(tiny_bert):
    """No bias (LayerNorm's β included), no position or type embedding and zero [CLS] and
    [SEP] vectors: every rule passes on all it gets, so the pieces' scores sum to the
    target logit (ε = 1e-9)."""
    hf, model, b = tiny_bert
    import copy

    hf = copy.deepcopy(hf)
    tokenizer = model.tokenizer
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "position_embeddings" in name or "token_type" in name:
                p.zero_()
        for special in (tokenizer.cls_token_id, tokenizer.sep_token_id):
            hf.bert.embeddings.word_embeddings.weight[special] = 0
    from faithbench.benchmark.core.models.transformer import TransformerClassifier

    bare = TransformerClassifier(hf, tokenizer).eval()
    target = torch.tensor([1, 0])
    logit = bare.logits(b).gather(1, target.view(-1, 1)).squeeze(1).detach()
    scores = LRPExplainer(eps=1e-9).explain(bare, b, target, rng=None).double()
    assert scores.sum(1) == pytest.approx(logit, rel=1e-4, abs=1e-9)


def test_only_bert_offers_lrp(tiny_bert):
    transformers = pytest.importorskip("transformers")
    from faithbench.benchmark.core.models.transformer import TransformerClassifier

    _, model, _ = tiny_bert
    assert LRP in model.capabilities
    config = transformers.DistilBertConfig(vocab_size=model.tokenizer.vocab_size, dim=8,
                                           n_layers=1, n_heads=2, hidden_dim=12, num_labels=2)
    other = TransformerClassifier(transformers.DistilBertForSequenceClassification(config),
                                  model.tokenizer)
    assert LRP not in other.capabilities


# -- the alignment seq2seq: GRU encoder-decoder with attention ----------------------------


class NumpyGRU:
    """A torch GRU (one direction) or GRUCell, forward over vectors, then LRP."""

    def __init__(self, w_ih, w_hh, b_ih, b_hh):
        self.w_ih, self.w_hh, self.b_ih, self.b_hh = (_np(w) for w in (w_ih, w_hh, b_ih, b_hh))
        self.n = self.w_hh.shape[1]

    def step(self, x, h):
        n = self.n
        gi, gh = self.w_ih @ x + self.b_ih, self.w_hh @ h + self.b_hh
        r, z = sigmoid(gi[:n] + gh[:n]), sigmoid(gi[n:2 * n] + gh[n:2 * n])
        pre = gi[2 * n:] + r * gh[2 * n:]
        cand = np.tanh(pre)
        out = (1 - z) * cand + z * h
        return out, (x, h, r, z, pre, cand, out)

    def step_relevance(self, saved, r_out, eps):
        """(relevance of x, relevance of h) for one step."""
        x, h, r, z, pre, cand, out = saved
        n = self.n
        r_cand = (1 - z) * cand / stab(out, eps) * r_out
        r_h = z * h / stab(out, eps) * r_out
        w_in, w_hn = self.w_ih[2 * n:], self.w_hh[2 * n:]
        r_x = np.zeros_like(x)
        for i in range(len(x)):
            for j in range(n):
                r_x[i] += x[i] * w_in[j, i] / stab(pre[j], eps) * r_cand[j]
        for i in range(n):
            for j in range(n):
                r_h[i] += h[i] * r[j] * w_hn[j, i] / stab(pre[j], eps) * r_cand[j]
        return r_x, r_h


def numpy_gru_run(gru: NumpyGRU, xs):
    h, saved, outs = np.zeros(gru.n), [], []
    for x in xs:
        h, s = gru.step(x, h)
        saved.append(s)
        outs.append(h)
    return outs, saved


def numpy_gru_relevance(gru, saved, r_outs, eps):
    """Relevance of each input given that of each output state (r_outs: a list)."""
    r_outs = [r.copy() for r in r_outs]
    r_xs = [None] * len(saved)
    for t in reversed(range(len(saved))):
        r_xs[t], r_h = gru.step_relevance(saved[t], r_outs[t], eps)
        if t > 0:
            r_outs[t - 1] += r_h
    return r_xs


def numpy_lrp_seq2seq(model, src, prefix, target, eps):
    rnn = model.encoder.rnn
    fwd = NumpyGRU(rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0)
    bwd = NumpyGRU(rnn.weight_ih_l0_reverse, rnn.weight_hh_l0_reverse, rnn.bias_ih_l0_reverse,
                   rnn.bias_hh_l0_reverse)
    xs = [_np(model.src_embedding.weight[i]) for i in src]
    f_out, f_saved = numpy_gru_run(fwd, xs)
    b_out, b_saved = numpy_gru_run(bwd, xs[::-1])
    states = np.concatenate([np.stack(f_out), np.stack(b_out[::-1])], axis=1)
    last = np.concatenate([f_out[-1], b_out[-1]])
    init_pre = np_linear(last, model.init_state)
    s = np.tanh(init_pre)
    cell = NumpyGRU(model.cell.weight_ih, model.cell.weight_hh, model.cell.bias_ih,
                    model.cell.bias_hh)
    context = np.zeros(states.shape[1])
    steps = []
    for word in prefix:
        x = np.concatenate([_np(model.tgt_embedding.weight[word]), context])
        s, saved = cell.step(x, s)
        alpha = numpy_attention(model.attn, states, s)
        context = alpha @ states
        joint = np.concatenate([s, context])
        read_pre = np_linear(joint, model.readout)
        steps.append((saved, alpha, context, joint, read_pre, np.tanh(read_pre)))
    logits = np_linear(steps[-1][-1], model.out)
    r_logits = np.zeros_like(logits)
    r_logits[target] = logits[target]
    h, e = model.config.hidden, model.config.embed_dim
    r_s, r_ctx = np.zeros(h), np.zeros(states.shape[1])
    r_states = np.zeros_like(states)
    _, _, _, joint, read_pre, read = steps[-1]
    r_read = np_linear_relevance(read[None], model.out, logits[None], r_logits[None], eps)[0]
    r_joint = np_linear_relevance(joint[None], model.readout, read_pre[None], r_read[None],
                                  eps)[0]  # tanh: unchanged
    r_s, r_ctx = r_joint[:h], r_joint[h:]
    for k in reversed(range(len(steps))):
        saved, alpha, context, _, _, _ = steps[k]
        r_states += context_relevance(alpha, states, context, r_ctx, eps)
        r_x, r_s = cell.step_relevance(saved, r_s, eps)
        r_ctx = r_x[e:]  # the previous step's context (zero before the first step)
    r_last = np_linear_relevance(last[None], model.init_state, init_pre[None], r_s[None],
                                 eps)[0]  # tanh: unchanged
    n = model.encoder.output_dim // 2
    r_f = [r[:n] for r in r_states]
    r_f[-1] = r_f[-1] + r_last[:n]
    r_b = [r[n:] for r in r_states][::-1]
    r_b[-1] = r_b[-1] + r_last[n:]
    r_x = [a + b for a, b in zip(numpy_gru_relevance(fwd, f_saved, r_f, eps),
                                 numpy_gru_relevance(bwd, b_saved, r_b, eps)[::-1])]
    return np.array([r.sum() for r in r_x]), logits


@pytest.mark.parametrize("eps", [0.001, 0.1])
def test_the_seq2seq_equals_the_numpy_layer_by_layer_lrp(eps):
    from faithbench.benchmark.core.models.seq2seq import AttentionSeq2Seq, Seq2SeqConfig

    torch.manual_seed(0)
    model = _biases(AttentionSeq2Seq(Seq2SeqConfig(src_vocab_size=20, tgt_vocab_size=15,
                                                   embed_dim=5, hidden=4, attn_dim=3)
                                     ).double().eval(), True)
    ids = torch.tensor([[3, 4, 5, 6, 0], [7, 8, 9, 10, 11], [12, 13, 0, 0, 0]])
    prefix = torch.tensor([[2, 5, 6], [2, 7, 0], [2, 0, 0]])
    b = Batch(ids=ids, mask=ids != 0, example_ids=("a", "b", "c"), prefix=prefix,
              prefix_mask=prefix != 0)
    target = torch.tensor([4, 9, 3])
    scores = LRPExplainer(eps=eps).explain(model, b, target, rng=None)
    logits = model.logits(b)
    for row in range(3):
        n, u = int(b.mask[row].sum()), int(b.prefix_mask[row].sum())
        want, np_logits = numpy_lrp_seq2seq(model, ids[row, :n].tolist(),
                                            prefix[row, :u].tolist(), int(target[row]), eps)
        assert np_logits == pytest.approx(_np(logits[row]), abs=1e-10)
        assert scores[row, :n].numpy() == pytest.approx(want, rel=1e-5, abs=1e-10)
        assert (scores[row, n:] == 0).all()
