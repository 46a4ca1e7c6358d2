"""A randomly initialised two-layer, two-head BERT over MiniLM's vocabulary (float64),
for tests that check a Transformer computation against one written out by hand.

``random_bert(texts, scale=1.0)`` returns the Hugging Face model, its faithbench
adapter, the tokenizer and the texts as one padded batch of pieces (example ids "a",
"b", ...). Biases are drawn wide (σ 0.3) so that no bias term vanishes; ``scale``
multiplies the encoder, pooler and classifier weights (6: attention far from uniform).
"""

from __future__ import annotations

import pytest
import torch


def random_bert(texts: list[str], scale: float = 1.0):
    transformers = pytest.importorskip("transformers")
    from faithbench.benchmark.core.models.transformer import TransformerClassifier
    from faithbench.benchmark.core.vocab import collate
    from faithbench.tasks.transformer import base_path, load_tokenizer

    tokenizer = load_tokenizer(base_path())
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=8,
                                     num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=12, num_labels=3,
                                     attn_implementation="eager")
    hf = transformers.BertForSequenceClassification(config).double().eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.3)
            elif scale != 1.0 and any(k in name for k in ("encoder", "pooler", "classifier")):
                p.mul_(scale)
    ids = [tokenizer(t.split(), is_split_into_words=True, add_special_tokens=False)["input_ids"]
           for t in texts]
    batch = collate(ids, [chr(ord("a") + i) for i in range(len(texts))])
    return hf, TransformerClassifier(hf, tokenizer).eval(), tokenizer, batch
