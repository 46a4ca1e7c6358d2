"""A decoder-only (causal) Transformer as a classifier, behind the model surface of
faithbench.api: GPT-2, Llama, Qwen2 and Mistral layouts, or any library model whose
base takes ``inputs_embeds``, ``attention_mask`` and ``position_ids``.

A Batch row holds the pieces of the input text only; the adapter puts the task's
template around them (``Template``: the tokenizer's leading special tokens, the
template's text before, between and after the input's pieces), so template tokens are
never ranked, erased or scored: they are constants of the model, like BERT's [CLS].
The class scores are read at the last position of the sequence, either as the
next-token logits of one label word per class (``prompt``: the usual LLM setting) or by
a linear head on the last position's hidden state (``head``: the library's
``...ForSequenceClassification`` of decoder layouts); a generation row reads the whole
vocabulary there (``next``: the next token's logits, ``generation_template``). Sequences are left-padded with
position ids counted from each row's first real token, so the scored position is the
last one of every row (``query = -1``: the attention row an attention explainer reads)
and a padded row computes what the unpadded sequence computes.

A decoder's vocabulary seldom has a [MASK]: the ``mask`` eraser substitutes [MASK]
where the tokenizer has one (MiniLM's, which the decoder trained here uses), else the
unknown-word token, else a filler word (``FILLER``);
``pad`` substitutes the padding token, whose embedding the model never saw in place
of a word; ``delete`` removes the pieces (the eraser cards in
``faithbench.benchmark.core.erasers`` say the same).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import torch
from torch import nn

from faithbench.benchmark.core import lrp
from faithbench.benchmark.core.api import (
    ATTENTION,
    EMBEDDINGS,
    GRADIENTS,
    LAYER_ATTENTION,
    LRP,
    VALUE_ZEROING,
    Batch,
    token_attention,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.models.transformer import (
    LibraryAdapter,
    retokenized,
    value_zeroing,
)

FILLER = "_"  # the mask eraser's word for a tokenizer with neither [MASK] nor unk
PROMPT, HEAD, NEXT = "prompt", "head", "next"
# the layouts whose layers AttnLRP is written for here (RMSNorm, rotary positions,
# q/k/v/o projections, gated MLP); GPT-2's LayerNorm, learned positions and fused
# projections are another forward pass, not offered
LRP_LAYOUTS = ("llama", "qwen2", "mistral")


class Template(NamedTuple):
    """Token ids around an input's pieces: before the first sentence, between the two
    of a pair, and after the last (the scored position is the last suffix token)."""

    prefix: list[int]
    middle: list[int]
    suffix: list[int]


def parse_template(text: str, pair: bool) -> tuple[str, str, str]:
    """The literal parts of a template: ``{text}`` marks the input of a single-sentence
    task, ``{a}`` and ``{b}`` the two sentences of a pair, each exactly once, in order.

    >>> parse_template("Review: {text}\\nSentiment:", False)
    ('Review: ', '', '\\nSentiment:')
    >>> parse_template("{a} Question: {b} Answer:", True)
    ('', ' Question: ', ' Answer:')
    """
    slots = ("{a}", "{b}") if pair else ("{text}",)
    for slot in slots:
        if text.count(slot) != 1:
            raise InputError(f"--template {text!r}: a {'pair' if pair else 'single-sentence'} "
                             f"task's template has {' and '.join(slots)} exactly once each")
    if pair:
        before, rest = text.split("{a}")
        if "{b}" not in rest:
            raise InputError(f"--template {text!r}: {{a}} comes before {{b}}")
        middle, after = rest.split("{b}")
        return before, middle, after
    before, after = text.split("{text}")
    return before, "", after


def template_ids(tokenizer, text: str, pair: bool) -> Template:
    """``text``'s parts as token ids; the prefix starts with the tokenizer's own leading
    special tokens (Llama's <s>, BERT's [CLS]; GPT-2 has none). The suffix must not be
    empty: the last template token is where the model answers."""
    before, middle, after = parse_template(text, pair)
    if not after.strip():
        raise InputError(f"--template {text!r}: end it with text after the input (e.g. "
                         "'Answer:'): the class is read at its last token")
    lead = leading_special_ids(tokenizer)

    def ids(part: str) -> list[int]:
        return tokenizer(part, add_special_tokens=False)["input_ids"] if part else []

    return Template(lead + ids(before), ids(middle), ids(after))


def leading_special_ids(tokenizer) -> list[int]:
    """The special tokens the tokenizer puts before a text (Llama's <s>, BERT's [CLS];
    none for GPT-2)."""
    lead = tokenizer("a")["input_ids"]
    return lead[: lead.index(tokenizer("a", add_special_tokens=False)["input_ids"][0])]


def generation_template(tokenizer) -> Template:
    """The template of a generation row: the tokenizer's leading special tokens (else
    its BOS, else its end-of-text token, as GPT-2 starts a text) and nothing after, so
    the scored position is the row's last token and erasing every token leaves the
    start token to predict from."""
    lead = leading_special_ids(tokenizer)
    if not lead:
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None \
            else tokenizer.eos_token_id
        if start is None:
            raise InputError("the tokenizer has no BOS or end-of-text token to start a text with")
        lead = [int(start)]
    return Template(lead, [], [])


def label_word_ids(tokenizer, words: tuple[str, ...]) -> list[int]:
    """The id of each label word's first token as the model would continue the template
    (with a leading space for byte-level tokenizers); the first tokens must differ."""
    ids = []
    for word in words:
        pieces = tokenizer(" " + word, add_special_tokens=False)["input_ids"]
        if not pieces:
            raise InputError(f"label word {word!r}: the tokenizer gives it no tokens")
        ids.append(pieces[0])
    if len(set(ids)) < len(ids):
        raise InputError(f"label words {', '.join(words)}: their first tokens "
                         f"({', '.join(tokenizer.convert_ids_to_tokens(ids))}) are not all "
                         "different; choose words that start differently (--label-words)")
    return ids


class DecoderClassifier(LibraryAdapter):
    """``hf``: a causal LM (``prompt``: class c's score is the next-token logit of
    ``label_ids[c]`` at the last position; ``next``: every token's, for generation rows)
    or a decoder ``...ForSequenceClassification`` (``head``: its ``score`` layer on the
    last position; ``label_order`` as for the encoder adapter). Loaded with eager
    attention so every layer's attention is read."""

    label_order: torch.Tensor  # a buffer
    query = -1  # the scored position: attention explainers read this row

    def __init__(self, hf: Any, tokenizer, template: Template,
                 label_ids: list[int] | None = None, label_order: list[int] | None = None,
                 next_token: bool = False):
        super().__init__()
        self.hf: Any = hf
        self.tokenizer = tokenizer
        self.template = template
        self.mode = NEXT if next_token else PROMPT if label_ids is not None else HEAD
        if self.mode == HEAD and getattr(hf, "score", None) is None:
            raise InputError(f"{type(hf).__name__} has no classification head (score); "
                             "a causal LM classifies by its label words (prompt)")
        self.label_ids = label_ids
        self.pad_id = _pad_id(tokenizer)
        self.mask_id = _filler_id(tokenizer)
        self.baseline_id = self.pad_id
        self.lrp_ready = getattr(hf.config, "model_type", None) in LRP_LAYOUTS
        self.capabilities = frozenset({GRADIENTS, EMBEDDINGS, ATTENTION, LAYER_ATTENTION,
                                       *([LRP, VALUE_ZEROING] if self.lrp_ready else [])})
        self.max_rows_per_pass = 32
        order = [] if next_token else list(range(
            len(label_ids) if label_ids is not None else hf.config.num_labels)) \
            if label_order is None else list(label_order)
        self.register_buffer("label_order", torch.tensor(order, dtype=torch.long),
                             persistent=False)

    def __reduce__(self):
        """Pickled as its parts (see the encoder adapter's ``__reduce__``)."""
        weights = {k: v.detach().clone() for k, v in self.hf.state_dict().items()}
        return _rebuild, (type(self.hf), self.hf.config, weights, self.tokenizer,
                          self.template, self.label_ids, self.label_order.tolist(),
                          self.mode == NEXT, self.training)

    def attention_maps(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, H, S, S) attention of every layer and head over the full left-padded
        sequence (template tokens included; causal, so row i covers columns ≤ i), and
        (B, T) each batch position's place in it (-1 at padding). The scored position
        is the last (``query``)."""
        _, maps, index = self._run(self.embed(batch), batch, attentions=True)
        return maps, index

    def attention(self, batch: Batch) -> torch.Tensor:
        """The last layer's attention of the scored position over the pieces, heads
        averaged (``token_attention`` with ``query=-1``)."""
        maps, index = self.attention_maps(batch)
        return token_attention(maps, index, batch.mask, query=self.query)

    def lrp_logits(self, embeds: torch.Tensor, batch: Batch, eps: float = lrp.EPS
                   ) -> torch.Tensor:
        """The logits (eval mode), the decoder's forward pass rebuilt from LRP operations
        with AttnLRP's rules (``faithbench.benchmark.core.lrp``): relevance reaches the
        word embeddings of every position, the pieces' being ``embeds``."""
        full, real, positions, _, _ = self._wrap(embeds, batch)
        hidden = self.lrp_hidden(full, real, positions, eps)
        return self.head_logits(hidden[:, -1], eps)

    def lrp_hidden(self, full: torch.Tensor, real: torch.Tensor, positions: torch.Tensor,
                   eps: float = lrp.EPS) -> torch.Tensor:
        """(B, S, D) the last layer's normalized states of the full sequence ``full``
        (B, S, D), from LRP operations (``lrp_states``)."""
        if not self.lrp_ready:
            raise ValueError(f"AttnLRP follows Llama-layout layers ({', '.join(LRP_LAYOUTS)}); "
                             f"this is a {getattr(self.hf.config, 'model_type', '?')} model")
        return lrp_states(self.hf.base_model, full, real, positions, eps)

    @torch.no_grad()
    def value_zeroing_maps(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Value zeroing (Mohebbi et al. 2023) of a Llama-layout decoder: (B, L, S, S)
        float64 maps over the full left-padded sequence (``decoder_value_zeroing``) and
        the (B, T) index; the scored position is the last row."""
        full, real, positions, index, _ = self._wrap(self.embed(batch), batch)
        maps = decoder_value_zeroing(self.hf.base_model, full, real, positions,
                                     self.max_rows_per_pass)
        return maps, torch.where(batch.mask, index, -1)

    def head_logits(self, hidden: torch.Tensor, eps: float | None = None) -> torch.Tensor:
        """(B, C) class scores from (B, D) last-position hidden states, task order
        (with ``eps``: by the LRP ε-rule); ``next``: (B, vocabulary) next-token logits."""
        out = self.hf.get_output_embeddings()
        bias = getattr(out, "bias", None)
        if self.mode == NEXT:
            weight = out.weight
        elif self.mode == PROMPT:
            rows = torch.as_tensor(self.label_ids, device=hidden.device)
            weight = out.weight.index_select(0, rows)
            bias = None if bias is None else bias.index_select(0, rows)
        else:
            weight, bias = self.hf.score.weight, self.hf.score.bias
        if eps is not None:
            logits = lrp.linear_weights(hidden, weight, bias, eps)
        else:
            logits = hidden @ weight.T + (0 if bias is None else bias)
        return logits if self.mode == NEXT else logits.index_select(1, self.label_order)

    def language_model_loss(self, batch: Batch) -> torch.Tensor:
        """Mean next-token cross-entropy over a batch of texts (template and all), for
        language-model pre-training on the task's own text (``prompt`` models only): every
        real position predicts the next one, so a padded row's loss is the unpadded
        text's, and the output layer (the vocabulary, the costly part) runs only there."""
        full, real, positions, _, ids = self._wrap(self.embed(batch), batch)
        hidden = run_decoder(self.hf.base_model, full, real, positions).last_hidden_state
        predicts = real[:, :-1] & real[:, 1:]  # a real position whose next one is real
        logits = self.hf.get_output_embeddings()(hidden[:, :-1][predicts])
        return nn.functional.cross_entropy(logits, ids[:, 1:][predicts])

    def _run(self, embeds: torch.Tensor, batch: Batch, attentions: bool = False):
        full, real, positions, index, _ = self._wrap(embeds, batch)
        out = run_decoder(self.hf.base_model, full, real, positions, attentions)
        logits = self.head_logits(out.last_hidden_state[:, -1])
        if not attentions:
            return logits, None, None
        return logits, torch.stack(out.attentions, dim=1), torch.where(batch.mask, index, -1)

    def _wrap(self, embeds: torch.Tensor, batch: Batch):
        """The template around the pieces, left-padded: (B, S, D) embeddings, (B, S)
        bool real positions and position ids, (B, T) where each batch position went, and the
        (B, S) token ids (the pieces' own where ``embeds`` are not their embeddings)."""
        tpl, mask = self.template, batch.mask
        b = embeds.shape[0]
        pair = batch.segments is not None
        seg: torch.Tensor = batch.segments if batch.segments is not None \
            else torch.zeros_like(batch.ids)
        n0, n1 = (mask & (seg == 0)).sum(1), (mask & (seg == 1)).sum(1)
        mid = len(tpl.middle) if pair else 0
        length = len(tpl.prefix) + n0 + mid + n1 + len(tpl.suffix)
        width = int(length.max()) if b else 0
        start = width - length  # each row's first real position
        second = seg.eq(1).long()
        rank = mask.long().cumsum(1) - 1 - second * n0.unsqueeze(1)
        place = start.unsqueeze(1) + len(tpl.prefix) + rank + second * (n0 + mid).unsqueeze(1)
        index = torch.where(mask, place, width)
        ids = torch.full((b, width + 1), self.pad_id, dtype=torch.long, device=embeds.device)
        rows = torch.arange(b, device=embeds.device)

        def put(tokens: list[int], at: torch.Tensor) -> None:
            for j, token in enumerate(tokens):
                ids[rows, at + j] = token

        put(tpl.prefix, start)
        if pair:
            put(tpl.middle, start + len(tpl.prefix) + n0)
        put(tpl.suffix, torch.full_like(start, width - len(tpl.suffix)))
        ids = ids.scatter(1, index, torch.where(mask, batch.ids, self.pad_id))
        full = self.word_embeddings(ids).scatter(
            1, index.unsqueeze(-1).expand_as(embeds), embeds)[:, :width]
        real = torch.arange(width, device=embeds.device) >= start.unsqueeze(1)
        positions = (torch.arange(width, device=embeds.device) - start.unsqueeze(1)).clamp(min=0)
        return full, real, positions, index, ids[:, :width]

    def retokenize(self, batch: Batch) -> Batch:
        """As the encoder adapter's ``retokenize`` (the text's pieces decoded and
        tokenized again, per segment)."""
        return retokenized(self.tokenizer, self.pad_id, batch)


def lrp_states(base: Any, full: torch.Tensor, real: torch.Tensor, positions: torch.Tensor,
               eps: float = lrp.EPS) -> torch.Tensor:
    """(B, S, D) the final normalized states of a Llama-layout library decoder ``base``
    on embeddings ``full`` (B, S, D) (``real`` (B, S) bool, left-padded; ``positions``
    (B, S)), its layers rebuilt one by one from LRP operations with AttnLRP's rules."""
    config = base.config
    heads, groups = config.num_attention_heads, config.num_key_value_heads
    cos, sin = base.rotary_emb(full, positions)
    keep = causal_mask(real, full.dtype) == 0  # (B, 1, S, S)
    b, width, _ = full.shape

    def split(t: torch.Tensor, n: int) -> torch.Tensor:
        return t.view(b, width, n, -1).transpose(1, 2)  # (B, n, S, d)

    x = full
    for layer in base.layers:
        attn, mlp = layer.self_attn, layer.mlp
        h = lrp.passthrough(layer.input_layernorm, x)
        q = rotary(split(lrp.linear(h, attn.q_proj, eps), heads), cos, sin, eps)
        k = rotary(split(lrp.linear(h, attn.k_proj, eps), groups), cos, sin, eps)
        v = split(lrp.linear(h, attn.v_proj, eps), groups)
        k, v = (t.repeat_interleave(heads // groups, dim=1) for t in (k, v))
        scale = partial(torch.mul, other=float(attn.scaling))
        scores = lrp.passthrough(scale, lrp.bilinear(q, k.transpose(-1, -2), eps))
        context = lrp.bilinear(lrp.softmax(scores, keep), v, eps)
        context = context.transpose(1, 2).reshape(b, width, -1)
        x = lrp.add(x, lrp.linear(context, attn.o_proj, eps), eps=eps)
        h = lrp.passthrough(layer.post_attention_layernorm, x)
        gated = lrp.product_half(lrp.passthrough(mlp.act_fn, lrp.linear(h, mlp.gate_proj, eps)),
                                 lrp.linear(h, mlp.up_proj, eps))
        x = lrp.add(x, lrp.linear(gated, mlp.down_proj, eps), eps=eps)
    return lrp.passthrough(base.norm, x)


def decoder_value_zeroing(base: Any, full: torch.Tensor, real: torch.Tensor,
                          positions: torch.Tensor, max_rows: int) -> torch.Tensor:
    """(B, L, S, S) value-zeroing maps of a Llama-layout library decoder ``base`` on
    left-padded ``full`` (B, S, D): each layer's ``v_proj`` output zeroed at one position
    at a time (``transformer.value_zeroing``), a chunk of rows at its own width (its
    last columns). Causal: zeroing j changes only positions from j on."""
    b, width = real.shape
    maps = torch.zeros(b, len(base.layers), width, width, dtype=torch.float64,
                       device=full.device)
    per_pass = max(1, max_rows // max(width, 1))
    for start in range(0, b, per_pass):
        rows = slice(start, start + per_pass)
        w = int(real[rows].sum(1).max())
        part = full[rows, -w:], real[rows, -w:], positions[rows, -w:]

        def run(r: int, part=part) -> Any:
            return run_decoder(base, *(t.repeat_interleave(r, dim=0) for t in part))

        maps[rows, :, -w:, -w:] = value_zeroing(base.layers, lambda layer: layer.self_attn.v_proj,
                                                run, part[1])
    return maps


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, eps: float) -> torch.Tensor:
    """Rotary position embedding of (B, n, S, d) ``x`` as LRP operations:
    x·cos + rotate_half(x)·sin, rotate_half(x) = (−x₂, x₁) written as the copy (x₂, x₁)
    times a signed sine, so relevance reaches each source dimension with its sign; the
    ε-rule over the two terms."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    half = x.shape[-1] // 2
    swapped = torch.cat((x[..., half:], x[..., :half]), dim=-1)
    signed = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)
    return lrp.add(lrp.passthrough(lambda t: t * cos, x),
                   lrp.passthrough(lambda t: t * signed, swapped), eps=eps)


def run_decoder(base: Any, full: torch.Tensor, real: torch.Tensor, positions: torch.Tensor,
                attentions: bool = False) -> Any:
    """The library decoder ``base`` on left-padded embeddings ``full`` (B, S, D), with
    ``causal_mask`` and position ids counted from each row's first real token."""
    return base(inputs_embeds=full, attention_mask=causal_mask(real, full.dtype),
                position_ids=positions, output_attentions=attentions)


def causal_mask(real: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, 1, S, S) additive attention mask: a real position attends to the real
    positions up to itself, a padding position to itself only. The library's own mask
    from a (B, S) padding mask leaves a padding row with nothing to attend to, which in
    float64 softmaxes to NaN and reaches the real rows through 0 · NaN."""
    width = real.shape[1]
    eye = torch.eye(width, dtype=torch.bool, device=real.device)
    allowed = (torch.tril(torch.ones_like(eye)) & real.unsqueeze(1)) | eye
    blocked = torch.zeros(allowed.shape, dtype=dtype, device=real.device)
    return blocked.masked_fill(~allowed, torch.finfo(dtype).min).unsqueeze(1)


def _pad_id(tokenizer) -> int:
    """The padding id: the tokenizer's, else its end-of-text token (GPT-2 has no pad)."""
    for token_id in (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id):
        if token_id is not None:
            return int(token_id)
    raise InputError("the tokenizer has no pad, end-of-text or unknown token to pad with")


def _filler_id(tokenizer) -> int:
    """What the ``mask`` eraser puts in a piece's place: [MASK], else the unknown-word
    token, else the first token of a filler word."""
    for token_id in (tokenizer.mask_token_id, tokenizer.unk_token_id):
        if token_id is not None:
            return int(token_id)
    return int(tokenizer(" " + FILLER, add_special_tokens=False)["input_ids"][0])


def _rebuild(kind, config, weights, tokenizer, template, label_ids, label_order, next_token,
             training) -> DecoderClassifier:
    hf = kind(config)
    hf.load_state_dict(weights)
    return DecoderClassifier(hf, tokenizer, Template(*template), label_ids,
                             None if next_token else label_order, next_token).train(training)
