"""Layer-wise relevance propagation (LRP) as a backward pass.

Each operation below computes the ordinary forward value, and its backward receives the
*relevance* of its output (not a gradient) and returns the relevance of its inputs by an
LRP rule. A model's ``lrp_logits`` rebuilds its forward pass from these operations (and
from ops whose Jacobian only copies, selects or scatters: cat, gather, indexing, a 0/1
mask), so ``torch.autograd.grad(logits, embeds, grad_outputs=R)`` returns the relevance
of every embedding dimension for the output relevance ``R``.

The rules are those of Arras, Montavon, Müller & Samek (2017), "Explaining recurrent
neural network predictions in sentiment analysis", with the defaults of their reference
code (``lrp_linear``: eps = 0.001, bias_factor = 0):

- ``linear``: the ε-rule. For z_j = Σ_i x_i w_ij + b_j,
  R_i = Σ_j x_i w_ij / (z_j + ε·sign(z_j)) · R_j, with sign(0) = +1. The bias and ε
  absorb the rest (bias_factor = 0: relevance is not conserved where biases are).
- ``add``: the ε-rule on a sum of terms (e.g. an LSTM cell c = f⊙c' + i⊙g, or an
  attention context Σ_t α_t h_t): each term gets its share of the sum.
- ``gate``: gate ⊙ signal, where the gate is a sigmoid gate or an attention weight:
  all relevance goes to the signal ("signal-take-all"); gates receive none.
- ``passthrough``: element-wise activations (tanh, |x|): relevance passes unchanged.
- GRUs (the alignment seq2seq): the same rules, the reset and update gates constant
  (``gru_step``).
- ``product_half``: the product of two signals (the NLI feature p⊙h): half each
  (Arras et al. 2019, "Explaining and interpreting LSTMs", the "half" rule).

For decoders (Llama-layout: RMSNorm, rotary positions, gated MLP), AttnLRP (Achtibat
et al. 2024, "AttnLRP: attention-aware layer-wise relevance propagation for
Transformers"), which, unlike the conservative propagation below, lets relevance
flow through the attention weights too:

- ``softmax``: the Taylor decomposition at the input (their Prop. 3.1),
  R_in_i = x_i (R_i − s_i Σ_j R_j), masked entries 0; not conservative: the difference
  Σ R − Σ R_in = (Σ_i s_i x_i) Σ_j R_j is what the rule leaves to the bias.
- ``bilinear``: a product of two signals (q·kᵀ, attention · values), the ε-rule on each
  product term and the uniform rule within it (their Prop. 3.2): half to each factor.
- RMSNorm holds its 1/rms constant, and element-wise activations (SiLU) pass relevance
  on (the identity rule, ``passthrough``); the gate ⊙ up product of a gated MLP takes
  ``product_half``; rotary embeddings are linear in q and k (constants cos, sin): the
  ε-rule over their two terms.

For Transformers, conservative propagation (Ali et al. 2022, "XAI for Transformers:
better explanations through conservative propagation"): ``layer_norm`` holds the
normalizing scale 1/σ constant (the rest is linear) and ``mix`` holds the attention
probabilities constant (the context is linear in the values); GELU and the pooler's
tanh pass relevance on; every linear map, residual sum and embedding sum takes the
ε-rule.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

EPS = 0.001  # Arras et al.'s reference code


def stabilized(z: torch.Tensor, eps: float) -> torch.Tensor:
    """z + ε·sign(z), with sign(0) = +1: never closer to 0 than ε."""
    return z + eps * torch.where(z >= 0, 1.0, -1.0).to(z.dtype)


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        z = x @ weight.T
        if bias is not None:
            z = z + bias
        ctx.save_for_backward(x, weight, z)
        ctx.eps = eps
        return z

    @staticmethod
    def backward(ctx, relevance):
        x, weight, z = ctx.saved_tensors
        share = relevance / stabilized(z, ctx.eps)
        return x * (share @ weight), None, None, None


class _Add(torch.autograd.Function):
    @staticmethod
    def forward(ctx, eps, dim, *terms):
        total = torch.stack(terms).sum(0) if dim is None else terms[0].sum(dim)
        ctx.save_for_backward(total, *terms)
        ctx.eps, ctx.dim = eps, dim
        return total

    @staticmethod
    def backward(ctx, relevance):
        total, *terms = ctx.saved_tensors
        share = relevance / stabilized(total, ctx.eps)
        if ctx.dim is not None:
            share = share.unsqueeze(ctx.dim)
        return (None, None, *(t * share for t in terms))


class _Gate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate, signal):
        return gate * signal

    @staticmethod
    def backward(ctx, relevance):
        return None, relevance


class _Passthrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fn, x):
        return fn(x)

    @staticmethod
    def backward(ctx, relevance):
        return None, relevance


class _LayerNorm(torch.autograd.Function):
    """y = γ (x − mean(x)) / σ + β with σ held constant (Ali et al. 2022): a linear map
    of x, J = diag(γ/σ)(I − 11ᵀ/n), whose ε-rule needs no (n × n) matrix."""

    @staticmethod
    def forward(ctx, x, weight, bias, ln_eps, eps):
        centered = x - x.mean(-1, keepdim=True)
        scale = weight / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + ln_eps)
        y = centered * scale + bias
        ctx.save_for_backward(x, scale, y)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, relevance):
        x, scale, y = ctx.saved_tensors
        share = relevance / stabilized(y, ctx.eps) * scale  # diag(γ/σ) s
        return x * (share - share.mean(-1, keepdim=True)), None, None, None, None


class _Mix(torch.autograd.Function):
    """probs @ values with the probabilities constant: out_id = Σ_j p_ij v_jd, a sum over
    j per (i, d) whose terms get their ε-rule share."""

    @staticmethod
    def forward(ctx, probs, values, eps):
        out = probs @ values
        ctx.save_for_backward(probs, values, out)
        ctx.eps = eps
        return out

    @staticmethod
    def backward(ctx, relevance):
        probs, values, out = ctx.saved_tensors
        share = relevance / stabilized(out, ctx.eps)
        return None, values * (probs.transpose(-1, -2) @ share), None


class _GRUCandidate(torch.autograd.Function):
    """A GRU's candidate pre-activation W_in x + b_in + r ⊙ (W_hn h + b_hn), the reset
    gate r constant: one ε-rule over the whole sum, so x and h share its denominator
    (as the LSTM's g does in Arras et al.'s code)."""

    @staticmethod
    def forward(ctx, x, h, w_in, b_in, w_hn, b_hn, reset, eps):
        z = x @ w_in.T + b_in + reset * (h @ w_hn.T + b_hn)
        ctx.save_for_backward(x, h, w_in, w_hn, reset, z)
        ctx.eps = eps
        return z

    @staticmethod
    def backward(ctx, relevance):
        x, h, w_in, w_hn, reset, z = ctx.saved_tensors
        share = relevance / stabilized(z, ctx.eps)
        return (x * (share @ w_in), h * ((reset * share) @ w_hn), None, None, None, None,
                None, None)


class _ProductHalf(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, relevance):
        return relevance / 2, relevance / 2


class _Softmax(torch.autograd.Function):
    """softmax over the last axis of ``x`` where ``keep`` (0 elsewhere); AttnLRP's rule."""

    @staticmethod
    def forward(ctx, x, keep):
        s = torch.softmax(x.masked_fill(~keep, float("-inf")), dim=-1)
        s = torch.nan_to_num(s)  # a row with nothing kept
        ctx.save_for_backward(x, s, keep)
        return s

    @staticmethod
    def backward(ctx, relevance):
        x, s, keep = ctx.saved_tensors
        out = x * (relevance - s * relevance.sum(-1, keepdim=True))
        return torch.where(keep, out, torch.zeros_like(out)), None


class _Bilinear(torch.autograd.Function):
    """a @ b; each product term a_nk b_km gets its ε-rule share of out_nm's relevance,
    half to a_nk and half to b_km."""

    @staticmethod
    def forward(ctx, a, b, eps):
        out = a @ b
        ctx.save_for_backward(a, b, out)
        ctx.eps = eps
        return out

    @staticmethod
    def backward(ctx, relevance):
        a, b, out = ctx.saved_tensors
        share = relevance / stabilized(out, ctx.eps)
        return (a * (share @ b.transpose(-1, -2)) / 2, b * (a.transpose(-1, -2) @ share) / 2,
                None)


def softmax(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """softmax(x) over the last axis, the entries where ``keep`` is False left out (0);
    relevance by AttnLRP's softmax rule."""
    return _Softmax.apply(x, keep)


def bilinear(a: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """a @ b of two signals; relevance by the ε-rule on each product, half to each factor."""
    return _Bilinear.apply(a, b, eps)


def linear(x: torch.Tensor, layer: nn.Linear, eps: float = EPS) -> torch.Tensor:
    """``layer(x)``; relevance by the ε-rule."""
    return _Linear.apply(x, layer.weight, layer.bias, eps)


def linear_weights(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                   eps: float = EPS) -> torch.Tensor:
    """x @ weight.T + bias; relevance by the ε-rule."""
    return _Linear.apply(x, weight, bias, eps)


def add(*terms: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """The sum of ``terms``; each gets its share of the relevance (ε-rule)."""
    return _Add.apply(eps, None, *terms)


def add_over(terms: torch.Tensor, dim: int, eps: float = EPS) -> torch.Tensor:
    """``terms.sum(dim)``; each slice along ``dim`` gets its share (ε-rule)."""
    return _Add.apply(eps, dim, terms)


def difference(a: torch.Tensor, b: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """a - b as the sum of a and (-b): ε-rule shares, each term's to its signal."""
    return _Add.apply(eps, None, a, _Gate.apply(-1.0, b))


def gate(g: torch.Tensor, signal: torch.Tensor) -> torch.Tensor:
    """g ⊙ signal; all relevance to the signal (the gate is held constant)."""
    return _Gate.apply(g.detach(), signal)


def layer_norm(x: torch.Tensor, ln: nn.LayerNorm, eps: float = EPS) -> torch.Tensor:
    """``ln(x)``; its scale 1/σ held constant, relevance by the ε-rule on the rest."""
    return _LayerNorm.apply(x, ln.weight, ln.bias, ln.eps, eps)


def mix(probs: torch.Tensor, values: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """probs @ values; attention probabilities held constant (ε-rule on the values)."""
    return _Mix.apply(probs.detach(), values, eps)


def passthrough(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """fn(x) element-wise; relevance passes unchanged."""
    return _Passthrough.apply(fn, x)


def product_half(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a ⊙ b of two signals; half the relevance to each."""
    return _ProductHalf.apply(a, b)


def lstm_direction(rnn: nn.LSTM, embeds: torch.Tensor, mask: torch.Tensor, *, reverse: bool,
                   eps: float = EPS) -> torch.Tensor:
    """(B, T, H) hidden states of one direction of a one-layer ``rnn`` over the real
    tokens of each row (``mask``: left-aligned), zero at padding, as
    ``nn.LSTM`` on packed sequences computes them; relevance flows through the cell
    candidate g = tanh(W [x; h'] + b) and the cell sum c = f⊙c' + i⊙g, never through
    the gates i, f, o."""
    suffix = "_reverse" if reverse else ""
    w_ih = getattr(rnn, f"weight_ih_l0{suffix}")
    w_hh = getattr(rnn, f"weight_hh_l0{suffix}")
    bias = getattr(rnn, f"bias_ih_l0{suffix}") + getattr(rnn, f"bias_hh_l0{suffix}")
    hidden = w_hh.shape[1]
    rows, steps, _ = embeds.shape
    h = embeds.new_zeros(rows, hidden)
    c = embeds.new_zeros(rows, hidden)
    weight_g = torch.cat([w_ih[2 * hidden : 3 * hidden], w_hh[2 * hidden : 3 * hidden]], dim=1)
    bias_g = bias[2 * hidden : 3 * hidden]
    out: list[torch.Tensor | None] = [None] * steps
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for t in order:
        x = embeds[:, t]
        with torch.no_grad():  # gates: constants for relevance
            pre = x @ w_ih.T + h @ w_hh.T + bias
            i = torch.sigmoid(pre[:, :hidden])
            f = torch.sigmoid(pre[:, hidden : 2 * hidden])
            o = torch.sigmoid(pre[:, 3 * hidden :])
        g = passthrough(torch.tanh, linear_weights(torch.cat([x, h], dim=1), weight_g, bias_g,
                                                   eps))
        c_new = add(gate(f, c), gate(i, g), eps=eps)
        h_new = gate(o, passthrough(torch.tanh, c_new))
        real = mask[:, t].unsqueeze(1)
        # a padded step keeps the state (the forward direction has finished; the reverse
        # one has not started: its state is still zero)
        h = torch.where(real, h_new, h)
        c = torch.where(real, c_new, c)
        out[t] = h * real.to(h.dtype)
    return torch.stack(out, dim=1)  # type: ignore[arg-type]


def gru_step(x: torch.Tensor, h: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor,
             b_ih: torch.Tensor, b_hh: torch.Tensor, eps: float = EPS) -> torch.Tensor:
    """One GRU step (PyTorch's gate order r, z, n): h' = (1 − z) ⊙ n + z ⊙ h with
    n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)); the gates r and z constant, the
    ε-rule on the sum h' and on n's pre-activation."""
    hidden = h.shape[1]
    with torch.no_grad():  # gates: constants for relevance
        gi, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
        r = torch.sigmoid(gi[:, :hidden] + gh[:, :hidden])
        z = torch.sigmoid(gi[:, hidden : 2 * hidden] + gh[:, hidden : 2 * hidden])
    pre = _GRUCandidate.apply(x, h, w_ih[2 * hidden :], b_ih[2 * hidden :], w_hh[2 * hidden :],
                              b_hh[2 * hidden :], r, eps)
    return add(gate(1 - z, passthrough(torch.tanh, pre)), gate(z, h), eps=eps)


def gru_direction(rnn: nn.GRU, embeds: torch.Tensor, mask: torch.Tensor, *, reverse: bool,
                  eps: float = EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T, H) states of one direction of a one-layer ``rnn`` over each row's real
    tokens (zero at padding) and (B, H) its final state, as ``nn.GRU`` on packed
    sequences gives them."""
    suffix = "_reverse" if reverse else ""
    w_ih, w_hh, b_ih, b_hh = (getattr(rnn, f"{name}_l0{suffix}")
                              for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    rows, steps, _ = embeds.shape
    h = embeds.new_zeros(rows, w_hh.shape[1])
    out: list[torch.Tensor | None] = [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        real = mask[:, t].unsqueeze(1)
        h = torch.where(real, gru_step(embeds[:, t], h, w_ih, w_hh, b_ih, b_hh, eps), h)
        out[t] = h * real.to(h.dtype)
    return torch.stack(out, dim=1), h  # type: ignore[arg-type]


def bilstm(rnn: nn.LSTM, embeds: torch.Tensor, mask: torch.Tensor, eps: float = EPS
           ) -> torch.Tensor:
    """(B, T, 2H) states of a one-layer bidirectional ``rnn``, as ``BiLSTMEncoder``."""
    return torch.cat([lstm_direction(rnn, embeds, mask, reverse=False, eps=eps),
                      lstm_direction(rnn, embeds, mask, reverse=True, eps=eps)], dim=-1)


def attention_context(weights: torch.Tensor, states: torch.Tensor, eps: float = EPS
                      ) -> torch.Tensor:
    """Σ_t α_t h_t: the weights held constant, each step's term its share (ε-rule)."""
    return add_over(gate(weights.unsqueeze(-1), states), dim=1, eps=eps)
