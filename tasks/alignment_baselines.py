"""Reference aligners that are not explainers, so an explainer's AER has a scale:
the diagonal baseline, and eflomal (Östling & Tiedemann 2016), a Bayesian IBM-style
aligner trained on the same parallel corpus.

eflomal is unsupervised: the gold sentence pairs are aligned together with the
training pairs (as the shared task did), and only their links are kept. Its sampler
seeds itself from the clock, so two runs give slightly different links; the links are
therefore cached under a content key (data, settings, eflomal version), and every
later call reads the same links back — the number printed is the number cached.
"""

from __future__ import annotations

import json
import tempfile
from importlib.metadata import version
from pathlib import Path

from faithbench.benchmark.core.cache import cache_dir
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.files import atomic_write, content_hash
from faithbench.benchmark.core.links import SYMMETRIZE, diagonal_links, symmetrize

ALIGNERS = ("diagonal", "eflomal")
COMBINE = ("forward", "reverse", *SYMMETRIZE)  # one direction, or both combined


def diagonal(pairs) -> dict[str, list[list[int]]]:
    """{pair id: sorted [i, j] links} of the diagonal baseline."""
    return {p.id: sorted(map(list, diagonal_links(len(p.src), len(p.tgt)))) for p in pairs}


def eflomal_links(pairs, training, *, combine: str = "grow-diag-final"
                  ) -> dict[str, list[list[int]]]:
    """{pair id: sorted [i, j] links} from eflomal run on ``pairs`` + ``training``
    ((src, tgt) token tuples): one direction, or both combined by ``combine``."""
    if combine not in COMBINE:
        raise InputError(f"combine must be one of {', '.join(COMBINE)}, got {combine!r}")
    forward, reverse = _cached_directions(pairs, training)
    out = {}
    for p, fwd, rev in zip(pairs, forward, reverse):
        links = {"forward": fwd, "reverse": rev}.get(combine)
        if links is None:
            links = symmetrize(fwd, rev, len(p.src), len(p.tgt), combine)
        out[p.id] = sorted(map(list, links))
    return out


def _cached_directions(pairs, training):
    """(forward, reverse) link sets per gold pair, computed once per content key."""
    key = content_hash({"gold": [(p.id, p.src, p.tgt) for p in pairs], "train": list(training),
                        "eflomal": version("eflomal"), "settings": "default"})
    path = cache_dir() / "aligners" / f"eflomal-{key}.json"
    if path.exists():
        saved = json.loads(path.read_text())
        return ([{tuple(x) for x in links} for links in saved["forward"]],
                [{tuple(x) for x in links} for links in saved["reverse"]])
    import eflomal

    src = [" ".join(p.src) for p in pairs] + [" ".join(s) for s, _ in training]
    tgt = [" ".join(p.tgt) for p in pairs] + [" ".join(t) for _, t in training]
    with tempfile.TemporaryDirectory() as tmp:
        fwd_path, rev_path = Path(tmp) / "fwd", Path(tmp) / "rev"
        eflomal.Aligner().align(src, tgt, links_filename_fwd=str(fwd_path),
                                links_filename_rev=str(rev_path), quiet=True)
        forward = [_pharaoh(line) for line in fwd_path.read_text().splitlines()[: len(pairs)]]
        reverse = [_pharaoh(line) for line in rev_path.read_text().splitlines()[: len(pairs)]]
    text = json.dumps({"forward": [sorted(x) for x in forward],
                       "reverse": [sorted(x) for x in reverse]})
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))
    return forward, reverse


def _pharaoh(line: str) -> set[tuple[int, int]]:
    """``"0-0 1-2"`` -> {(0, 0), (1, 2)} (source index, target index)."""
    return {tuple(int(x) for x in link.split("-")) for link in line.split()}
