# ruff: noqa: N999  (the upper-case name marks the file as the one to copy)
"""TEMPLATE — copy this file to start an explainer submission.

A submission is one Python module that exposes one object named ``EXPLAINER``
with a frozen ``spec`` (an ``ExplainerSpec``) and a batched ``explain`` method.
Your module imports only ``faithbench.api`` from faithbench (plus torch, numpy, captum
or any library of your own); its tests may use ``faithbench.testing``. Load and check it
with::

    faithbench validate path/to/my_explainer.py

which imports it in a worker process (faithbench never imports a plugin itself) and
runs ``faithbench.benchmark.core.validation.run_checks``: output shape, finite values,
determinism, the same answer alone, in another order and in batches of other sizes,
time per example. A run re-checks a seeded sample of its own batches the same way in
a fresh worker, and fails the plugin on any difference.

The method below is a small working example: the L1 norm over the embedding
dimension of gradient ⊙ input, |∂ logit_target / ∂ e_t| · |e_t| summed over d.

The contract of ``explain(model, batch, target, *, rng)``:

- ``batch.ids`` (B, T) long, right-padded; ``batch.mask`` (B, T) bool, True = real
  token. NLI rows also carry ``batch.segments``; alignment rows carry the
  teacher-forced target prefix in ``batch.prefix`` / ``batch.prefix_mask`` — you
  need not look at either: hand the whole ``batch`` to the model.
- ``target`` (B,) long: the class (or next target word) to explain, an index into
  the columns of ``model.logits(batch)`` (B, C).
- Return a float tensor (B, T): higher = more important for ``target``. Values at
  padded positions are ignored (zeroed). NaN / inf at a real token, a wrong shape
  or a non-tensor is a PluginError naming your explainer and the example ids.
- Work on the whole batch at once: no Python loop over examples. A row's scores
  must not depend on the other rows or on the padding width.
- Randomness only from ``example_generator(rng, batch.example_ids[b])`` (in
  ``faithbench.api``), one generator per example: an explainer is a
  deterministic function of (model, example, seed), whatever ``deterministic`` says.
  Noise drawn once for the whole batch (``torch.randn(B, ...)``) changes an example's
  scores with its batch and fails ``validate``'s alone-vs-batch check; for Gaussian
  noise on the embeddings, ``faithbench.api.noisy_gradients`` draws it per example
  (SmoothGrad and VarGrad use it). A method that samples which words to remove
  (LIME, SHAP) runs through ``faithbench.api.feature_attributions``: it seeds each
  example's draws and forwards the variants through the shared perturbation engine.
- ``spec.name`` matches ``[a-z][a-z0-9_]{0,63}`` and may not be a reference
  explainer's name; the version and parameter values are short plain strings.
- Use only the model surface: ``logits``, ``embed``, ``logits_from_embeddings``,
  ``attention``, ``pad_id``, ``mask_id``, ``baseline_id``. The model is already in
  eval mode. Do not train it or leave gradients on its parameters: take
  gradients wrt the embeddings with ``torch.autograd.grad``, never ``.backward()``.

Try it the way ``faithbench validate`` does, on the public test helpers
(``faithbench.testing``: a tiny seeded classifier with the whole model surface, a batch
with padding, and the same checks), in your own tests too:

>>> from faithbench.testing import check_explainer, three_row_batch, tiny_classifier
>>> batch, target = three_row_batch()
>>> EXPLAINER.explain(tiny_classifier(), batch, target, rng=torch.Generator()).shape
torch.Size([3, 4])
>>> [r.check for r in check_explainer(EXPLAINER, tiny_classifier(), batch, target)
...  if not r.passed]
[]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from faithbench.api import EMBEDDINGS, GRADIENTS, Batch, ExplainableModel, ExplainerSpec, Target


@dataclass(frozen=True)  # frozen: a variant with other params is a new object, never a mutation
class MyExplainer:
    spec: ExplainerSpec = field(default_factory=lambda: ExplainerSpec(
        # lower_snake, stable: it is the leaderboard column and part of every cache key
        name="my_explainer",
        # bump whenever the scores this code returns change (a fix, a new default)
        version="1",
        # capabilities the model must offer: GRADIENTS, EMBEDDINGS, ATTENTION,
        # LAYER_ATTENTION (a Transformer's per-layer maps), LRP (``lrp_logits``: a forward
        # pass whose backward carries LRP relevance), ATTENTION_VECTORS, ATTENTION_GRADIENT,
        # VALUE_ZEROING (attention's parts; see ExplainableModel), all from api; a task
        # whose model lacks one skips this explainer instead of failing
        requires=frozenset({GRADIENTS, EMBEDDINGS}),
        # every setting that changes the scores, as (key, value) pairs; they appear in the
        # canonical id ``name[key=value;...]@version``. Leave out pure speed knobs (chunk sizes).
        params=(("reduction", "l1"),),
        # True if the same seed gives the same scores; the validator then checks it
        deterministic=True,
        # the paper(s) the method comes from; shown on the leaderboard
        citation="Shrikumar, Greenside, Shcherbina & Kundaje 2016, Not just a black box",
        # one line for the leaderboard
        description="L1 norm over the embedding dimension of gradient ⊙ input.",
        # nominal model passes per example, shown by `faithbench list` (a run measures them)
        cost="1 fwd + 1 bwd",
    ))

    def explain(self, model: ExplainableModel, batch: Batch, target: Target, *,
                rng: torch.Generator) -> torch.Tensor:
        """(B, T) scores, higher = more important for ``target``."""
        with torch.enable_grad():  # the caller may run under torch.no_grad()
            embeds = model.embed(batch).detach().requires_grad_(True)  # (B, T, D)
            logits = model.logits_from_embeddings(embeds, batch)  # (B, C)
            # rows do not interact, so one backward pass of the summed target logits
            # gives every row its own gradient
            picked = logits.gather(1, target.view(-1, 1)).sum()
            (grads,) = torch.autograd.grad(picked, embeds)  # (B, T, D); parameters untouched
        scores = (grads * embeds.detach()).abs().sum(dim=-1)  # (B, T)
        return scores.masked_fill(~batch.mask, 0.0)


EXPLAINER = MyExplainer()  # the one object the loader looks for
