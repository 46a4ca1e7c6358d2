"""Word-alignment data: gold sentence pairs with sure/possible links, and a parallel
corpus to train on, read from a local folder through ``datasets`` (json builder).

Layout of one language pair under ``--data-dir DIR`` (``--variant NAME`` picks
``DIR/NAME``; the Hansards copy is ``DIR/alignment``)::

    NAME/gold/test.jsonl (and optionally NAME/gold/validation.jsonl)
        {"id": 1, "src": ["le", "chat"], "tgt": ["the", "cat"],
         "sure": [[0, 0], [1, 1]], "possible": [[0, 0], [1, 1]]}
    NAME/parallel/train.jsonl (only to train the translation model)
        {"src": [...], "tgt": [...]}

Links are 0-based ``[i, j]``: ``i`` indexes ``src``, ``j`` indexes ``tgt``, and
``possible`` contains every sure link (S ⊆ P, the convention AER assumes). Tokens are
used as given (tokenize and normalise both files the same way). Every gold line is
checked before loading: bytes that are not UTF-8, an empty file, a missing field, a
token list that is empty or not a list of non-blank strings, a link that is not two
integers, sure ⊄ possible, an ``id`` the file already had, a control, bidi or
zero-width character in a token, a pair of more than ``MAX_TOKENS`` tokens (source and
target together), and — unless ``out_of_range="drop"`` — a link outside the sentence
are errors naming file, line and field. With ``"drop"`` out-of-range links are removed
(from sure and possible) and counted per split. A parallel pair over ``MAX_TOKENS`` is
left out of training and counted (``faithbench.tasks.alignment``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.tasks.data import check_jsonl, check_length, check_text, jsonl_objects

if TYPE_CHECKING:  # imported where data is read (``tasks.data``)
    import datasets

OUT_OF_RANGE = ("error", "drop")
# tokens per sentence pair, source and target together: the length cap (a row per
# target word, each explained over the source; the Hansards' longest gold pair has 58)
MAX_TOKENS = 256
GOLD_SPLITS = ("validation", "test")
Link = tuple[int, int]


@dataclass(frozen=True)
class GoldPair:
    """One gold sentence pair; links as frozensets of (source index, target index)."""

    id: str
    src: tuple[str, ...]
    tgt: tuple[str, ...]
    sure: frozenset[Link]
    possible: frozenset[Link]

    def reversed(self) -> GoldPair:
        """The same pair seen from the other side: ``tgt`` becomes the source."""
        return GoldPair(self.id, self.tgt, self.src, frozenset((j, i) for i, j in self.sure),
                        frozenset((j, i) for i, j in self.possible))


def read_gold(folder: Path, splits=GOLD_SPLITS, *, out_of_range: str = "error",
              optional: tuple[str, ...] = ()) -> tuple[dict[str, list[GoldPair]], dict[str, int]]:
    """({split: gold pairs}, {split: out-of-range links dropped}) from ``folder/<split>.jsonl``;
    a split in ``optional`` without a file is left out."""
    if out_of_range not in OUT_OF_RANGE:
        raise InputError(f"out_of_range must be one of {', '.join(OUT_OF_RANGE)}, "
                         f"got {out_of_range!r}")
    folder = Path(folder)
    pairs, dropped = {}, {}
    for split in splits:
        path = folder / f"{split}.jsonl"
        if not path.is_file() and split in optional:
            continue
        if not path.is_file():
            raise InputError(f"{path}: missing gold file for split {split!r}")
        links, dropped[split] = _check_gold(path, out_of_range)
        import datasets

        rows = datasets.load_dataset("json", data_files={split: str(path)})[split]
        pairs[split] = [GoldPair(str(r["id"]), tuple(r["src"]), tuple(r["tgt"]), sure, possible)
                        for r, (sure, possible) in zip(rows, links)]
    return pairs, dropped


def read_parallel(folder: Path) -> datasets.Dataset:
    """The parallel training corpus ``folder/train.jsonl`` (``src``, ``tgt`` token lists)."""
    path = Path(folder) / "train.jsonl"
    if not path.is_file():
        raise InputError(f"{path}: missing parallel training corpus")
    check_jsonl(path, {"src": list, "tgt": list}, labels=None, texts=("src", "tgt"))
    import datasets

    return datasets.load_dataset("json", data_files={"train": str(path)})["train"]


def _check_gold(path: Path, out_of_range: str) -> tuple[list[tuple[frozenset, frozenset]], int]:
    """Validate every line; returns each row's (sure, possible) and the links dropped."""
    out, dropped = [], 0
    seen: dict[str, int] = {}  # id -> its line
    for line, row in jsonl_objects(path):
        for name in ("id", "src", "tgt", "sure", "possible"):
            if name not in row:
                raise DataFileError(path, line, name, "missing field")
        first = seen.setdefault(str(row["id"]), line)
        if first != line:
            raise DataFileError(path, line, "id", f"{row['id']!r} already on line {first}: "
                                "each sentence pair needs its own id (it names the rows "
                                "in every result); remove or renumber one")
        for name in ("src", "tgt"):
            if not isinstance(row[name], list):
                raise DataFileError(path, line, name, "expected a non-empty list of strings")
            check_text(path, line, name, row[name])
        check_length(path, line, ("src", "tgt"), (row["src"], row["tgt"]), MAX_TOKENS)
        n_src, n_tgt = len(row["src"]), len(row["tgt"])
        sets, lost = {}, set()
        for name in ("sure", "possible"):
            sets[name], outside = _links(path, line, name, row[name], n_src, n_tgt,
                                         out_of_range)
            lost |= outside
        dropped += len(lost)  # distinct links: one in sure and possible counts once
        extra = sets["sure"] - sets["possible"]
        if extra:
            shown = ", ".join(f"[{i}, {j}]" for i, j in sorted(extra)[:5])
            raise DataFileError(path, line, "sure", f"links not in 'possible' ({shown}); "
                                "possible must contain every sure link")
        out.append((sets["sure"], sets["possible"]))
    if not out:
        raise DataFileError(path, None, None, "no rows: the file is empty")
    return out, dropped


def _links(path, line: int, name: str, value, n_src: int, n_tgt: int, out_of_range: str):
    if not isinstance(value, list):
        raise DataFileError(path, line, name, "expected a list of [i, j] links")
    links, lost = set(), set()
    for link in value:
        if (not isinstance(link, list) or len(link) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in link)):
            raise DataFileError(path, line, name, f"expected [i, j] with two integers, got {link!r}")
        i, j = link
        if not (0 <= i < n_src and 0 <= j < n_tgt):
            if out_of_range == "drop":
                lost.add((i, j))
                continue
            raise DataFileError(path, line, name,
                                f"link [{i}, {j}] is outside the sentence ({n_src} source, "
                                f"{n_tgt} target tokens; 0-based); drop such links with "
                                "out_of_range='drop'")
        links.add((i, j))
    return frozenset(links), lost
