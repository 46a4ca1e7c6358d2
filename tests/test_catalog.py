"""``faithbench list``'s models table says what each model family offers explainers:
each row checked against the ``capabilities`` of a model of that family built here."""

import pytest
import torch

from faithbench.benchmark.catalog import MODELS
from faithbench.benchmark.core.api import capabilities

transformers = pytest.importorskip("transformers")


def offers(name: str) -> set[str]:
    [row] = [r for r in MODELS if r[0] == name]
    return set(row[2].split(", "))


def test_every_model_row_is_what_the_model_offers():
    from faithbench.benchmark.core.models.classifier import AttentionClassifier, ClassifierConfig
    from faithbench.benchmark.core.models.decoder import DecoderClassifier, template_ids
    from faithbench.benchmark.core.models.decoder_translator import (
        DecoderTranslator,
        TranslatorConfig,
    )
    from faithbench.benchmark.core.models.seq2seq import AttentionSeq2Seq, Seq2SeqConfig
    from faithbench.tasks.transformer import base_path, load_tokenizer
    from tests.tiny_bert import random_bert

    tokenizer = load_tokenizer(base_path())
    torch.manual_seed(0)
    assert set(capabilities(AttentionClassifier(ClassifierConfig(30, 2)))) == offers("bilstm")
    orthogonal = AttentionClassifier(ClassifierConfig(30, 2, bilstm="orthogonal"))
    assert set(capabilities(orthogonal)) == offers("bilstm") - {"lrp"}  # as the row says
    assert set(capabilities(AttentionSeq2Seq(Seq2SeqConfig(30, 30, bos_id=2)))) == \
        offers("seq2seq")
    assert set(capabilities(random_bert(["a b"])[1])) == offers("transformer")
    assert set(capabilities(DecoderTranslator(TranslatorConfig(30, 30, 2)))) == offers("decoder")
    from faithbench.benchmark.core.models.transformer_translator import (
        EncoderDecoderConfig,
        TransformerTranslator,
    )
    assert set(capabilities(TransformerTranslator(EncoderDecoderConfig(30, 30, 2)))) == offers(
        "transformer encoder-decoder")

    def decoder(config) -> DecoderClassifier:
        hf = transformers.AutoModelForCausalLM.from_config(config)
        return DecoderClassifier(hf, tokenizer, template_ids(tokenizer, "{text} A:", False),
                                 [1000, 1001])

    small = {"vocab_size": len(tokenizer)}
    for kind in (transformers.LlamaConfig, transformers.Qwen2Config, transformers.MistralConfig):
        config = kind(hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, **small)
        assert set(capabilities(decoder(config))) == offers("decoder"), kind.__name__
    gpt2 = transformers.GPT2Config(n_embd=8, n_layer=1, n_head=2, **small)
    assert set(capabilities(decoder(gpt2))) == offers("decoder, GPT-2 layout")


def test_list_prints_the_models_table(capsys):
    from faithbench.benchmark.cli import list_verb
    assert list_verb.main(None) == 0
    out = capsys.readouterr().out
    assert "models (what each offers" in out and "decoder, GPT-2 layout" in out
