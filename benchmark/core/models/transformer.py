"""A Hugging Face sequence classifier behind the model surface of faithbench.api.

A Batch row holds the model's subword ids *without* its special tokens; the adapter
adds them itself ([CLS] a [SEP], or [CLS] a [SEP] b [SEP] for a pair told apart by
``batch.segments``; the layout is read off the tokenizer, so RoBERTa's <s> a </s></s>
b </s> works too). So explainers score, and metrics rank and erase, only pieces of
the text: special tokens are never ranked or erased, and every erased variant is
wrapped like any input.

``embed`` is the word-embedding lookup of the pieces; position and segment
embeddings are added inside the model, as BERT's own embedding layer does, so a
gradient wrt ``embed`` is the usual input-embedding gradient (Captum's and ferret's).
The integrated-gradients reference is the [PAD] embedding at every piece.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from faithbench.benchmark.core import lrp
from faithbench.benchmark.core.api import (
    ATTENTION,
    ATTENTION_GRADIENT,
    ATTENTION_VECTORS,
    EMBEDDINGS,
    GRADIENTS,
    LAYER_ATTENTION,
    LRP,
    VALUE_ZEROING,
    Batch,
    token_attention,
)
from faithbench.benchmark.core.models import deception


class SpecialLayout:
    """Where a tokenizer puts its special tokens around one or two sequences: ids and
    segment types of the head (before the first), the middle (between the two) and
    the tail (after the last); the single-sequence tail may differ from the pair's."""

    def __init__(self, tokenizer):
        def encode(*words):
            enc = tokenizer(*[[w] for w in words], is_split_into_words=True)
            ids, seq = enc["input_ids"], enc.sequence_ids()
            return ids, enc.get("token_type_ids") or [0] * len(ids), seq

        ids, _, seq = encode("a")
        real = [i for i, s in enumerate(seq) if s is not None]
        self.head = ids[: real[0]]
        self.single_tail = ids[real[-1] + 1 :]
        ids, types, seq = encode("a", "b")
        a = [i for i, s in enumerate(seq) if s == 0]
        b = [i for i, s in enumerate(seq) if s == 1]
        self.mid = ids[a[-1] + 1 : b[0]]
        self.tail = ids[b[-1] + 1 :]
        self.second_type = types[b[0]]  # segment type of the second sequence (0 for RoBERTa)
        self.mid_type = types[b[0] - 1] if self.mid else 0
        self.tail_type = types[-1] if self.tail else 0


class LibraryAdapter(nn.Module):
    """The model surface's core over a Hugging Face model ``self.hf``: the pieces' word
    embeddings in, ``_run(embeds, batch)[0]`` the (B, C) logits out (the encoder and
    decoder adapters each put the special or template tokens around the pieces)."""

    hf: Any

    def _run(self, embeds: torch.Tensor, batch: Batch, attentions: bool = False) -> Any:
        raise NotImplementedError

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.hf.get_input_embeddings()

    def embed(self, batch: Batch) -> torch.Tensor:
        return self.word_embeddings(batch.ids)

    def logits_from_embeddings(self, embeds: torch.Tensor, batch: Batch) -> torch.Tensor:
        return self._run(embeds, batch)[0]

    def logits(self, batch: Batch) -> torch.Tensor:
        return self.logits_from_embeddings(self.embed(batch), batch)

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.logits(batch)


class TransformerClassifier(LibraryAdapter):
    """``hf``: an ``AutoModelForSequenceClassification`` (eager attention, so every
    layer's attention can be read); ``label_order[c]`` = the hf output index of the
    task's class c (a checkpoint whose labels are the task's in another order)."""

    label_order: torch.Tensor  # a buffer

    def __init__(self, hf: Any, tokenizer, label_order: list[int] | None = None,
                 deceive_weight: float = 0.0):
        super().__init__()
        self.hf: Any = hf  # a transformers PreTrainedModel (its config, embeddings)
        self.tokenizer = tokenizer  # decodes and re-encodes text for the retokenize eraser
        self.layout = SpecialLayout(tokenizer)
        self.pad_id = tokenizer.pad_token_id
        self.mask_id = tokenizer.mask_token_id if tokenizer.mask_token_id is not None \
            else tokenizer.unk_token_id
        self.baseline_id = self.pad_id
        # LRP follows BERT's layers one by one (embeddings, self-attention, feed-forward,
        # pooler): other architectures do not offer it, and asking for it says so
        self.lrp_ready = (getattr(hf.config, "model_type", None) == "bert"
                          and getattr(hf.config, "position_embedding_type", "absolute")
                          == "absolute" and hasattr(hf, "bert") and hf.bert.pooler is not None)
        # the attention forms (attention_vectors, logits_from_attention, value_zeroing_maps)
        # read each layer's value map and output map: BERT-layout encoders (BERT, MiniLM,
        # RoBERTa, ELECTRA) have them where these methods look
        self.bert_layout = bert_layers(hf) is not None
        self.capabilities = frozenset({GRADIENTS, EMBEDDINGS, ATTENTION, LAYER_ATTENTION,
                                       *([LRP] if self.lrp_ready else []),
                                       *([ATTENTION_VECTORS, ATTENTION_GRADIENT, VALUE_ZEROING]
                                         if self.bert_layout else [])})
        # on CPU a pass of 8-32 rows runs ~2x more rows/s than one of 256 (measured on
        # MiniLM, SST-2 lengths): the perturbation engine and IG cap their passes at this
        self.max_rows_per_pass = 32
        self.deceive_weight = deceive_weight  # λ of deceptive training (Pruthi et al.)
        self.uses_types = getattr(hf.config, "type_vocab_size", 0) > 1
        order = list(range(hf.config.num_labels)) if label_order is None else list(label_order)
        self.register_buffer("label_order", torch.tensor(order, dtype=torch.long),
                             persistent=False)

    def __reduce__(self):
        """Pickled as its parts (the library model's config and weights, the tokenizer,
        the label order) and rebuilt: the library installs hooks on first use that are
        local functions, so the module itself cannot be pickled (a plugin worker gets the
        model this way)."""
        weights = {k: v.detach().clone() for k, v in self.hf.state_dict().items()}
        return _rebuild, (self.hf.config, weights, self.tokenizer, self.label_order.tolist(),
                          self.training)

    def layer_groups(self) -> list[tuple[str, list[nn.Module]]]:
        """Layer groups, output first, as parameter randomization re-initializes them
        (``faithbench.benchmark.core.randomize``): ``out``, the classification head
        (every child of the library model beside its base), ``pooler`` where there is
        one, the encoder layers from the last (``layer_{L-1}``) to the first (``layer_0``),
        ``embedding`` (word, position and type embeddings and their LayerNorm)."""
        base = self.hf.base_model
        encoder = getattr(base, "encoder", None)
        encoder = getattr(base, "transformer", None) if encoder is None else encoder
        layers = getattr(encoder, "layer", None)
        if layers is None or getattr(base, "embeddings", None) is None:
            raise ValueError(f"{type(self.hf).__name__}: no encoder layers or embeddings "
                             "found to randomize (BERT, RoBERTa and DistilBERT layouts are)")
        head = [m for m in self.hf.children()
                if m is not base and next(m.parameters(), None) is not None]
        pooler = getattr(base, "pooler", None)
        return ([("out", head)] + ([("pooler", [pooler])] if pooler is not None else [])
                + [(f"layer_{i}", [layers[i]]) for i in reversed(range(len(layers)))]
                + [("embedding", [base.embeddings])])

    @torch.no_grad()
    def init_module(self, module: nn.Module) -> bool:
        """BERT's initializer (the library's ``_init_weights``) on one module's own
        parameters: linear and embedding weights N(0, ``initializer_range``), biases 0,
        a padding row 0, LayerNorm 1 and 0; False for a module it does not initialize.
        Written out with torch's functions: the library's skip tensors it marks as loaded
        from a checkpoint."""
        std = getattr(self.hf.config, "initializer_range", 0.02)
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, std)
            if module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            if module.weight is not None:
                nn.init.ones_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        else:
            return False
        return True

    def lrp_logits(self, embeds: torch.Tensor, batch: Batch, eps: float = lrp.EPS
                   ) -> torch.Tensor:
        """The logits (eval mode), BERT's forward pass rebuilt from LRP operations
        (conservative propagation, ``faithbench.benchmark.core.lrp``): relevance reaches
        the word, position and type embeddings of every position; the batch's tokens'
        word embeddings are ``embeds``."""
        if not self.lrp_ready:
            raise ValueError(f"LRP follows BERT's layers; this is a "
                             f"{getattr(self.hf.config, 'model_type', '?')} model")
        full, attention_mask, types, _ = self._wrap(embeds, batch)
        bert = self.hf.bert
        emb = bert.embeddings
        width = full.shape[1]
        positions = emb.position_embeddings(torch.arange(width, device=full.device))
        kinds = emb.token_type_embeddings(types if self.uses_types else torch.zeros_like(types))
        x = lrp.layer_norm(lrp.add(full, positions.expand_as(full), kinds, eps=eps),
                           emb.LayerNorm, eps)
        keep = attention_mask.bool()[:, None, None, :]
        for layer in bert.encoder.layer:
            attn = layer.attention.self
            heads = (x.shape[0], width, -1, attn.attention_head_size)
            with torch.no_grad():  # attention probabilities: constants for relevance
                q = attn.query(x).view(heads).transpose(1, 2)
                k = attn.key(x).view(heads).transpose(1, 2)
                scores = q @ k.transpose(-1, -2) * attn.attention_head_size ** -0.5
                probs = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
            v = lrp.linear(x, attn.value, eps).view(heads).transpose(1, 2)
            context = lrp.mix(probs, v, eps).transpose(1, 2).reshape(x.shape)
            out = layer.attention.output
            x = lrp.layer_norm(lrp.add(lrp.linear(context, out.dense, eps), x, eps=eps),
                               out.LayerNorm, eps)
            hidden = lrp.passthrough(layer.intermediate.intermediate_act_fn,
                                     lrp.linear(x, layer.intermediate.dense, eps))
            x = lrp.layer_norm(lrp.add(lrp.linear(hidden, layer.output.dense, eps), x, eps=eps),
                               layer.output.LayerNorm, eps)
        pooled = lrp.passthrough(bert.pooler.activation,
                                 lrp.linear(x[:, 0], bert.pooler.dense, eps))
        return lrp.linear(pooled, self.hf.classifier, eps).index_select(1, self.label_order)

    def attention_maps(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, H, S, S) attention probabilities of every layer and head over the
        full sequence (special tokens included; query rows x key columns), and (B, T)
        the full-sequence position of each batch position (-1 at padding). The first
        special token (e.g. [CLS]) is at position 0."""
        _, maps, index = self._run(self.embed(batch), batch, attentions=True)
        return maps, index

    def cls_mass(self, batch: Batch, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, C) logits and (B, H) the attention mass on ``tokens`` (B, T) bool of the
        last layer's [CLS] query row in each head: the attention deceptive training
        lowers (Pruthi et al.'s BERT penalty; ``core.models.deception``)."""
        logits, maps, index = self._run(self.embed(batch), batch, attentions=True)
        row = maps[:, -1, :, 0, :]  # (B, H, S)
        picked = row.gather(2, index.clamp(min=0).unsqueeze(1).expand(-1, row.shape[1], -1))
        return logits, (picked * tokens.unsqueeze(1).to(picked.dtype)).sum(-1)

    def training_loss(self, batch: Batch, labels: torch.Tensor) -> torch.Tensor:
        """Cross-entropy, plus for a deceptive model λ · the mean over heads and batch of
        −log(1 − ``cls_mass``) (the authors' ``att_opt_func mean``). The library's
        attention probabilities come after attention dropout in training, so the mass
        penalised is a dropout-noisy (unbiased) reading of the authors' pre-dropout one."""
        if not self.deceive_weight:
            return nn.functional.cross_entropy(self.logits(batch), labels)
        logits, mass = self.cls_mass(batch, deception.require(batch))
        return (nn.functional.cross_entropy(logits, labels)
                + self.deceive_weight * deception.penalty(mass).mean())

    @torch.no_grad()
    def attention_mass(self, batch: Batch, tokens: torch.Tensor) -> torch.Tensor:
        """(B,) ``cls_mass`` averaged over heads (the authors' "mean attention mass")."""
        return self.cls_mass(batch, tokens)[1].mean(1)

    def attention(self, batch: Batch) -> torch.Tensor:
        """The default reading of attention (see ``token_attention``)."""
        maps, index = self.attention_maps(batch)
        return token_attention(maps, index, batch.mask)

    # -- attention's stronger forms (BERT-layout encoders) ---------------------------------

    def _layers(self) -> Any:
        layers = bert_layers(self.hf)
        if layers is None:
            raise ValueError(f"attention vectors and value zeroing read BERT-layout encoder "
                             f"layers; this is a {getattr(self.hf.config, 'model_type', '?')} "
                             "model")
        return layers

    def _library(self, full: torch.Tensor, attention_mask: torch.Tensor, types: torch.Tensor,
                 **flags: Any) -> Any:
        """The library model's outputs on wrapped embeddings."""
        kwargs = {"token_type_ids": types} if self.uses_types else {}
        return self.hf(inputs_embeds=full, attention_mask=attention_mask, **kwargs, **flags)

    def attention_vectors(self, batch: Batch, layer: int | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Kobayashi et al. (2020)'s parts of one layer's (default: the last) attention
        for the [CLS] query (position 0): (B, H, S) its weights α_h,0,j per head, (B, H, S, D)
        the vectors they weight, f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h (the head's value map,
        bias included, and its share of the output map; W_O's bias is added once, after
        the sum over heads and positions), and (B, T) each piece's full-sequence position
        (-1 at padding). The layer's attention output at [CLS] is Σ_h Σ_j α_h,0,j f_h(x_j)
        + b_O."""
        module = self._layers()[-1 if layer is None else layer]
        full, attention_mask, types, index = self._wrap(self.embed(batch), batch)
        out = self._library(full, attention_mask, types, output_attentions=True,
                            output_hidden_states=True)
        which = len(out.attentions) - 1 if layer is None else layer
        x = out.hidden_states[:-1][which]  # the layer's input (B, S, D)
        attn = module.attention.self
        heads, size = attn.num_attention_heads, attn.attention_head_size
        values = attn.value(x).view(*x.shape[:2], heads, size)  # (B, S, H, d)
        w_o = module.attention.output.dense.weight  # (D, H·d)
        vectors = torch.einsum("bshd,ehd->bhse", values, w_o.view(w_o.shape[0], heads, size))
        weights = out.attentions[which][:, :, 0, :]  # (B, H, S)
        return weights, vectors, torch.where(batch.mask, index, -1)

    def attention_leaf(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, H, S) the last layer's [CLS] attention row per head, the one attention of
        that layer the classifier reads (only [CLS] goes on to the pooler), and the (B, T)
        index; ``logits_from_attention`` takes weights of this shape."""
        maps, index = self.attention_maps(batch)
        return maps[:, -1, :, 0, :], index

    def logits_from_attention(self, weights: torch.Tensor, batch: Batch) -> torch.Tensor:
        """(B, C) the logits with ``weights`` (B, H, S) in place of the last layer's [CLS]
        attention row: the self-attention's [CLS] output becomes Σ_j w_h,j v_h,j per head
        (forward hooks on the last layer's value map and self-attention), the rest of the
        model as is. Differentiable wrt ``weights``."""
        attn = self._layers()[-1].attention.self
        heads, size = attn.num_attention_heads, attn.attention_head_size
        seen: dict[str, torch.Tensor] = {}

        def keep_values(module, args, output):
            seen["values"] = output

        def replace_cls_row(module, args, output):
            context = output[0] if isinstance(output, tuple) else output  # (B, S, H·d)
            values = seen["values"].view(*context.shape[:2], heads, size)
            row = torch.einsum("bhs,bshd->bhd", weights.to(values.dtype), values)
            context = torch.cat([row.reshape(context.shape[0], 1, -1), context[:, 1:]], dim=1)
            return (context, *output[1:]) if isinstance(output, tuple) else context

        handles = [attn.value.register_forward_hook(keep_values),
                   attn.register_forward_hook(replace_cls_row)]
        try:
            return self.logits(batch)
        finally:
            for handle in handles:
                handle.remove()

    @torch.no_grad()
    def value_zeroing_maps(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Value zeroing (Mohebbi, Zuidema, Chrupała & Alishahi 2023): (B, L, S, S) float64
        maps, entry [l, i, j] the cosine distance between token i's output of layer l and
        its output when token j's value vector is zeroed in every head of that layer (the
        layer's input, attention weights and everything else as they are), rows normalized
        to sum to 1 over the real positions; and the (B, T) index. The S variants of an
        example go through each layer in one pass (forward hooks: variant j zeroes the
        value map's output at position j; each layer hands the next the original states)."""
        layers = self._layers()
        full, attention_mask, types, index = self._wrap(self.embed(batch), batch)
        b, width = attention_mask.shape
        maps = torch.zeros(b, len(layers), width, width, dtype=torch.float64,
                           device=full.device)
        per_pass = max(1, self.max_rows_per_pass // width)
        for start in range(0, b, per_pass):
            rows = slice(start, start + per_pass)
            w = int(attention_mask[rows].sum(1).max())  # the chunk's own width
            part = full[rows, :w], attention_mask[rows, :w], types[rows, :w]

            def run(r: int, part: tuple = part) -> Any:
                return self._library(*(t.repeat_interleave(r, dim=0) for t in part))

            maps[rows, :, :w, :w] = value_zeroing(layers, lambda layer: layer.attention.self.value,
                                                  run, part[1].bool())
        return maps, torch.where(batch.mask, index, -1)

    def _run(self, embeds: torch.Tensor, batch: Batch, attentions: bool = False):
        full, attention_mask, types, index = self._wrap(embeds, batch)
        kwargs = {"token_type_ids": types} if self.uses_types else {}
        out = self.hf(inputs_embeds=full, attention_mask=attention_mask,
                      output_attentions=attentions, **kwargs)
        logits = out.logits.index_select(1, self.label_order)
        if not attentions:
            return logits, None, None
        maps = torch.stack(out.attentions, dim=1)  # (B, L, H, S, S)
        return logits, maps, torch.where(batch.mask, index, -1)

    def _wrap(self, embeds: torch.Tensor, batch: Batch):
        """Special tokens around the pieces: (B, S, D) embeddings, (B, S) attention
        mask and segment types, and (B, T) where each batch position went."""
        lay, mask = self.layout, batch.mask
        b, t, _ = embeds.shape
        pair = batch.segments is not None
        seg = batch.segments if batch.segments is not None else torch.zeros_like(batch.ids)
        n0 = (mask & (seg == 0)).sum(1)
        n1 = (mask & (seg == 1)).sum(1)
        h = len(lay.head)
        extra = h + (len(lay.mid) + len(lay.tail) if pair else len(lay.single_tail))
        width = t + extra
        rank = mask.long().cumsum(1) - 1  # place among the row's real pieces
        index = torch.where(mask, h + rank + (seg == 1).long() * len(lay.mid), width)
        ids = torch.full((b, width + 1), self.pad_id, dtype=torch.long, device=embeds.device)
        types = torch.zeros_like(ids)
        rows = torch.arange(b, device=embeds.device)

        def put(tokens: list[int], start: torch.Tensor, kind: int) -> None:
            for j, token in enumerate(tokens):
                ids[rows, start + j] = token
                types[rows, start + j] = kind

        put(lay.head, torch.zeros_like(n0), 0)
        if pair:
            put(lay.mid, h + n0, lay.mid_type)
            put(lay.tail, h + n0 + len(lay.mid) + n1, lay.tail_type)
            second = mask & (seg == 1)
            types.scatter_(1, torch.where(second, index, width),
                           torch.full_like(index, lay.second_type))
        else:
            put(lay.single_tail, h + n0, 0)
        length = n0 + n1 + extra
        full = self.word_embeddings(ids).scatter(
            1, index.unsqueeze(-1).expand_as(embeds), embeds)[:, :width]
        attention_mask = torch.arange(width, device=embeds.device) < length.unsqueeze(1)
        return full, attention_mask.long(), types[:, :width], index

    def retokenize(self, batch: Batch) -> Batch:
        """Each row's pieces decoded to text and tokenized again (per segment), as a
        text-level tool sees a perturbed input; see faithbench.benchmark.core.erasers."""
        return retokenized(self.tokenizer, self.pad_id, batch)


def retokenized(tokenizer, pad_id: int, batch: Batch) -> Batch:
    """``batch`` with each row's pieces decoded to text and tokenized again by
    ``tokenizer``, per segment (the ``retokenize`` eraser of subword models)."""
    segments = [[0] * int(n) for n in batch.lengths] if batch.segments is None else [
        batch.segments[r][batch.mask[r]].tolist() for r in range(len(batch))]
    rows = [batch.tokens_of(r) for r in range(len(batch))]
    texts = {s: [[i for i, g in zip(row, seg) if g == s] for row, seg in zip(rows, segments)]
             for s in ((0,) if batch.segments is None else (0, 1))}
    encoded = {s: tokenizer(tokenizer.batch_decode(pieces), add_special_tokens=False,
                            truncation=False)["input_ids"]
               for s, pieces in texts.items()}
    new = [[i for s in encoded for i in encoded[s][r]] for r in range(len(batch))]
    new_seg = [[s for s in encoded for _ in encoded[s][r]] for r in range(len(batch))]
    width = max([len(r) for r in new] + [1])
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    out_mask = torch.zeros((len(batch), width), dtype=torch.bool)
    out_seg = torch.zeros_like(ids)
    for r, (row, seg) in enumerate(zip(new, new_seg)):
        ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
        out_mask[r, : len(row)] = True
        out_seg[r, : len(row)] = torch.tensor(seg, dtype=torch.long)
    return batch.replace(ids=ids, mask=out_mask, words=None,
                         segments=None if batch.segments is None else out_seg)


def bert_layers(hf: Any) -> Any:
    """The encoder layers of a BERT-layout library model (``encoder.layer[i]`` with
    ``attention.self.value`` and ``attention.output.dense``), else None."""
    layers = getattr(getattr(hf.base_model, "encoder", None), "layer", None)
    if not layers:
        return None
    for layer in layers:
        attention = getattr(layer, "attention", None)
        if not (hasattr(getattr(attention, "self", None), "value")
                and hasattr(getattr(attention, "output", None), "dense")):
            return None
    return layers


def value_zeroing(layers: Any, value_of: Callable[[Any], nn.Module],
                  run: Callable[[int], Any], real: torch.Tensor) -> torch.Tensor:
    """(M, L, W, W) float64 value-zeroing maps of M rows of width W (``real`` (M, W)
    bool): entry [l, i, j] the cosine distance between position i's output of layer l
    and its output when position j's value vector (``value_of(layer)``'s output) is
    zeroed in every head of that layer, its input the original states; rows normalized
    over the real positions. ``run(r)`` forwards the rows, each repeated r times: once
    to keep every layer's output, then W copies of each row (copy j zeroes position j)."""
    m, w = real.shape
    kept: list[torch.Tensor] = []
    zeroed: list[torch.Tensor] = []

    def first(output: Any) -> torch.Tensor:
        return output[0] if isinstance(output, tuple) else output

    def keep_output(module, args, output):
        kept.append(first(output))

    handles = [layer.register_forward_hook(keep_output) for layer in layers]
    try:
        run(1)
    finally:
        for handle in handles:
            handle.remove()
    keep = (1 - torch.eye(w, dtype=kept[0].dtype, device=kept[0].device)).repeat(m, 1)

    def zero_value(module, args, output):
        return output * keep.unsqueeze(-1)  # (M·W, W, H·d): copy j, position j

    def hand_on(layer: int):
        def hook(module, args, output):
            zeroed.append(first(output))
            original = kept[layer].repeat_interleave(w, dim=0)
            return (original, *output[1:]) if isinstance(output, tuple) else original
        return hook

    handles = [h for i, layer in enumerate(layers) for h in (
        value_of(layer).register_forward_hook(zero_value),
        layer.register_forward_hook(hand_on(i)))]
    try:
        run(w)
    finally:
        for handle in handles:
            handle.remove()
    maps = torch.zeros(m, len(layers), w, w, dtype=torch.float64, device=real.device)
    pairs = real.unsqueeze(2) & real.unsqueeze(1)
    for i, out in enumerate(zeroed):  # (M·W, W, D): [example·variant j, position i]
        new = unit(out.double().view(m, w, w, -1))
        old = unit(kept[i].double()).unsqueeze(1)  # (M, 1, W, D)
        distance = 0.5 * (new - old).pow(2).sum(-1).transpose(1, 2) * pairs  # (M, i, j)
        total = distance.sum(-1, keepdim=True)
        maps[:, i] = torch.where(total > 0, distance / total.clamp(min=1e-300), distance)
    return maps


def unit(x: torch.Tensor) -> torch.Tensor:
    """``x`` scaled to unit length along the last axis (½‖unit(x) − unit(y)‖² is the
    cosine distance 1 − cos(x, y), without 1 − cos's cancellation near 0)."""
    return x / x.norm(dim=-1, keepdim=True).clamp(min=1e-300)


def _rebuild(config, weights, tokenizer, label_order, training) -> TransformerClassifier:
    from transformers import AutoModelForSequenceClassification

    hf = AutoModelForSequenceClassification.from_config(config)
    hf.load_state_dict(weights)
    return TransformerClassifier(hf, tokenizer, label_order).train(training)
