"""A user's own dataset, read by its columns: anything ``datasets`` loads.

``--dataset`` is a JSON Lines, JSON, CSV, TSV or Parquet file, a folder of such files
(split names from the file names, as ``datasets`` reads them: ``train``, ``validation``
or ``dev``, ``test``), or a hub id. The columns: ``--text-column`` (a string, or a list
of tokens), ``--pair-column`` (the second text of a pair task), ``--label-column`` (a
string or an integer), ``--rationale-column`` (optional: token indices, or one 0/1 per
token).

Splits. The dataset's own train, validation and test splits are used where it has
them. Where some are missing, they are drawn from its largest split at random (seed
``SPLIT_SEED``), ``HELD_SHARE`` of its rows each, keeping rows with the same text
together, and the sizes are logged: a dataset of one file becomes train / validation /
test. A ``--model-path`` checkpoint is never trained here, so no train split is needed
then. A split of fewer than ``MIN_ROWS`` rows is too small for an interval worth
reporting: an error. A test row whose text also stands in the train split (the
dataset's own splits) is an error naming both rows.

Tokens: a string is cut into lower-cased runs of word characters and single symbols
(``nli_tokenize``: "A man's dog." is ``a man ' s dog .``); a list of strings is taken as
the tokens. A rationale's indices count those tokens (a pair's: the text's, then the
pair's). Labels: ``--labels a,b,c`` fixes their order; otherwise a ``ClassLabel``
column's names, else the sorted values (numbers as numbers).

Every problem is an ``InputError`` naming the dataset, split, row (1-based within the
split) and column: a missing column (with the columns there are), an empty text, a
control, bidi or zero-width character in a text (``tasks.data.refused_character``), an
example of more than ``MAX_TOKENS`` tokens (its text and pair together), a label outside
the mapping, a rationale index outside the text. Example ids are ``<split>-<row>``, so
no two can be the same.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from faithbench.benchmark.core.api import DatasetOptions, Example
from faithbench.benchmark.core.errors import InputError
from faithbench.tasks.data import check_utf8, jsonl_objects, load_hub, quiet, refused_character
from faithbench.tasks.rationales import nli_tokenize

log = logging.getLogger(__name__)

BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".tsv": "csv",
            ".parquet": "parquet"}
SPLIT_NAMES = {"train": "train", "validation": "validation", "valid": "validation",
               "dev": "validation", "val": "validation", "test": "test"}
SPLIT_SEED = 0
HELD_SHARE = 0.1  # of the largest split, for each split drawn from it
MIN_ROWS = 20  # rows a split needs: fewer give no interval worth reporting
RATIONALE_KINDS = ("human", "planted")
MAX_TOKENS = 512  # per example, text and pair together: the length cap (tasks.md)


@dataclass(frozen=True)
class OwnData:
    """The dataset as examples: splits, label names in output order, where each split
    came from (its own, or drawn from another), and whether examples carry rationales."""

    splits: dict[str, list[Example]]
    labels: tuple[str, ...]
    origin: dict[str, str]
    has_rationale: bool


def read_dataset(options: DatasetOptions, *, train: bool = True) -> OwnData:
    """The dataset ``options`` names, checked row by row (see the module docstring);
    ``train``: whether a train split is needed (not for a ``--model-path`` checkpoint)."""
    if options.rationale_kind not in RATIONALE_KINDS:
        raise InputError(f"--rationale-kind {options.rationale_kind!r}: choose "
                         f"{' or '.join(RATIONALE_KINDS)}")
    raw = load_source(options.source)
    tables = {SPLIT_NAMES[name.lower()]: rows for name, rows in raw.items()
              if name.lower() in SPLIT_NAMES}
    if not tables:
        raise InputError(f"--dataset {options.source}: its splits are "
                         f"{', '.join(raw)}; expected train, validation (or dev) and test, or "
                         "one file that faithbench splits itself")
    for name in sorted(set(raw) - {n for n in raw if n.lower() in SPLIT_NAMES}):
        log.warning("--dataset %s: split %r is not train, validation or test; not read",
                    options.source, name)
    columns = [c for c in (options.text, options.pair, options.label, options.rationale) if c]
    for split, table in tables.items():
        have = list(table.column_names)
        for column in columns:
            if column not in have:
                close = difflib.get_close_matches(column, have, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise InputError(f"--dataset {options.source} ({split} split): no column "
                                 f"{column!r}{hint} (its columns: {', '.join(have)})")
    names = label_names(options, tables)
    index = {name: i for i, name in enumerate(names)}
    rows = {split: [_example(options, split, i, row, index) for i, row in enumerate(table)]
            for split, table in tables.items()}
    mask = _rationale_is_mask(rows)
    splits = {split: [_with_rationale(options, split, i, e, r, mask)
                      for i, (e, r) in enumerate(found)] for split, found in rows.items()}
    splits, origin = complete(options.source, splits, train=train)
    check_overlap(options.source, splits, origin)
    return OwnData(splits, names, origin, options.rationale is not None)


def load_source(source: str) -> dict[str, Any]:
    """Every split ``datasets`` finds in ``source``: a file, a folder, or a hub id. A
    JSON Lines or CSV file is checked first (JSON per line, UTF-8), so a bad line is
    named instead of an Arrow traceback."""
    path = Path(source).expanduser()
    import datasets

    if path.is_file():
        builder = BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise InputError(f"--dataset {source}: unknown file type {path.suffix!r}; give a "
                             f"{', '.join(BUILDERS)} file, a folder of them, or a hub id")
        _precheck(path)
        extra = {"delimiter": "\t"} if path.suffix.lower() == ".tsv" else {}
        return dict(_loaded(source, lambda: datasets.load_dataset(
            builder, data_files={"train": str(path)}, **extra)))
    if path.is_dir():
        files = [p for p in sorted(path.iterdir()) if p.suffix.lower() in BUILDERS]
        if not files:
            raise InputError(f"--dataset {source}: the folder holds no {', '.join(BUILDERS)} "
                             "file (expected e.g. train.csv, validation.csv, test.csv)")
        for f in files:
            _precheck(f)
        return dict(_loaded(source, lambda: datasets.load_dataset(str(path))))
    if source.startswith((".", "/", "~")) or path.suffix.lower() in BUILDERS:
        raise InputError(f"--dataset {source}: no such file or folder")
    return load_hub(source, None, instead="--dataset FILE or FOLDER with a local copy")


def _loaded(source: str, load):
    try:
        with quiet():
            return load()
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 — Arrow and fsspec errors: say which dataset
        raise InputError(f"--dataset {source}: datasets could not read it "
                         f"({type(exc).__name__}: {exc})") from None


def _precheck(path: Path) -> None:
    if path.suffix.lower() == ".jsonl":
        for _ in jsonl_objects(path):
            pass
    elif path.suffix.lower() in (".csv", ".tsv"):
        check_utf8(path)


def label_names(options: DatasetOptions, tables: dict) -> tuple[str, ...]:
    """The labels in output order: ``--labels``; else a ``ClassLabel``'s names; else
    the sorted distinct values (numbers numerically).

    >>> import datasets
    >>> t = datasets.Dataset.from_dict({"text": ["a", "b", "c"], "y": [10, 2, 10]})
    >>> label_names(DatasetOptions("d", "text", "y"), {"train": t})
    ('2', '10')
    """
    if options.labels:
        if len(set(options.labels)) != len(options.labels):
            raise InputError(f"--labels {','.join(options.labels)}: a label is given twice")
        return tuple(options.labels)
    feature = next(iter(tables.values())).features.get(options.label)
    if getattr(feature, "names", None):
        return tuple(str(n) for n in feature.names)
    values = {v for t in tables.values() for v in map(_label, t[options.label]) if v is not None}
    numbers = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    ordered = sorted(values, key=lambda v: (v, "") if numbers else (0, str(v)))
    if len(ordered) < 2:
        raise InputError(f"--dataset {options.source}: column {options.label!r} holds "
                         f"{len(ordered)} distinct label(s); a classifier needs at least 2")
    return tuple(str(v) for v in ordered)


def _label(value):
    """A label cell as a label: a missing one (None, an empty cell: NaN in a numeric CSV
    column) None, a whole float (a numeric column with a gap) an integer.

    >>> _label(1.0), _label(float("nan")), _label("pos"), _label(True)
    (1, None, 'pos', True)
    """
    if isinstance(value, float):
        return None if math.isnan(value) else int(value) if value.is_integer() else value
    return value


def _where(options: DatasetOptions, split: str, i: int, column: str) -> str:
    return f"--dataset {options.source} ({split} split), row {i + 1}, column {column!r}"


def _tokens(options: DatasetOptions, split: str, i: int, column: str, value) -> tuple[str, ...]:
    if isinstance(value, str):
        texts = [value]
        tokens = nli_tokenize(value)
    elif isinstance(value, (list, tuple)) and all(isinstance(t, str) for t in value):
        texts = list(value)
        tokens = tuple(t for t in value if t.strip())
    else:
        raise InputError(f"{_where(options, split, i, column)}: expected text or a list of "
                         f"tokens, got {type(value).__name__}")
    for k, text in enumerate(texts):
        problem = refused_character(text)
        if problem is not None:
            token = f"token {k}: " if isinstance(value, (list, tuple)) else ""
            raise InputError(f"{_where(options, split, i, column)}: {token}{problem}; remove it "
                             "(control, bidi and zero-width characters are refused in text)")
    if not tokens:
        raise InputError(f"{_where(options, split, i, column)}: empty text (no token); "
                         "remove the row or give it text")
    return tokens


def _example(options: DatasetOptions, split: str, i: int, row: dict, index: dict[str, int]
             ) -> tuple[Example, Any]:
    """The row as an example (no rationale yet) and its raw rationale value."""
    text = _tokens(options, split, i, options.text, row[options.text])
    label = _label(row[options.label])
    key = None if label is None else str(label)
    if key not in index:
        raise InputError(f"{_where(options, split, i, str(options.label))}: label {label!r} is not "
                         f"one of {', '.join(index)}"
                         + (" (--labels)" if options.labels else ""))
    if options.pair is None:
        example = Example(f"{split}-{i}", text, index[key])
    else:
        pair = _tokens(options, split, i, options.pair, row[options.pair])
        example = Example(f"{split}-{i}", text + pair, index[key],
                          segments=(0,) * len(text) + (1,) * len(pair))
    if len(example.tokens) > MAX_TOKENS:
        where = (_where(options, split, i, options.text) if options.pair is None else
                 f"{_where(options, split, i, options.text)} and {options.pair!r} together")
        raise InputError(f"{where}: {len(example.tokens):,} "
                         f"tokens, over this task's cap of {MAX_TOKENS:,} tokens per example "
                         "(docs/reference/tasks.md, Length cap); shorten the text or remove "
                         "the row")
    return example, (_as_list(row[options.rationale]) if options.rationale else None)


def _as_list(value):
    """A rationale cell as a list: a list as it is; text (a CSV cell) as JSON
    (``[3, 7]``) or integers apart by spaces or commas (``3 7``, ``0,1,1,0``); an empty
    cell as None (no rationale).

    >>> _as_list("[3, 7]"), _as_list("0 1 1"), _as_list("4,5"), _as_list("  ")
    ([3, 7], [0, 1, 1], [4, 5], None)
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return None
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return value
    parts = text.replace(",", " ").split()
    return [int(p) for p in parts] if all(p.lstrip("-").isdigit() for p in parts) else value


def _rationale_is_mask(rows: dict[str, list[tuple[Example, Any]]]) -> bool:
    """Whether the rationale column holds masks (one 0/1 per token, in every row that
    has one) rather than token indices: decided over the whole dataset, so a short row
    whose indices happen to look like a mask is read like its neighbours."""
    given = [(e, r) for found in rows.values() for e, r in found if r is not None]
    return bool(given) and all(
        isinstance(r, (list, tuple)) and len(r) == len(e.tokens)
        and all(v in (0, 1) for v in r) for e, r in given)


def _with_rationale(options: DatasetOptions, split: str, i: int, example: Example, raw,
                    mask: bool) -> Example:
    if options.rationale is None or raw is None:
        return example
    where = _where(options, split, i, options.rationale)
    if not isinstance(raw, (list, tuple)) or not all(
            isinstance(v, (int, bool)) for v in raw):
        raise InputError(f"{where}: expected a list of token indices or a 0/1 mask, got "
                         f"{raw!r}")
    n = len(example.tokens)
    if mask:
        return replace(example, reference=tuple(bool(v) for v in raw))
    outside = [v for v in raw if not 0 <= int(v) < n]
    if outside:
        raise InputError(f"{where}: token index {outside[0]} is outside the text's {n} tokens "
                         f"({' '.join(example.tokens[:12])}{' ...' if n > 12 else ''})")
    chosen = {int(v) for v in raw}
    return replace(example, reference=tuple(t in chosen for t in range(n)))


def complete(source: str, splits: dict[str, list[Example]], *, train: bool = True
             ) -> tuple[dict[str, list[Example]], dict[str, str]]:
    """Every split the task needs (test, validation, and train unless ``train`` is
    False), the missing ones drawn from the largest split present; and where each came
    from ("its own" or "drawn from <split>")."""
    needed = ["test", "validation"] + (["train"] if train else [])
    origin = {s: "its own" for s in splits}
    missing = [s for s in needed if s not in splits]
    if missing:
        donor = max(splits, key=lambda s: (len(splits[s]), s == "train"))
        drawn = _draw(source, donor, splits[donor], missing)
        splits = {**splits, **drawn}
        origin.update({s: "its own" if s == donor else f"drawn from {donor}" for s in drawn})
        log.warning("--dataset %s: no %s split; drawn at random (seed %d) from its %s split: "
                    "%s", source, " or ".join(missing), SPLIT_SEED, donor,
                    ", ".join(f"{s} {len(splits[s]):,}" for s in ("train", "validation", "test")
                              if s in splits))
    for split in needed:
        if len(splits[split]) < MIN_ROWS:
            raise InputError(f"--dataset {source}: its {split} split has {len(splits[split])} "
                             f"rows; at least {MIN_ROWS} are needed for an interval worth "
                             f"reporting (a dataset split here needs {int(MIN_ROWS / HELD_SHARE)}"
                             " rows or more)")
    return {s: splits[s] for s in needed}, origin


def _draw(source: str, donor: str, rows: list[Example], missing: list[str]
          ) -> dict[str, list[Example]]:
    """The ``missing`` splits drawn from the ``donor`` split's ``rows`` by
    ``random.Random(SPLIT_SEED)``, rows with the same text kept together: validation
    and test get ``HELD_SHARE`` of the rows each; what is left is train where train is
    missing (the donor, a split the task needs, keeps its share too), else the donor.

    >>> rows = [Example(f"test-{i}", (f"w{i}",), i % 2) for i in range(100)]
    >>> {k: len(v) for k, v in _draw("d", "test", rows, ["train", "validation"]).items()}
    {'validation': 10, 'test': 10, 'train': 80}
    """
    groups: dict[tuple, list[Example]] = {}
    position = {id(e): i for i, e in enumerate(rows)}
    for e in rows:
        groups.setdefault((e.tokens, e.segments), []).append(e)
    keys = list(groups)
    random.Random(SPLIT_SEED).shuffle(keys)
    held = [m for m in missing if m != "train"]
    rest = donor
    if "train" in missing:
        rest = "train"
        if donor in ("validation", "test"):
            held.append(donor)
    share = max(1, round(HELD_SHARE * len(rows)))
    out: dict[str, list[Example]] = {}
    taken = 0
    for split in held:
        chosen: list[Example] = []
        while taken < len(keys) and len(chosen) < share:
            chosen += groups[keys[taken]]
            taken += 1
        out[split] = chosen
    out[rest] = [e for k in keys[taken:] for e in groups[k]]
    return {split: [_renamed(e, split, donor) for e in sorted(found, key=lambda e: position[id(e)])]
            for split, found in out.items()}


def _renamed(example: Example, split: str, donor: str) -> Example:
    """An example drawn into another split keeps its row number under a neutral prefix
    (``row-17``), so an id never names a split it is not in."""
    return example if split == donor else replace(example, id=f"row-{_row(example) - 1}")


def check_overlap(source: str, splits: dict[str, list[Example]], origin: dict[str, str]) -> None:
    """A test row whose text (and pair) is also in train: an error naming both rows. Only
    where the test split is the dataset's own (a drawn one keeps equal texts together)."""
    if origin.get("test") != "its own" or "train" not in splits:
        return
    train = {(e.tokens, e.segments): e for e in splits["train"]}
    for e in splits["test"]:
        twin = train.get((e.tokens, e.segments))
        if twin is not None:
            raise InputError(f"--dataset {source}: test split row {_row(e)} has the same text as "
                             f"train split row {_row(twin)} ({' '.join(e.tokens[:8])}"
                             f"{' ...' if len(e.tokens) > 8 else ''}): a test split that "
                             "overlaps train scores memorised rows; remove one of them")


def _row(example: Example) -> int:
    """The 1-based row of an example in its source split (its id ends in the index)."""
    return int(example.id.rsplit("-", 1)[1]) + 1
