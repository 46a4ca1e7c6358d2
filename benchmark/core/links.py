"""Word-alignment links: reading them off score matrices, the diagonal baseline,
and symmetrization of two directions. Links are (source index, target index), 0-based;
a score matrix is (T, S): row j holds the scores of the S source words for target
word j. Shared by the alignment metrics and the reference aligners."""

from __future__ import annotations

import torch

from faithbench.benchmark.core.errors import InputError

Link = tuple[int, int]
LINKS = ("argmax", "threshold")
SYMMETRIZE = ("intersect", "grow-diag-final")


def link_counts(predicted, sure, possible) -> tuple[int, int, int, int]:
    """(|A∩S|, |A∩P|, |A|, |S|) of one sentence pair."""
    a, s, p = set(predicted), set(sure), set(possible)
    return len(a & s), len(a & p), len(a), len(s)


def chosen(scores: torch.Tensor, mask: torch.Tensor, links: str = "argmax",
           fraction: float | None = None) -> torch.Tensor:
    """(N, S) bool: the source words each of N target words links to, from its (N, S)
    scores over the real source words ``mask``. ``argmax``: the highest-scoring one
    (ties to the earlier position); ``threshold``: every one scoring at least
    ``fraction`` of the row's maximum, none where that maximum is ≤ 0. ``links=None``
    is argmax (the metrics' default, left out of their ids)."""
    links = links or "argmax"
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


def diagonal_links(n_src: int, n_tgt: int) -> set[Link]:
    """The diagonal baseline: target word j links to source word floor((j + ½) · S / T),
    the source position at the same relative place in the sentence.

    >>> sorted(diagonal_links(4, 2)), sorted(diagonal_links(2, 3))
    ([(1, 0), (3, 1)], [(0, 0), (1, 1), (1, 2)])
    """
    return {(min(n_src - 1, (2 * j + 1) * n_src // (2 * n_tgt)), j) for j in range(n_tgt)}


def intersect(forward, reverse) -> set[Link]:
    return set(forward) & set(reverse)


def transpose(links) -> set[Link]:
    """Links of the reverse direction, (tgt, src), in the forward frame (src, tgt)."""
    return {(j, i) for i, j in links}


def symmetrize(forward, reverse, n_src: int, n_tgt: int, how: str) -> set[Link]:
    """Combine one pair's forward links with its reverse links by ``how``: intersect or
    grow-diag-final. ``forward``: read off the source→target model (the ``alignment``
    task, which translates the files' ``src`` into ``tgt``: target word j's scores over
    the source words give links (i, j)). ``reverse``: read off the target→source model
    (``alignment_reverse``), whose own links are (j, i), passed through ``transpose`` to
    (i, j) first. Both are in the forward frame, (source i, target j), as are the result
    and the gold; only grow-diag-final's last step tells the two apart."""
    if how == "intersect":
        return intersect(forward, reverse)
    if how == "grow-diag-final":
        return grow_diag_final(forward, reverse, n_src, n_tgt)
    raise InputError(f"unknown symmetrization {how!r}; choose one of {', '.join(SYMMETRIZE)}")


def grow_diag_final(forward, reverse, n_src: int, n_tgt: int) -> set[Link]:
    """Koehn et al.'s grow-diag-final: start from the intersection, add union links
    next to (8-neighbourhood) an aligned point while either of their words is
    unaligned, repeating until nothing changes; then add remaining union links of each
    direction whose source or target word is still unaligned.

    Direction convention. Links are (source i, target j) with ``forward`` from the
    source→target model and ``reverse`` from the target→source one, transposed
    (``symmetrize``). The grow step visits target words in order, in each its aligned
    source words in order, and tries neighbours (Δi, Δj) = (−1, 0), (0, −1), (1, 0),
    (0, 1), (−1, −1), (−1, 1), (1, −1), (1, 1). The final step adds ``forward``'s
    remaining links before ``reverse``'s, each in (j, i) order, so swapping the two
    arguments can change the result (a forward link can leave both words of a reverse
    link aligned); fast_align's ``atools -c grow-diag-final -i FORWARD -j REVERSE``
    also finishes with its first file first.

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
