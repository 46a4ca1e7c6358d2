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
sentences and re-aggregates (``benchmark.core.stats.corpus_bootstrap``), never
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

from benchmark.core.api import (
    ALIGNMENT,
    Aggregation,
    MetricInput,
    MetricOutput,
    MetricSpec,
    SimpleMetric,
)
from benchmark.core.errors import InputError

Link = tuple[int, int]
STATS = ("a_and_sure", "a_and_possible", "predicted", "sure")
AER = Aggregation(STATS, (1, 1, 0, 0), (0, 0, 1, 1), offset=1.0, scale=-1.0)
PRECISION = Aggregation(STATS, (0, 1, 0, 0), (0, 0, 1, 0))
RECALL = Aggregation(STATS, (1, 0, 0, 0), (0, 0, 0, 1))
LINKS = ("argmax", "threshold")
CITATION = ("Och & Ney (2003). A systematic comparison of various statistical alignment "
            "models. Computational Linguistics 29(1):19-51.")


def link_counts(predicted, sure, possible) -> tuple[int, int, int, int]:
    """(|A∩S|, |A∩P|, |A|, |S|) of one sentence pair."""
    a, s, p = set(predicted), set(sure), set(possible)
    return len(a & s), len(a & p), len(a), len(s)


def chosen(scores: torch.Tensor, mask: torch.Tensor, links: str = "argmax",
           fraction: float | None = None) -> torch.Tensor:
    """(N, S) bool: the source words each of N target words links to, from its (N, S)
    scores over the real source words ``mask``. ``argmax``: the highest-scoring one
    (ties to the earlier position); ``threshold``: every one scoring at least
    ``fraction`` of the row's maximum, none where that maximum is ≤ 0."""
    scores = scores.double().masked_fill(~mask, float("-inf"))
    if links == "argmax":
        pick = torch.zeros_like(mask)
        if scores.shape[1]:
            pick[torch.arange(len(scores)), scores.argmax(dim=1)] = True  # first maximum
        return pick & mask
    if links == "threshold":
        if fraction is None or not 0 < fraction <= 1:
            raise InputError(f"threshold fraction must be in (0, 1], got {fraction!r}")
        top = scores.max(dim=1, keepdim=True).values
        return (scores >= fraction * top) & (top > 0) & mask
    raise InputError(f"unknown links {links!r}; choose one of {', '.join(LINKS)}")


def _as_links(pick: torch.Tensor) -> set[Link]:
    return {(int(i), int(j)) for j, i in pick.nonzero().tolist()}


def argmax_links(scores: torch.Tensor) -> set[Link]:
    """One link per target word j to its highest-scoring source word i; ``scores`` is
    (T, S). Ties go to the earliest source position.

    >>> sorted(argmax_links(torch.tensor([[0.1, 0.9, 0.9], [0.5, 0.2, 0.1]])))
    [(0, 1), (1, 0)]
    """
    return _as_links(chosen(scores, torch.ones_like(scores, dtype=torch.bool)))


def threshold_links(scores: torch.Tensor, fraction: float) -> set[Link]:
    """Links (i, j) with scores[j, i] ≥ fraction · max_i scores[j, i] > 0.

    >>> sorted(threshold_links(torch.tensor([[0.2, 1.0, 0.6], [-1.0, -0.5, -0.2]]), 0.5))
    [(1, 0), (2, 0)]
    """
    mask = torch.ones_like(scores, dtype=torch.bool)
    return _as_links(chosen(scores, mask, "threshold", fraction))


def alignment_counts(inp: MetricInput, *, links: str, fraction: float | None) -> MetricOutput:
    """Per alignment row (one target word): its links read off the scores, and the
    counts (|A∩S|, |A∩P|, |A|, |S|) against the row's gold grades; the session sums
    them per sentence pair (``group_of``) before aggregating."""
    if inp.reference is None:
        raise InputError("alignment metrics need gold links: rows of examples "
                         f"{', '.join(inp.batch.example_ids[:5])} carry none")
    mask = inp.batch.mask
    pick = chosen(inp.scores, mask, links, fraction)
    sure = (inp.reference == 2) & mask
    possible = (inp.reference >= 1) & mask
    stats = torch.stack([(pick & sure).sum(1), (pick & possible).sum(1), pick.sum(1),
                         sure.sum(1)], dim=1).double()
    with torch.no_grad():
        values = torch.as_tensor(AER(stats.numpy()), dtype=torch.float64)
    return MetricOutput(values, stats=stats)


def diagonal_links(n_src: int, n_tgt: int) -> set[Link]:
    """The diagonal baseline: target word j links to source word floor((j + ½) · S / T),
    the source position at the same relative place in the sentence.

    >>> sorted(diagonal_links(4, 2)), sorted(diagonal_links(2, 3))
    ([(1, 0), (3, 1)], [(0, 0), (1, 1), (1, 2)])
    """
    return {(min(n_src - 1, (2 * j + 1) * n_src // (2 * n_tgt)), j) for j in range(n_tgt)}


def intersect(forward, reverse) -> set[Link]:
    return set(forward) & set(reverse)


def grow_diag_final(forward, reverse, n_src: int, n_tgt: int) -> set[Link]:
    """Koehn et al.'s grow-diag-final: start from the intersection, add union links
    next to (8-neighbourhood) an aligned point while either of their words is
    unaligned, repeating until nothing changes; then add remaining union links of each
    direction whose source or target word is still unaligned.

    Forward {(0, 0), (1, 1), (4, 3)}, reverse {(0, 0), (1, 1), (2, 1), (1, 0)}, 5 source
    and 4 target words. The intersection {(0, 0), (1, 1)} grows by (2, 1), a neighbour
    of (1, 1) whose source word 2 is unaligned; (1, 0) neighbours both but its words
    are aligned already, so it never enters; (4, 3) touches no aligned point and comes
    in at the final step (source 4 unaligned).

    >>> sorted(grow_diag_final({(0, 0), (1, 1), (4, 3)},
    ...                        {(0, 0), (1, 1), (2, 1), (1, 0)}, 5, 4))
    [(0, 0), (1, 1), (2, 1), (4, 3)]
    """
    forward, reverse = set(forward), set(reverse)
    union = forward | reverse
    links = forward & reverse
    src_done = {i for i, _ in links}
    tgt_done = {j for _, j in links}

    def add(link: Link) -> None:
        links.add(link)
        src_done.add(link[0])
        tgt_done.add(link[1])

    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    grew = True
    while grew:
        grew = False
        for j in range(n_tgt):
            for i in range(n_src):
                if (i, j) not in links:
                    continue
                for di, dj in neighbours:
                    new = (i + di, j + dj)
                    if new in union and new not in links and (
                            new[0] not in src_done or new[1] not in tgt_done):
                        add(new)
                        grew = True
    for direction in (forward, reverse):
        for j in range(n_tgt):
            for i in range(n_src):
                if (i, j) in direction and (i, j) not in links and (
                        i not in src_done or j not in tgt_done):
                    add((i, j))
    return links


def _spec(name: str, direction: str, aggregation: Aggregation) -> MetricSpec:
    # plausibility: agreement with human gold links; every row counts (an unaligned
    # target word still adds its predicted link to |A|), so no row is skipped
    return MetricSpec(name=name, version="1", direction=direction,
                      kinds=frozenset({ALIGNMENT}),
                      params=(("links", "argmax"), ("fraction", None)),
                      family="plausibility", citation=CITATION, aggregation=aggregation)


AER_METRIC = SimpleMetric(spec=_spec("aer", "lower", AER), fn=alignment_counts)
PRECISION_METRIC = SimpleMetric(spec=_spec("alignment_precision", "higher", PRECISION),
                                fn=alignment_counts)
RECALL_METRIC = SimpleMetric(spec=_spec("alignment_recall", "higher", RECALL),
                             fn=alignment_counts)
