"""Vashishth, Upadhyay, Tomar & Faruqui (2019), "Attention Interpretability Across NLP
Tasks": does the model need its attention at all? At inference the learned weights are
replaced by uniform weights (1/n over the real tokens), by random weights (U(0, 1)
draws, normalised) or by a permutation of the learned weights, and accuracy is compared
with the learned weights'; a model trained with frozen uniform attention
(``--attention uniform``, Wiegreffe & Pinter's baseline) answers the same question at
training time. Their claim: single-sequence classification barely needs attention
(it acts as a gate), pair tasks (NLI) and translation do.

No code of theirs was released; the alterations follow the paper's description. Each
example's random and permuted weights are drawn by a generator seeded by its id.
"""

from __future__ import annotations

import numpy as np
import torch

from faithbench.benchmark.debate import ops
from faithbench.benchmark.debate.jain_wallace import row_generator

ALTERATIONS = ("learned", "uniform", "random", "permuted")


def altered(model, batch, labels: torch.Tensor) -> dict[str, list[float]]:
    """Per example and alteration: 1 where the prediction is the gold label, and (for
    the alterations) 1 where the prediction differs from the learned weights'."""
    group = ops.groups(batch)
    learned = ops.attention_of(model, batch)
    read = model.attention_readout(batch)
    weights = {
        "learned": learned,
        "uniform": ops.uniform(group, learned.dtype),
        "random": ops.random_weights(group, [row_generator(e, "vashishth random")
                                             for e in batch.example_ids]).to(learned.dtype),
        "permuted": ops.permuted(learned, group, [row_generator(e, "vashishth permuted")
                                                  for e in batch.example_ids]),
    }
    out: dict[str, list[float]] = {}
    with torch.no_grad():
        predicted = {name: read(w.unsqueeze(1)).argmax(dim=-1).cpu() for name, w in weights.items()}
    gold = labels.cpu()
    for name in ALTERATIONS:
        out[f"correct_{name}"] = (predicted[name] == gold).double().tolist()
        if name != "learned":
            out[f"changed_{name}"] = (predicted[name] != predicted["learned"]).double().tolist()
    return out


def _alterations() -> dict:
    """(weights (B, S), batch, step) -> weights, for each alteration of the decoder's
    attention at every step; random and permuted draws are seeded by the source
    sentence and the step, so a sentence's translation does not depend on its batch."""

    def gens(batch, step: int, salt: str):
        return [row_generator(f"{row.tolist()}|{step}", salt) for row in batch.ids.cpu()]

    return {
        "learned": None,
        "uniform": lambda w, batch, step: ops.uniform(ops.groups(batch), w.dtype),
        "random": lambda w, batch, step: ops.random_weights(
            ops.groups(batch), gens(batch, step, "vashishth mt random")).to(w.dtype),
        "permuted": lambda w, batch, step: ops.permuted(
            w, ops.groups(batch), gens(batch, step, "vashishth mt permuted")),
    }


def translation(prepared, pairs, alterations: tuple[str, ...] = ALTERATIONS
                ) -> dict[str, list[float]]:
    """Per sentence pair and alteration: the sentence BLEU (sacrebleu, tokens as given)
    of the greedy translation with the decoder's attention altered at every step."""
    import sacrebleu

    refs = [" ".join(p.tgt) for p in pairs]
    out: dict[str, list[float]] = {}
    for name, alter in _alterations().items():
        if name not in alterations:
            continue
        if alter is None:
            hyps = prepared.translate([p.src for p in pairs])
        else:
            with prepared.model.altered_attention(alter):
                hyps = prepared.translate([p.src for p in pairs])
        out[f"bleu_{name}"] = [sacrebleu.sentence_bleu(" ".join(h), [r], tokenize="none").score
                               for h, r in zip(hyps, refs)]
    return out


def alignment_error(session, pair_ids: list[str]) -> dict[str, list[float]]:
    """Per sentence pair: the AER (Och & Ney) of the links the learned attention draws,
    each reference word teacher-forced and linked to its highest-weighted source word,
    and of the same weights permuted within the sentence (a baseline with the learned
    weights' peakedness and no position). The other half of Vashishth et al.'s claim
    for translation: attention there is needed and also aligns. Sentence-level AER,
    averaged over pairs: the alignment board's AER pools counts over the corpus."""
    from faithbench.benchmark.core.links import chosen
    from faithbench.metrics.alignment import AER, row_counts

    net = session.prepared.model
    counts: dict[str, dict[str, np.ndarray]] = {}
    at = 0
    for batch, _, grades in session.batches(session.examples):
        rows = session.examples[at: at + len(batch)]
        at += len(batch)
        with torch.no_grad():
            learned = net.attention(batch)
        weights = {"learned": learned, "permuted": ops.permuted(
            learned, ops.groups(batch), [row_generator(e, "vashishth aer")
                                         for e in batch.example_ids])}
        for name, w in weights.items():
            stats = row_counts(chosen(w, batch.mask), grades, batch.mask).numpy()
            for row, st in zip(rows, stats):
                pair = counts.setdefault(row.extras["sentence"], {})
                pair[name] = pair.get(name, np.zeros(4)) + st
    return {f"aer_{name}": [float(AER(counts[p][name])) for p in pair_ids]
            for name in ("learned", "permuted")}
