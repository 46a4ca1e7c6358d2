"""Mohankumar, Nema, Narasimhan, Khapra, Srinivasan & Ravindran (ACL 2020), "Towards
Transparent and Explainable Attention Models", after their released code
(akashkm99/Interpretable-Attention): make the LSTM's states diverse and attention
becomes more faithful. The Orthogonal LSTM (``--bilstm orthogonal``) and the Diversity
LSTM (``--bilstm diversity``, conicity weight 0.5; 0.1 on NLI) are models of their own;
this experiment reads, on whichever model the run has (vanilla or a variant):

- ``conicity``: the mean |cos| of each state with the row's mean state (their measure of
  how alike the states are; they report 0.68 vanilla, 0.20 diversity on SST);
- ``correct``: accuracy on the scored examples;
- ``comp_<explainer>``: the comprehensiveness of attention and of the saliency methods
  (``faithbench``'s metric: their paper measures faithfulness by the fraction of weights
  removed before a flip and by agreement with gradients; ``ss_multiple`` runs the first
  on the same model).

On a task whose evidence is known (the shortcut tasks, ``meta-eval``'s ground truth) it
scores only the examples that carry the planted tokens and adds, per explainer,
``precision_<explainer>``: the share of the k highest-scored tokens that are the k
planted ones (``r_precision``, meta-eval's precision@k), so attention's faithfulness
on the diverse LSTMs is also read against the truth, not only against a metric.

The claim "diversity makes attention competitive with saliency" is then the difference
comp_attention − comp_integrated_gradients (and precision_attention −
precision_integrated_gradients) on the Diversity LSTM beside the vanilla one.
"""

from __future__ import annotations

import torch

EXPLAINERS = ("attention", "gradient_x_input", "integrated_gradients")


def faithfulness(session) -> dict[str, list[float]]:
    """Per example: conicity, correctness and each explainer's comprehensiveness."""
    from faithbench.benchmark import meta_eval
    from faithbench.benchmark.runner import resolve_explainer
    from faithbench.benchmark.session import confinement
    from faithbench.metrics import get_metric

    truth = session.spec.ground_truth
    if truth:  # the examples that carry the planted tokens
        session = session.on(meta_eval.with_truth(session.examples))
    net = session.prepared.model
    conic = []
    with torch.no_grad():
        for batch, _, _ in session.batches(session.examples):
            conic += net.conicity(batch).double().tolist()
    labels = torch.tensor([e.label for e in session.examples])
    out = {"conicity": conic,
           "correct": (session.base_probs.argmax(dim=-1).cpu() == labels).double().tolist()}
    metric, precision = get_metric("comprehensiveness"), get_metric("r_precision")
    for name in EXPLAINERS:
        explained = session.explain(resolve_explainer(name, confinement(session.config)))
        out[f"comp_{name}"] = session.score(metric, explained.scores).values.tolist()
        if truth:
            out[f"precision_{name}"] = session.score(precision,
                                                     explained.scores).values.tolist()
    return out
