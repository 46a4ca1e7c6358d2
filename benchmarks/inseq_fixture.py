"""Writes tests/fixtures/inseq: a tiny Llama-layout checkpoint with a byte-level BPE
tokenizer that starts each text with <|endoftext|> (as Llama's adds <s>), and Inseq's
attributions of two teacher-forced continuations saved in each of its formats (granular
float32, float16 gzipped, primitives, one file per sequence, aggregated), with
``expected.json``: each sequence's tokens, first generated position, the L2 norm over
the hidden units (Inseq's vnorm; -1 where NaN) and Inseq's step probabilities.

Inseq is not a faithbench dependency: run this in a separate venv, from that folder:

    pip install torch==2.13.0 inseq==0.7.1
    python ../../../benchmarks/inseq_fixture.py input_x_gradient
"""

import json
import sys

import inseq
import torch
import transformers
from tokenizers import ByteLevelBPETokenizer
from tokenizers.processors import TemplateProcessing

ROWS = [("the movie was", " good and funny"), ("a dull and boring", " film"),
        ("it is not a bad", " film at all")]
START = "<|endoftext|>"


def tokenizer():
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([p + c for p, c in ROWS] * 20, vocab_size=300,
                            special_tokens=[START])
    bpe._tokenizer.post_processor = TemplateProcessing(
        single=f"{START} $A", special_tokens=[(START, bpe.token_to_id(START))])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=START,
                                                bos_token=START)


def main(method: str) -> None:
    tok = tokenizer()
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id,
        pad_token_id=tok.eos_token_id)
    hf = transformers.AutoModelForCausalLM.from_config(config).eval()
    hf.save_pretrained("model")
    tok.save_pretrained("model")
    model = inseq.load_model(hf, method, tokenizer=tok)
    out = model.attribute([p for p, _ in ROWS[:2]], [p + c for p, c in ROWS[:2]],
                          step_scores=["probability"])
    out.save("granular.json", overwrite=True)
    out.save("granular16.json.gz", overwrite=True, compress=True, scores_precision="float16")
    out.save("prim.json", overwrite=True, use_primitives=True)
    out.save("split.json", overwrite=True, split_sequences=True)
    out.aggregate().save("aggregated.json", overwrite=True)
    expected = [{"target": [[t.token, t.id] for t in s.target], "start": s.attr_pos_start,
                 "vnorm": torch.nan_to_num(s.target_attributions.norm(dim=-1), nan=-1).tolist(),
                 "probability": s.step_scores["probability"].tolist()}
                for s in out.sequence_attributions]
    with open("expected.json", "w") as f:
        json.dump(expected, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
