"""Word alignments read off explanations, and alignment error rate.

Metric card: ``aer``
--------------------
Formula (Och & Ney 2003). For each sentence pair, A is the predicted set of links
(i, j) (source position i, target position j), S the sure and P ⊇ S the possible
gold links. Over the corpus::

    precision = Σ|A ∩ P| / Σ|A|,   recall = Σ|A ∩ S| / Σ|S|,
    AER = 1 − (Σ|A ∩ S| + Σ|A ∩ P|) / (Σ|A| + Σ|S|)

Each sentence contributes its counts (|A∩S|, |A∩P|, |A|, |S|) (``link_counts``);
``AER``, ``PRECISION`` and ``RECALL`` aggregate their sums, so the bootstrap resamples
sentences and re-aggregates (``faithbench.benchmark.core.stats.corpus_bootstrap``), never
averaging per-sentence ratios.

Direction. AER lower is better; precision and recall higher. Range [0, 1]: AER 0
means every predicted link is possible and every sure link is predicted.

Reading links off scores. For one sentence pair the scores form a (T, S) matrix:
row j holds an explainer's scores of the S source words for target word j.
``argmax_links`` links each target word to its highest-scoring source word (one link
per target word; ties go to the earlier position, as everywhere in the benchmark).
``threshold_links`` keeps every source word scoring at least ``fraction`` of the
row's maximum (scale-free, so attention and gradient norms are cut alike; a row
whose maximum is ≤ 0 links nothing). Two directions (fr→en and en→fr models, both
written as (source-of-fr→en, target-of-fr→en) links) combine by ``intersect`` or
``grow_diag_final`` (Koehn, Och & Marcu 2003, as in Moses).

Citation. Och & Ney (2003), "A systematic comparison of various statistical
alignment models", Computational Linguistics 29(1); Koehn, Och & Marcu (2003),
"Statistical phrase-based translation", NAACL.

Hand-worked case. S = {(0, 0)}, P = {(0, 0), (1, 1), (1, 2)}; A = {(0, 0), (1, 1),
(2, 2)}: |A∩S| = 1, |A∩P| = 2, |A| = 3, |S| = 1, so AER = 1 − 3/4 = 0.25, precision
2/3, recall 1.

>>> counts = link_counts({(0, 0), (1, 1), (2, 2)}, {(0, 0)}, {(0, 0), (1, 1), (1, 2)})
>>> counts, float(AER(counts)), round(float(PRECISION(counts)), 4), float(RECALL(counts))
((1, 2, 3, 1), 0.25, 0.6667, 1.0)
"""

from __future__ import annotations

import torch

from faithbench.benchmark.core.api import (
    ALIGNMENT,
    Aggregation,
    MetricInput,
    MetricOutput,
    MetricSpec,
    SimpleMetric,
)
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.links import (  # noqa: F401  (re-exported: links read off scores)
    LINKS,
    argmax_links,
    chosen,
    diagonal_links,
    grow_diag_final,
    intersect,
    link_counts,
    threshold_links,
)

Link = tuple[int, int]
STATS = ("a_and_sure", "a_and_possible", "predicted", "sure")
AER = Aggregation(STATS, (1, 1, 0, 0), (0, 0, 1, 1), offset=1.0, scale=-1.0)
PRECISION = Aggregation(STATS, (0, 1, 0, 0), (0, 0, 1, 0))
RECALL = Aggregation(STATS, (1, 0, 0, 0), (0, 0, 0, 1))
CITATION = ("Och & Ney (2003). A systematic comparison of various statistical alignment "
            "models. Computational Linguistics 29(1):19-51.")


def row_counts(pick: torch.Tensor, grades: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, 4) float64: each row's (|A∩S|, |A∩P|, |A|, |S|) for its chosen source words
    ``pick`` (B, S) against its gold ``grades`` (2 sure, 1 possible only, 0 none)."""
    sure, possible = (grades == 2) & mask, (grades >= 1) & mask
    return torch.stack([(pick & sure).sum(1), (pick & possible).sum(1), pick.sum(1),
                        sure.sum(1)], dim=1).double()


def alignment_counts(inp: MetricInput, *, links: str, fraction: float | None) -> MetricOutput:
    """Per alignment row (one target word): its links read off the scores, and the
    counts (|A∩S|, |A∩P|, |A|, |S|) against the row's gold grades; the session sums
    them per sentence pair (``group_of``) before aggregating."""
    if inp.reference is None:
        raise InputError("alignment metrics need gold links: rows of examples "
                         f"{', '.join(inp.batch.example_ids[:5])} carry none")
    mask = inp.batch.mask
    stats = row_counts(chosen(inp.scores, mask, links, fraction), inp.reference, mask)
    with torch.no_grad():
        values = torch.as_tensor(AER(stats.numpy()), dtype=torch.float64)
    return MetricOutput(values, stats=stats)


def _spec(name: str, direction: str, aggregation: Aggregation) -> MetricSpec:
    # plausibility: agreement with human gold links; every row counts (an unaligned
    # target word still adds its predicted link to |A|), so no row is skipped
    return MetricSpec(name=name, version="1", direction=direction,
                      kinds=frozenset({ALIGNMENT}),
                      params=(("links", None), ("fraction", None)),  # links None: argmax
                      family="plausibility", citation=CITATION, aggregation=aggregation)


AER_METRIC = SimpleMetric(spec=_spec("aer", "lower", AER), fn=alignment_counts)
PRECISION_METRIC = SimpleMetric(spec=_spec("alignment_precision", "higher", PRECISION),
                                fn=alignment_counts)
RECALL_METRIC = SimpleMetric(spec=_spec("alignment_recall", "higher", RECALL),
                             fn=alignment_counts)
