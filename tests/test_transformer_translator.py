"""The Transformer encoder-decoder translator (``--model transformer`` on alignment): its
forward is the library's BART forward on the typed ids, a row's next-word scores are
the teacher-forced ones at its last prefix word, its cross-attention is the library's,
and on a task whose alignment is known (the target is the source reversed) the
cross-attention of a trained model, read off as links, finds that alignment."""

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
from faithbench.benchmark.core.models.transformer_translator import (
    EncoderDecoderConfig,
    TransformerTranslator,
)


@pytest.fixture(scope="module")
def reverser(one_thread):
    seed_everything(0)
    model = TransformerTranslator(EncoderDecoderConfig(
        src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, bos_id=BOS, hidden=32, layers=2, heads=4,
        ffn=64, dropout=0.0))
    return train_reverser(model, TrainConfig(epochs=10, patience=2, lr=3e-3,
                                             optimizer="adamw", warmup=0.1))[:4]


def test_the_forward_and_cross_attention_are_the_librarys_on_the_typed_ids(reverser):
    model, rows, *_ = reverser
    batch, _ = teacher_forced(rows[:5])  # five lengths: padding on both sides at work
    with torch.no_grad():
        got = model.teacher_forced_logits(batch)
        maps = model.cross_attention(batch)
        for b, row in enumerate(rows[:5]):
            n = len(row)
            out = model.base(input_ids=torch.tensor([row]),
                             decoder_input_ids=batch.prefix[b : b + 1, :n] + VOCAB,
                             output_attentions=True)
            torch.testing.assert_close(got[b, :n], model.out(out.last_hidden_state[0]),
                                       rtol=1e-4, atol=1e-5)
            library = torch.stack(out.cross_attentions, 1)[0, :, :, n - 1]  # (L, H, n)
            torch.testing.assert_close(maps[b, :, :, :n], library, rtol=1e-4, atol=1e-6)
            assert not maps[b, :, :, n:].any()


def test_the_encoder_decoder_learns_to_reverse(reverser):
    model, _, val, best = reverser
    assert perplexity(model, val) == pytest.approx(-best, rel=1e-6)
    assert -best < 1.5  # a uniform guess over 20 words would be 20


def test_explained_logits_are_the_teacher_forced_ones_at_the_last_prefix_step(reverser):
    model, rows, *_ = reverser
    batch, _ = teacher_forced(rows[:16])
    short, cut = cut_prefixes(batch)
    with torch.no_grad():
        full = model.teacher_forced_logits(batch)
        got = model.logits(short)
    torch.testing.assert_close(got, full[torch.arange(16), cut - 1], rtol=1e-4, atol=1e-5)


# measured when written: the last layer's cross-attention 0.153 (the first layer's 0.241),
# gradient 0.176, occlusion 0.059 (gradient × input 0.75: the signed product's argmax
# often picks a word pushing against the target); reading the middle word for every
# target word (the diagonal baseline) gets about 0.9
BOUND = {"attention": 0.25, "gradient": 0.3, "occlusion": 0.15}


@pytest.mark.parametrize("explainer", sorted(BOUND))
def test_the_reversers_explanations_find_the_reversed_diagonal(reverser, explainer):
    """Links read off each explainer's scores (argmax over the source) against the one
    true link (n − 1 − t, t) of target word t; ``attention`` is the last layer's
    cross-attention."""
    model, rows, *_ = reverser
    aer = explainer_aer(model, explainer, rows[:60])
    assert aer < BOUND[explainer], aer



def test_the_alignment_task_trains_caches_and_explains_it(shared_data, one_thread):
    """``--model transformer`` on alignment, one layer on 1,000 Hansards pairs: its own
    task id and cache file, the gate's budget names it, and every source word of a row
    gets a cross-attention weight."""
    from faithbench.benchmark.core.api import TaskOptions
    from faithbench.submissions import get_explainer
    from faithbench.tasks.alignment import TASK
    options = TaskOptions(data_dir=str(shared_data), model="transformer", model_layers=1,
                          train_limit=1000, epochs=1)
    ready = TASK.prepare(options, progress=False)
    assert ready.spec.id == "alignment[model=transformer;variant=alignment]@1"
    assert isinstance(ready.model, TransformerTranslator)
    assert ready.report.budget.describe().startswith("Transformer encoder-decoder on 1,000")
    assert TASK.prepare(options, progress=False).loaded_from_cache
    rows = ready.examples("test", 2)
    batch, _, _ = next(ready.batches(rows, len(rows)))
    weights = get_explainer("attention").explain(ready.model, batch, None,
                                                 rng=torch.Generator().manual_seed(0))
    torch.testing.assert_close(weights.sum(1), torch.ones(len(rows)))
    assert bool((weights[batch.mask] > 0).all())
