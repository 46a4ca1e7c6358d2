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

from typing import Any

import torch
from torch import nn

from faithbench.benchmark.core import lrp
from faithbench.benchmark.core.api import (
    ATTENTION,
    EMBEDDINGS,
    GRADIENTS,
    LAYER_ATTENTION,
    LRP,
    Batch,
    token_attention,
)


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


class TransformerClassifier(nn.Module):
    """``hf``: an ``AutoModelForSequenceClassification`` (eager attention, so every
    layer's attention can be read); ``label_order[c]`` = the hf output index of the
    task's class c (a checkpoint whose labels are the task's in another order)."""

    label_order: torch.Tensor  # a buffer

    def __init__(self, hf: Any, tokenizer, label_order: list[int] | None = None):
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
        self.capabilities = frozenset({GRADIENTS, EMBEDDINGS, ATTENTION, LAYER_ATTENTION,
                                       *([LRP] if self.lrp_ready else [])})
        # on CPU a pass of 8-32 rows runs ~2x more rows/s than one of 256 (measured on
        # MiniLM, SST-2 lengths): the perturbation engine and IG cap their passes at this
        self.max_rows_per_pass = 32
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

    def attention(self, batch: Batch) -> torch.Tensor:
        """The default reading of attention (see ``token_attention``)."""
        maps, index = self.attention_maps(batch)
        return token_attention(maps, index, batch.mask)

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
        segments = [[0] * int(n) for n in batch.lengths] if batch.segments is None else [
            batch.segments[r][batch.mask[r]].tolist() for r in range(len(batch))]
        rows = [batch.tokens_of(r) for r in range(len(batch))]
        texts = {s: [[i for i, g in zip(row, seg) if g == s] for row, seg in zip(rows, segments)]
                 for s in ((0,) if batch.segments is None else (0, 1))}
        encoded = {s: self.tokenizer(self.tokenizer.batch_decode(pieces), add_special_tokens=False,
                                     truncation=False)["input_ids"]
                   for s, pieces in texts.items()}
        new = [[i for s in encoded for i in encoded[s][r]] for r in range(len(batch))]
        new_seg = [[s for s in encoded for _ in encoded[s][r]] for r in range(len(batch))]
        width = max([len(r) for r in new] + [1])
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        out_mask = torch.zeros((len(batch), width), dtype=torch.bool)
        out_seg = torch.zeros_like(ids)
        for r, (row, seg) in enumerate(zip(new, new_seg)):
            ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
            out_mask[r, : len(row)] = True
            out_seg[r, : len(row)] = torch.tensor(seg, dtype=torch.long)
        return batch.replace(ids=ids, mask=out_mask, words=None,
                             segments=None if batch.segments is None else out_seg)


def _rebuild(config, weights, tokenizer, label_order, training) -> TransformerClassifier:
    from transformers import AutoModelForSequenceClassification

    hf = AutoModelForSequenceClassification.from_config(config)
    hf.load_state_dict(weights)
    return TransformerClassifier(hf, tokenizer, label_order).train(training)
