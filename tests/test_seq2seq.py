"""The seq2seq model trains with teacher forcing through the shared training loop
(``NEXT_WORD`` objective, early stopping on validation perplexity), and on a task
whose alignment is known — the target is the source reversed — its attention, read
off as links, finds that alignment."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from faithbench.benchmark.core.api import Batch
from faithbench.benchmark.core.models.seq2seq import AttentionSeq2Seq, Seq2SeqConfig
from faithbench.benchmark.core.models.training import (
    NEXT_WORD,
    TrainConfig,
    perplexity,
    seed_everything,
    train,
)
from faithbench.metrics.alignment import AER, argmax_links, link_counts
from tests.reversal import (
    BOS,
    VOCAB,
    cut_prefixes,
    gold,
    per_position,
    sentences,
    teacher_forced,
    train_reverser,
)


class Uniform(torch.nn.Module):
    """Scores every one of V = 10 words alike: cross-entropy log 10 per word, perplexity 10."""

    def teacher_forced_logits(self, batch):
        return torch.zeros(*batch.prefix.shape, 10)


def test_perplexity_counts_real_target_words_only():
    batch, labels = teacher_forced([[3, 4, 5], [6]])
    assert int((labels != -100).sum()) == 4
    assert perplexity(Uniform(), [(batch, labels)]) == pytest.approx(10.0)
    loss, count = NEXT_WORD.loss(Uniform(), batch, labels)
    assert count == 4 and float(loss) == pytest.approx(math.log(10))


@pytest.fixture(scope="module")
def reverser(one_thread):
    seed_everything(0)
    model = AttentionSeq2Seq(Seq2SeqConfig(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB,
                                           embed_dim=32, hidden=32, attn_dim=32, dropout=0.0))
    return train_reverser(model, TrainConfig(epochs=8, patience=2, lr=1e-2))


def test_teacher_forcing_learns_to_reverse(reverser):
    model, _, val, best, history = reverser
    assert set(history[0]) == {"epoch", "train_loss", "val_neg_perplexity"}
    # the kept weights are the best epoch's: their perplexity is the best score
    assert perplexity(model, val) == pytest.approx(-best, rel=1e-6)
    assert -best < 1.3  # a uniform guess over 20 words would be 20


def test_attention_of_the_reverser_is_the_reversed_diagonal(reverser):
    """One row per (sentence, target position t): prefix BOS + target[:t]; the
    decoder's attention at that step, argmax over the source, links target word t to
    a source word; gold is the one true link (n - 1 - t, t)."""
    model, rows, *_ = reverser
    counts = []
    with torch.no_grad():
        for row in rows[:100]:
            n = len(row)
            links = argmax_links(model.attention(per_position(row)))  # (T = n rows, S = n)
            counts.append(link_counts(links, gold(n), gold(n)))
    aer = float(AER(torch.tensor(counts).sum(0).numpy()))
    assert aer < 0.15  # 0.06 when written; the diagonal baseline gets only middle words: ~0.9


def test_explained_logits_are_the_teacher_forced_ones_at_the_last_prefix_step(reverser):
    """``logits`` applies the output layer only at each row's last real prefix step (the
    costly H x V product, once per row); it must equal the full teacher-forced scores
    there, whatever the padding of the other rows."""
    model, val_rows, _, _, _ = reverser
    model.eval()
    batch, _ = teacher_forced(val_rows[:16])
    short, cut = cut_prefixes(batch)  # rows explained at different positions
    with torch.no_grad():
        full = model.teacher_forced_logits(batch)
        got = model.logits(short)
    want = full[torch.arange(16), cut - 1]
    assert torch.allclose(got, want, atol=1e-5)


def test_altered_attention_at_every_step_breaks_the_reverser(reverser):
    """Reversing a sentence needs attention: the reverser's next-word accuracy under
    teacher forcing is near 1 with its own attention and falls to a guess when the
    debate's uniform weights replace it at every step (Vashishth et al.'s alteration);
    outside the context the model's own attention is back."""
    from faithbench.benchmark.debate import ops
    model, rows, *_ = reverser
    batch, labels = teacher_forced(rows[:50])

    def accuracy():
        with torch.no_grad():
            predicted = model.teacher_forced_logits(batch).argmax(-1)
        real = labels != -100
        return float((predicted[real] == labels[real]).double().mean())

    learned = accuracy()

    def uniform(w, b, step):
        return ops.uniform(ops.groups(b), w.dtype)

    with model.altered_attention(uniform):
        flat = accuracy()
        step = batch.replace(prefix=batch.prefix[:, :2], prefix_mask=batch.prefix_mask[:, :2])
        weights = model.attention(step)
        n = batch.mask.sum(1, keepdim=True)
        assert torch.allclose(weights, batch.mask / n)
    assert learned > 0.95 and flat < 0.5, (learned, flat)
    assert accuracy() == learned and model.alter is None


def test_translation_bleu_under_each_alteration(reverser):
    """``vashishth.translation`` on the reverser (greedy decoding written here): the
    learned attention translates (BLEU near 100), uniform weights do not."""
    import sacrebleu

    from faithbench.benchmark.core.vocab import collate
    from faithbench.benchmark.debate import vashishth
    model, rows, *_ = reverser

    class Pair:
        def __init__(self, i, row):
            self.id, self.src, self.tgt = str(i), [str(t) for t in row], [str(t) for t in row[::-1]]

    class Prepared:
        def __init__(self):
            self.model = model

        def translate(self, sources):
            out = []
            with torch.no_grad():
                for src in sources:
                    batch = collate([[int(t) for t in src]], ["s"])
                    words = torch.tensor([[BOS]])
                    for _ in range(len(src)):
                        step = batch.replace(prefix=words, prefix_mask=torch.ones_like(words).bool())
                        words = torch.cat([words, model.logits(step).argmax(-1, keepdim=True)], 1)
                    out.append([str(t) for t in words[0, 1:].tolist()])
            return out

    pairs = [Pair(i, r) for i, r in enumerate(rows[:30])]
    got = vashishth.translation(Prepared(), pairs)
    assert set(got) == {"bleu_learned", "bleu_uniform", "bleu_random", "bleu_permuted"}
    hyps = Prepared().translate([p.src for p in pairs])
    assert got["bleu_learned"] == pytest.approx(
        [sacrebleu.sentence_bleu(" ".join(h), [" ".join(p.tgt)], tokenize="none").score
         for h, p in zip(hyps, pairs)])
    assert np.mean(got["bleu_learned"]) > 80 > np.mean(got["bleu_uniform"]) + 30


def test_uniform_attention_model_trains_with_its_attention_frozen(one_thread):
    """``uniform_attention`` (``--bilstm uniform`` on alignment): every step attends 1/n
    over the real source words in training and inference, so the attention's scoring
    layers never receive a gradient, and the reverser it cannot be learns only a guess
    (the learned-attention reverser above reaches > 0.95)."""
    seed_everything(0)
    config = Seq2SeqConfig(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, embed_dim=32, hidden=32,
                           attn_dim=32, dropout=0.0, uniform_attention=True)
    assert "uniform_attention" not in Seq2SeqConfig(VOCAB, VOCAB).as_dict()  # old keys stay
    assert config.as_dict()["uniform_attention"] is True
    model = AttentionSeq2Seq(config)
    before = {k: v.clone() for k, v in model.attn.state_dict().items()}
    rows = sentences(600, 0)
    val = [teacher_forced(sentences(100, 1))]
    train(model, lambda e: [teacher_forced(rows[i : i + 32]) for i in range(0, 600, 32)], val,
          TrainConfig(epochs=2, patience=2, lr=1e-2), seed=0, progress=False, objective=NEXT_WORD)
    assert all(torch.equal(v, model.attn.state_dict()[k]) for k, v in before.items())
    batch, labels = val[0]
    model.eval()
    with torch.no_grad():
        step = batch.replace(prefix=batch.prefix[:, :3], prefix_mask=batch.prefix_mask[:, :3])
        assert torch.allclose(model.attention(step), batch.mask / batch.mask.sum(1, keepdim=True))
        # LRP's unrolled decoder holds the same frozen weights: it rebuilds the logits
        assert torch.allclose(model.lrp_logits(model.embed(step), step), model.logits(step),
                              atol=1e-5)
        predicted = model.teacher_forced_logits(batch).argmax(-1)
    real = labels != -100
    accuracy = float((predicted[real] == labels[real]).double().mean())
    # the best any model can do from the bag of source words: at step t, guess the most
    # frequent word not yet emitted (the words are drawn at random, so order is unknown)
    best = []
    for row in sentences(100, 1):
        left = list(row)
        for word in row[::-1]:
            best.append(max(left.count(w) for w in left) / len(left))
            left.remove(word)
    assert accuracy <= float(np.mean(best)) + 0.05, (accuracy, np.mean(best))


def test_alignment_error_of_the_attention_links_by_hand():
    """``vashishth.alignment_error``: each row links its target word to the source word
    of highest attention; counts pooled per sentence pair. Worked by hand:
    pair a: row 0 picks 1 (sure) -> |A∩S| 1, |A∩P| 1; row 1 picks 0 (no link, its sure
    link is 2) -> 0, 0; |A| 2, |S| 2: AER 1 - 2/4 = 0.5. Pair b: its one row picks 1, a
    word with no link; |S| 0: AER 1 - 0/1 = 1."""
    from faithbench.benchmark.core.api import Example
    from faithbench.benchmark.debate import vashishth

    weights = torch.tensor([[0.1, 0.7, 0.2], [0.5, 0.3, 0.2], [0.4, 0.6, 0.0]])
    grades = torch.tensor([[0, 2, 0], [0, 1, 2], [1, 0, 0]], dtype=torch.int8)
    mask = torch.tensor([[1, 1, 1], [1, 1, 1], [1, 1, 0]]).bool()
    batch = Batch(torch.where(mask, 5, 0), mask, ("a-0", "a-1", "b-0"),
                  prefix=torch.full((3, 1), BOS), prefix_mask=torch.ones(3, 1).bool())

    class Session:
        examples = [Example(i, ("w",) * 3, 0, extras={"sentence": i[0]})
                    for i in batch.example_ids]

        class prepared:
            class model:
                @staticmethod
                def attention(b):
                    return weights

        def batches(self, examples):
            return [(batch, torch.zeros(3), grades)]

    got = vashishth.alignment_error(Session(), ["a", "b"])
    assert got["aer_learned"] == pytest.approx([0.5, 1.0])
    # permuted: b's two weights kept (AER 1) or swapped (picks the possible link: 1 - 1/1)
    assert got["aer_permuted"][1] in (0.0, 1.0) and 0.0 <= got["aer_permuted"][0] <= 1.0
