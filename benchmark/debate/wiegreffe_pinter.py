"""Wiegreffe & Pinter (EMNLP 2019), "Attention is not not Explanation", after their
released code (sarahwie/attention): the baselines an attention experiment needs.

(a) ``uniform``: a model of the same architecture trained from scratch with its
    attention frozen at 1/n over the real tokens (``--bilstm uniform``: the encoder,
    embeddings and output still train), its accuracy beside the learned-attention
    model's on the same examples: where the two are alike, attention is not needed on
    the task and says little about it.
(b) ``seeds``: the expected variance of attention: per example, the JSD (nats) between
    the attention of the model of each other seed and that of the run's first seed (their
    base run), the median over those seeds (they train 8 seeds besides the base; a run
    here has as many as ``--seeds`` gives). A "very different" adversarial attention
    (Jain & Wallace) should be judged against this.

The diagnostic MLP and the adversarially trained model (their sections 4 and 5) are
not run here yet.
"""

from __future__ import annotations

import torch

from faithbench.benchmark.debate import ops


def _correct(session) -> list[float]:
    labels = torch.tensor([e.label for e in session.examples])
    return (session.base_probs.argmax(dim=-1).cpu() == labels).double().tolist()


def uniform(session, open_variant) -> dict[str, list[float]]:
    """Per example: 1 where the model is right, and 1 where the model of the same seed
    trained with frozen uniform attention is right (``open_variant("uniform")``: its
    session on the same examples)."""
    other = open_variant("uniform")
    return {"correct_learned": _correct(session), "correct_uniform_trained": _correct(other)}


def attention_rows(session) -> dict[str, list[float]]:
    """{example id: the model's attention over the row, one distribution (each
    sentence's weights halved on the NLI model, ``row_distribution``)}."""
    net = session.prepared.model
    out = {}
    with torch.no_grad():
        for batch, _, _ in session.batches(session.examples):
            weights = ops.attention_of(net, batch)
            rows = ops.row_distribution(weights.double(), ops.groups(batch))
            for b, example in enumerate(batch.example_ids):
                out[example] = rows[b][batch.mask[b]].tolist()
    return out


def seeds(session, base_session) -> dict[str, list[float]]:
    """Per example: the JSD between this model's attention and the base seed's model's."""
    mine, base = attention_rows(session), attention_rows(base_session)
    jsd = []
    for e in session.examples:
        p = torch.tensor(mine[e.id], dtype=torch.float64)
        q = torch.tensor(base[e.id], dtype=torch.float64)
        jsd.append(float(ops.jsd(p, q)))
    return {"jsd_to_base_seed": jsd}
