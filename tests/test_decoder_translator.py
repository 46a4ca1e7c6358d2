"""The decoder-only translator (``--model decoder`` on alignment): its forward is the
library decoder's on the typed "source ⟶ target" ids, the next-word scores of a row are
the teacher-forced ones at its last prefix word, and on a task whose alignment is known
(the target is the source reversed) both its attention and a gradient explainer, read
off as links, find that alignment."""

from __future__ import annotations

import pytest
import torch

from faithbench.benchmark.core.models.training import (
    TrainConfig,
    perplexity,
    seed_everything,
)
from tests.reversal import (
    BOS,
    VOCAB,
    cut_prefixes,
    explainer_aer,
    teacher_forced,
    train_reverser,
)

pytest.importorskip("transformers")
from faithbench.benchmark.core.models.decoder_translator import (
    DecoderTranslator,
    TranslatorConfig,
)


@pytest.fixture(scope="module")
def reverser(one_thread):
    seed_everything(0)
    model = DecoderTranslator(TranslatorConfig(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB,
                                               bos_id=BOS, hidden=32, heads=4,
                                               intermediate=64, dropout=0.0))
    return train_reverser(model, TrainConfig(epochs=10, patience=2, lr=3e-3,
                                             optimizer="adamw", warmup=0.1))[:4]


def test_the_forward_is_the_library_decoders_on_source_then_target(reverser):
    model, rows, *_ = reverser
    batch, _ = teacher_forced(rows[:5])  # five lengths: left padding at work
    with torch.no_grad():
        got = model.teacher_forced_logits(batch)
        for b, row in enumerate(rows[:5]):
            n = len(row)
            prefix = batch.prefix[b, :n]
            ids = torch.cat([torch.tensor(row), prefix + VOCAB]).unsqueeze(0)
            hidden = model.base(input_ids=ids).last_hidden_state[0, n:]
            torch.testing.assert_close(got[b, :n], model.out(hidden), rtol=1e-4, atol=1e-5)


def test_the_decoder_learns_to_reverse(reverser):
    model, _, val, best = reverser
    assert perplexity(model, val) == pytest.approx(-best, rel=1e-6)
    assert -best < 1.5  # a uniform guess over 20 words would be 20


# measured when written: attention 0.153, gradient × input 0.453, AttnLRP 0.016; reading
# the middle word for every target word (the diagonal baseline) gets about 0.9
BOUND = {"attention": 0.25, "gradient_x_input": 0.6, "lrp": 0.1}


@pytest.mark.parametrize("explainer", sorted(BOUND))
def test_the_reversers_explanations_find_the_reversed_diagonal(reverser, explainer):
    """Links read off each explainer's scores (argmax over the source) against the one
    true link (n − 1 − t, t) of target word t."""
    model, rows, *_ = reverser
    aer = explainer_aer(model, explainer, rows[:60])
    assert aer < BOUND[explainer], aer


def test_explained_logits_are_the_teacher_forced_ones_at_the_last_prefix_step(reverser):
    model, rows, *_ = reverser
    batch, _ = teacher_forced(rows[:16])
    short, cut = cut_prefixes(batch)
    with torch.no_grad():
        full = model.teacher_forced_logits(batch)
        got = model.logits(short)
        lrp_got = model.lrp_logits(model.embed(short), short)
    torch.testing.assert_close(got, full[torch.arange(16), cut - 1], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(lrp_got, got, rtol=1e-4, atol=1e-5)
