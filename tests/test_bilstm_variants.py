"""The BiLSTM variants of the attention debate (``--bilstm``): frozen uniform attention
(Wiegreffe & Pinter 2019), the Orthogonal and the Diversity LSTM (Mohankumar et al.
2020), each checked against what defines it, computed here independently."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from faithbench.benchmark.core.api import Batch, TaskOptions
from faithbench.benchmark.core.models.blocks import OrthogonalBiLSTMEncoder, conicity
from faithbench.benchmark.core.models.classifier import AttentionClassifier, ClassifierConfig
from faithbench.benchmark.core.models.pair_classifier import PairAttentionClassifier, PairConfig


def batch(rows=((5, 6, 7, 8), (9, 10), (11, 12, 13)), segments=None):
    width = max(map(len, rows))
    ids = torch.tensor([list(r) + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[True] * len(r) + [False] * (width - len(r)) for r in rows])
    return Batch(ids, mask, tuple(f"r{i}" for i in range(len(rows))), segments=segments)


def config(**kw):
    return ClassifierConfig(vocab_size=20, num_classes=2, embed_dim=8, hidden=6, attn_dim=5,
                            dropout=0.0, **kw)


def steps(model, b, n=5):
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    labels = torch.tensor([0, 1, 1])
    for _ in range(n):
        opt.zero_grad()
        model.training_loss(b, labels).backward()
        opt.step()


def test_uniform_attention_is_frozen_at_one_over_n():
    torch.manual_seed(0)
    model = AttentionClassifier(config(bilstm="uniform"))
    b = batch()
    scorer = {k: v.clone() for k, v in model.attn.state_dict().items()}
    encoder = {k: v.clone() for k, v in model.encoder.state_dict().items()}
    steps(model, b)
    weights = model.attention(b)
    assert weights[0].tolist() == pytest.approx([0.25] * 4)
    assert weights[1].tolist() == pytest.approx([0.5, 0.5, 0.0, 0.0])
    assert weights[2].tolist() == pytest.approx([1 / 3] * 3 + [0.0])
    # the scoring layers never move (no gradient reaches them); the encoder does
    assert all(torch.equal(v, model.attn.state_dict()[k]) for k, v in scorer.items())
    assert not all(torch.equal(v, model.encoder.state_dict()[k]) for k, v in encoder.items())


def test_uniform_attention_on_the_pair_model_is_one_over_n_per_sentence():
    torch.manual_seed(0)
    model = PairAttentionClassifier(PairConfig(vocab_size=20, num_classes=3, embed_dim=8,
                                               hidden=6, attn_dim=5, mlp_dim=5, dropout=0.0,
                                               bilstm="uniform"))
    b = batch(((5, 6, 7, 8, 9),), segments=torch.tensor([[0, 0, 0, 1, 1]]))
    weights, _ = model.attention_leaf(b)
    assert weights[0, 0].tolist() == pytest.approx([1 / 3] * 3 + [0.5, 0.5])


def test_orthogonal_states_are_orthogonal_to_the_sum_of_the_earlier_ones():
    torch.manual_seed(1)
    enc = OrthogonalBiLSTMEncoder(4, 5)
    embeds = torch.randn(2, 6, 4)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2]).bool()
    out = enc(embeds, mask).detach().numpy()
    lengths = [6, 4]
    for b, n in enumerate(lengths):
        for half, order in ((slice(0, 5), range(n)), (slice(5, 10), range(n - 1, -1, -1))):
            seen = np.zeros(5)
            for t in order:
                h = out[b, t, half]
                if np.linalg.norm(seen) > 0:
                    cosine = h @ seen / (np.linalg.norm(h) * np.linalg.norm(seen))
                    assert abs(cosine) < 1e-4, (b, t, cosine)
                seen = seen + h
        assert np.all(out[b, n:] == 0)  # padding outputs zero


def test_conicity_by_hand_and_the_diversity_loss():
    states = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]]])
    mask = torch.tensor([[True, True, False]])
    # mean of the real states (0.5, 0.5): cos with (1, 0) and (0, 1) is 1/√2 each
    assert float(conicity(states, mask)[0]) == pytest.approx(1 / np.sqrt(2))
    torch.manual_seed(2)
    model = AttentionClassifier(config(bilstm="diversity", diversity_weight=0.5))
    model.eval()
    b, labels = batch(), torch.tensor([0, 1, 1])
    plain = torch.nn.functional.cross_entropy(model.logits(b), labels)
    states = model.encoder(model.embedding(b.ids), b.mask).detach().numpy()
    hand = []
    for row, n in zip(states, b.mask.sum(1).tolist()):
        real = row[:n]
        mean = real.mean(0)
        hand.append(np.mean([abs(h @ mean) / (np.linalg.norm(h) * np.linalg.norm(mean))
                             for h in real]))
    got = float(model.training_loss(b, labels).detach())
    assert got == pytest.approx(float(plain.detach()) + 0.5 * float(np.mean(hand)), abs=1e-5)
    assert float(model.conicity(b).mean()) == pytest.approx(float(np.mean(hand)), abs=1e-5)


def test_variants_are_other_models_with_their_own_task_ids(synthetic_ready):
    """The task's own BiLSTM keeps its id and cache key; each variant gets its own, and
    the Orthogonal LSTM serves no LRP."""
    from faithbench.benchmark.core.api import LRP
    from faithbench.tasks.synthetic import TASK
    plain = TASK._setup(TaskOptions())
    assert plain.key == synthetic_ready.cache_key and plain.spec.id == synthetic_ready.spec.id
    keys = {plain.key}
    for variant in ("uniform", "orthogonal", "diversity"):
        setup = TASK._setup(TaskOptions(bilstm=variant))
        assert setup.spec.id == f"synthetic[bilstm={variant};seed=0]@1"
        keys.add(setup.key)
    assert len(keys) == 4
    assert LRP not in AttentionClassifier(config(bilstm="orthogonal")).capabilities
    assert LRP in AttentionClassifier(config()).capabilities


def test_a_variant_of_a_transformer_is_refused_by_name():
    from faithbench.benchmark.core.errors import InputError
    from faithbench.tasks.synthetic import TASK
    with pytest.raises(InputError, match="--bilstm uniform is a variant of the task's BiLSTM"):
        TASK._setup(TaskOptions(bilstm="uniform", model="transformer"))
