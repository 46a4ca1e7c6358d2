"""Perturbation attributions with tokens (on a subword model: words) as features and
the task's eraser as feature removal, every model call going through the shared
perturbation engine: the building block of LIME, KernelSHAP and Shapley value
sampling (``faithbench.submissions.lime``, ``.kernel_shap``, ``.shapley_sampling``)
and of any plugin that perturbs by removing tokens (``faithbench.api.feature_attributions``).

Captum's attribution classes keep their own definitions (sampling, weighting,
fitting); what they are handed is an input of presence indicators: ``inputs`` is a
row of ones over the example's features, ``baselines`` a row of zeros, so a sample
Captum builds (input · z + baseline · (1 − z)) is the presence vector z itself, and the
forward function maps z to the example with the absent features erased and returns
the engine's probabilities. So the engine forwards each distinct variant once (a short
sentence has few: LIME's 500 draws over 5 words are at most 32 inputs) and shares
them with the metrics (the empty input, the leave-one-out variants).

Randomness. Captum draws from torch's global generator; each example's call runs
under ``torch.random.fork_rng`` seeded from that example's generator
(``example_generator``), so an example gets the same draws alone, in any batch, and
the global generator is left as it was.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from faithbench.benchmark.core.api import Batch, ExplainableModel, Target, example_generator
from faithbench.benchmark.core.erasers import check_eraser
from faithbench.benchmark.core.perturb import engine_for

# attribute(forward, inputs (1, M), baselines (1, M), target, feature_mask (1, M)) -> (1, M)
Attribute = Callable[..., torch.Tensor]


def features_of(batch: Batch, row: int) -> torch.Tensor:
    """(L,) feature index of each real token of ``row``: its word on a subword model,
    else its position (features numbered 0.. in order of appearance)."""
    n = int(batch.mask[row].sum())
    if batch.words is None:
        return torch.arange(n)
    words = batch.words[row, :n].long().cpu()
    return torch.unique(words, return_inverse=True)[1]


def example_seed(rng: torch.Generator, example_id: str) -> int:
    """The seed of one example's draws (``example_generator``'s)."""
    return example_generator(rng, example_id).initial_seed()


def feature_attributions(model: ExplainableModel, batch: Batch, target: Target,
                         rng: torch.Generator, attribute: Attribute, *,
                         eraser: str = "delete") -> torch.Tensor:
    """(B, T) scores: ``attribute``'s value of each feature, shared equally among the
    feature's tokens (a word's summed score is its value, as occlusion's is); zero at
    padding. ``attribute`` is called once per example, under that example's seed."""
    check_eraser(eraser)
    engine = engine_for(model)
    out = torch.zeros(batch.ids.shape, dtype=torch.float32)
    for b in range(len(batch)):
        feature = features_of(batch, b)  # (L,)
        n_tokens, n_features = len(feature), int(feature.max()) + 1 if len(feature) else 0
        if n_features == 0:
            continue

        def forward(presence: torch.Tensor, b=b, feature=feature) -> torch.Tensor:
            # each distinct sample once: the engine would answer a repeat from memory, but
            # erasing and keying it costs as much as a BiLSTM forward of it
            distinct, inverse = distinct_rows(presence.cpu() > 0.5)
            keep = torch.zeros(len(distinct), batch.ids.shape[1], dtype=torch.bool)
            keep[:, :len(feature)] = distinct[:, feature]
            device = batch.ids.device  # the engine erases on the batch's device
            rows = torch.full((len(distinct),), b, dtype=torch.long, device=device)
            keep = keep.to(device)
            return engine.probs_of_variants(batch, rows, keep, eraser)[inverse.to(device)]

        with torch.random.fork_rng(devices=[]):
            # the CPU generator only, where Captum's samplers draw: torch.manual_seed
            # would also queue a CUDA seeding with a recorded stack, per example
            torch.default_generator.manual_seed(example_seed(rng, batch.example_ids[b]))
            value = attribute(forward, torch.ones(1, n_features), torch.zeros(1, n_features),
                              int(target[b]), torch.arange(n_features).view(1, -1))
        value = value.reshape(-1).float()  # (M,)
        share = torch.bincount(feature, minlength=n_features).float()
        out[b, :n_tokens] = (value / share)[feature]
    return out


def distinct_rows(present: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(distinct rows of the (n, M) bool ``present``, (n,) index of each row in them).
    Up to 62 features a row is one int64 code, and a 1-d unique is ten times faster than
    ``torch.unique(dim=0)``'s lexicographic sort.

    >>> rows, inverse = distinct_rows(torch.tensor([[1, 0], [0, 1], [1, 0]], dtype=torch.bool))
    >>> rows.int().tolist(), inverse.tolist()
    ([[1, 0], [0, 1]], [0, 1, 0])
    """
    m = present.shape[1]
    if m > 62:
        return torch.unique(present, dim=0, return_inverse=True)
    codes = (present.long() << torch.arange(m)).sum(dim=1)
    unique, inverse = torch.unique(codes, return_inverse=True)
    return ((unique.unsqueeze(1) >> torch.arange(m)) & 1).bool(), inverse


def fit_surrogate(forward: Callable[[torch.Tensor], torch.Tensor], samples: torch.Tensor,
                  weights: torch.Tensor, target: int, surrogate) -> torch.Tensor:
    """(1, M) coefficients of ``surrogate`` (a Captum linear model, e.g. ``SkLearnRidge``)
    fitted to p(target) of the (n, M) presence ``samples``, weighted by ``weights`` (n,):
    the last step of Captum's ``LimeBase.attribute``, fed the same tensors it builds (so
    a sampler that draws what Captum draws gives Captum's result, with one forward call
    instead of Captum's Python loop over samples). Captum's trainer only iterates its
    data and concatenates the batches, so the one batch is handed over as a list: a
    ``DataLoader`` would index and re-collate the samples one by one."""
    outputs = forward(samples)[:, target]
    surrogate.fit([(samples.float(), outputs.float(), weights.float())])
    return surrogate.representation().reshape(1, -1)


def fit_linear(forward: Callable[[torch.Tensor], torch.Tensor], samples: torch.Tensor,
               weights: torch.Tensor, target: int, alpha: float = 0.0) -> torch.Tensor:
    """(1, M) coefficients of the weighted linear fit with an intercept that Captum's
    ``SkLearnLinearRegression`` (``alpha`` 0: least squares, the minimum-norm solution
    where the samples leave it open) or ``SkLearnRidge(alpha)`` makes of p(target) on
    the (n, M) presence ``samples``: the same problem solved directly in float64
    (centre by the weighted means, scale rows by √weight, solve), because sklearn's
    input checks cost more than the BiLSTM's forward passes of a 500-sample fit.
    ``tests/test_perturbation_explainers.py`` compares it with both sklearn fits."""
    y = forward(samples)[:, target].double().cpu().numpy()
    x = samples.double().cpu().numpy()
    w = weights.double().cpu().numpy()
    root = np.sqrt(w)
    xc = (x - w @ x / w.sum()) * root[:, None]
    yc = (y - w @ y / w.sum()) * root
    if alpha > 0:
        coef = np.linalg.solve(xc.T @ xc + alpha * np.eye(x.shape[1]), xc.T @ yc)
    else:
        coef = np.linalg.lstsq(xc, yc, rcond=None)[0]
    return torch.from_numpy(coef).float().reshape(1, -1)
