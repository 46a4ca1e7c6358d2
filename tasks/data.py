"""Loading task data through Hugging Face ``datasets``: from the hub by default, or
from a local directory of JSON Lines files with the hub's columns.

Local files are checked line by line first, so a malformed file gets an error
naming the file, line and field instead of an Arrow traceback: bytes that are not
UTF-8 (with their byte offset), an empty file, a missing or mistyped column, an
unknown label, a text column with no token (``texts``), a control, bidi or zero-width
character in a text (``refused_character``), an example id given twice (``unique``),
and an example longer than the task's cap (``max_tokens``: an example of 20,000 tokens
would make every erasure metric run for hours instead of a second).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from huggingface_hub import constants as hf_constants

from faithbench.benchmark.core.errors import DataFileError, InputError, NotUtf8Error
from faithbench.benchmark.core.progress import shown
from faithbench.benchmark.core.records import read_utf8

if TYPE_CHECKING:  # imported where data is read: 0.7 s that a command without data skips
    import datasets

log = logging.getLogger(__name__)

DATA_ENV = "FAITHBENCH_DATA"


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path | None:
    """``--data-dir`` wins; else ``$FAITHBENCH_DATA``; else None (the hub)."""
    value = data_dir or os.environ.get(DATA_ENV)
    return Path(value) if value else None


def jsonl_objects(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line; a line that is not UTF-8 or not a
    JSON object is an error naming the file and line (and the byte offset)."""
    offset = 0  # of the current line, from the start of the file
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise NotUtf8Error(path, lineno, offset + exc.start, raw[exc.start],
                                   exc.start + 1) from None
            offset += len(raw)
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFileError(path, lineno, None, f"not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise DataFileError(path, lineno, None, "expected a JSON object")
            yield lineno, row


def check_utf8(path: Path) -> None:
    """A file that is not UTF-8 is an error naming its line and byte offset (for the
    files read other than line by line, e.g. CSV)."""
    read_utf8(path)


def check_jsonl(path: Path, columns: dict[str, type | tuple], labels: set[int] | None,
                texts: tuple[str, ...] = (), *, unique: str | None = None,
                max_tokens: int | None = None,
                tokenize: Callable[[str], Sequence[str]] = str.split) -> int:
    """Validate a JSON Lines file; returns its row count. ``texts``: columns that must
    hold at least one token (a string that is not blank, or a non-empty list of
    non-blank strings): an empty text has nothing to explain, and fails only after
    training if let through. No string column may hold a control, bidi or zero-width
    character (``refused_character``). ``unique``: the column that names each example
    (e.g. SST-2's ``idx``), which no two lines may share. ``max_tokens``: the task's cap
    on an example's tokens, its ``texts`` together (a string counted by ``tokenize``, a
    list by its length). A file with no row is an error too."""
    rows = 0
    seen: dict[str, int] = {}  # unique column's value -> its line
    for lineno, row in jsonl_objects(path):
        for name, kind in columns.items():
            if name not in row:
                raise DataFileError(path, lineno, name, "missing column")
            if not isinstance(row[name], kind) or isinstance(row[name], bool):
                raise DataFileError(path, lineno, name,
                                    f"expected {_kind_name(kind)}, got {type(row[name]).__name__}")
            if isinstance(row[name], str) and name not in texts:
                check_characters(path, lineno, name, row[name])
        for name in texts:
            check_text(path, lineno, name, row[name])
        if labels is not None and row["label"] not in labels:
            raise DataFileError(path, lineno, "label",
                                f"unknown label {row['label']!r} (expected one of {sorted(labels)})")
        if unique is not None and row.get(unique) not in (None, ""):
            value = row[unique]
            first = seen.setdefault(str(value), lineno)
            if first != lineno:
                raise DataFileError(path, lineno, unique, f"{value!r} already on line {first}: "
                                    f"each example needs its own {unique} (it names the "
                                    "example in every result); remove or renumber one")
        if max_tokens is not None:
            check_length(path, lineno, texts, [row[n] for n in texts], max_tokens, tokenize)
        rows += 1
    if not rows:
        raise DataFileError(path, None, None, "no rows: the file is empty")
    return rows


def check_text(path: Path, line: int | None, name: str, value: str | list) -> None:
    """``value`` holds a token: a string that is not blank, or a non-empty list of
    non-blank strings; and no refused character (``refused_character``); else an error
    naming file, line and field."""
    if isinstance(value, str):
        if not value.split():
            raise DataFileError(path, line, name, "empty text (no token); remove the line "
                                "or give it text")
        check_characters(path, line, name, value)
        return
    if not value or not all(isinstance(t, str) for t in value):
        raise DataFileError(path, line, name, "expected a non-empty list of strings")
    blank = next((i for i, t in enumerate(value) if not t.strip()), None)
    if blank is not None:
        raise DataFileError(path, line, name, f"token {blank} is blank")
    if REFUSED.search("".join(value)):  # one search per line; then which token
        for i, token in enumerate(value):
            check_characters(path, line, name, token, where=f"token {i}: ")


# Refused in a data text: the C0 controls but tab, newline and carriage return; DEL and
# the C1 controls; the bidi embeddings, overrides and isolates (U+202A-U+202E,
# U+2066-U+2069), which reorder how a text is shown; the zero-width space and the byte
# order mark, which make two tokens that look the same differ. A NUL, an escape
# sequence or an override in a text reaches result files, terminals and the site. The
# joiners and direction marks (U+200C, U+200D, U+200E, U+200F) stay: Persian, the Indic
# scripts, right-to-left text and emoji need them.
REFUSED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\u202a-\u202e"
                     "\u2066-\u2069\ufeff]")


def refused_character(text: str) -> str | None:
    r"""What is wrong with the first refused character of ``text`` (``REFUSED``): its
    position (1-based), code point and kind; None if it has none.

    >>> refused_character("a\x00b"), refused_character("\u202egood"), refused_character("ok\t")
    ('character 2 is U+0000, a control character', 'character 1 is U+202E, a bidi control', None)
    """
    found = REFUSED.search(text)
    if found is None:
        return None
    c = found.group()
    kind = ("a bidi control" if "\u202a" <= c <= "\u202e" or "\u2066" <= c <= "\u2069" else
            "an invisible format character" if c in "\u200b\ufeff" else "a control character")
    return f"character {found.start() + 1} is U+{ord(c):04X}, {kind}"


def check_characters(path: Path, line: int | None, name: str, text: str, *,
                     where: str = "") -> None:
    """No refused character (``refused_character``) in ``text``; else an error naming
    file, line, field and the character."""
    problem = refused_character(text)
    if problem is not None:
        raise DataFileError(path, line, name, f"{where}{problem}; remove it (control, bidi "
                            "and zero-width characters are refused in text)")


def count_tokens(values: Sequence[str | list], tokenize: Callable[[str], Sequence[str]]
                 = str.split) -> int:
    """The tokens of an example's texts together: a string's by ``tokenize``, a list's
    its length."""
    return sum(len(tokenize(v)) if isinstance(v, str) else len(v) for v in values)


def check_length(path: Path, line: int | None, names: Sequence[str], values: Sequence,
                 cap: int, tokenize: Callable[[str], Sequence[str]] = str.split) -> None:
    """An example (its texts ``names``, ``values``) of at most ``cap`` tokens; else an
    error naming file, line, its length and the cap."""
    n = count_tokens(values, tokenize)
    if n <= cap:
        return
    field = names[0] if len(names) == 1 else None
    what = "" if field else f"{' and '.join(names)} together: "
    raise DataFileError(path, line, field, f"{what}{n:,} tokens, over this task's cap of "
                        f"{cap:,} tokens per example (docs/reference/tasks.md, Length cap); "
                        "shorten the text or remove the line")


def without_empty(rows: list[tuple[int, dict]], fields: tuple[str, ...], where: str
                  ) -> list[tuple[int, dict]]:
    """The (index, row) pairs of a hub copy whose ``fields`` all hold a token. A local
    file with an empty text is refused (``check_jsonl``); a hub copy cannot be fixed by
    its user, so its empty rows are left out and counted in the log instead."""
    kept = [(i, r) for i, r in rows if all(str(r[f]).split() for f in fields)]
    if len(kept) < len(rows):
        log.warning("%s: left out %d rows with an empty %s", where, len(rows) - len(kept),
                    " or ".join(fields))
    return kept


def _kind_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def require_files(data_dir: Path, wanted: dict[str, list[str]], task: str,
                  columns: dict) -> None:
    """Every JSON Lines file a task reads under ``data_dir`` (``wanted``: folder -> split
    names), checked before any is read: one missing (or the folder itself) is an error
    that lists what is missing and everything the task reads there, with the columns.

    >>> require_files(Path("/nonexistent"), {"sst2": ["train", "test"]}, "sentiment",
    ...               {"sentence": str, "label": int})
    Traceback (most recent call last):
    ...
    faithbench.benchmark.core.errors.InputError: --data-dir /nonexistent does not exist; \
task sentiment reads these JSON Lines files there: sst2/train.jsonl, sst2/test.jsonl (one \
object per line with the hub dataset's columns: sentence, label)
    """
    paths = [Path(folder) / f"{split}.jsonl" for folder, splits in wanted.items()
             for split in splits]
    missing = [p for p in paths if not (data_dir / p).is_file()]
    if not missing:
        return
    where = (f"--data-dir {data_dir} does not exist" if not data_dir.is_dir() else
             f"--data-dir {data_dir} lacks {', '.join(map(str, missing))}")
    raise InputError(f"{where}; task {task} reads these JSON Lines files there: "
                     f"{', '.join(map(str, paths))} (one object per line with the hub "
                     f"dataset's columns: {', '.join(columns)})")


def load_local(folder: Path, splits: list[str], columns: dict, labels: set[int] | None,
               texts: tuple[str, ...] = (), **checks) -> dict[str, datasets.Dataset]:
    """``load_dataset("json", data_files=...)`` over ``folder/<split>.jsonl`` after checking
    each file (``check_jsonl``; ``texts`` are the columns that must hold a token;
    ``checks``: its ``unique``, ``max_tokens`` and ``tokenize``)."""
    if not folder.is_dir():
        raise InputError(f"data directory {folder} does not exist (expected JSON Lines files there)")
    files = {}
    for split in splits:
        path = folder / f"{split}.jsonl"
        if not path.is_file():
            raise InputError(f"{path}: missing split file for split {split!r}")
        check_jsonl(path, columns, labels, texts, **checks)
        files[split] = str(path)
    import datasets

    with quiet():
        loaded = datasets.load_dataset("json", data_files=files)
    return {split: loaded[split] for split in splits}


READ_KEEP = 4  # tasks' data kept read in one process (``read_once``)
_READ: dict = {}


def read_once(owner, options, read: Callable):
    """``read(options)``, kept for the next call on the same data in this process: a run
    reads every task's data first, so a bad file stops it before ``--out`` is touched
    (``runner.check_data``), and the model of each seed then takes those rows instead of
    reading them again. Keyed by ``owner`` (what else the rows depend on: the task and
    its reader), the options but the model seed, and each local file's size and
    modification time under the data directory (a changed file is read again). The
    text tasks keep their own (``TextTask``). Callers copy what they change."""
    if options.dataset is not None:
        return read(options)
    folder = resolve_data_dir(options.data_dir)
    stamp = _stamp(folder)
    key = (owner, replace(options, seed=0, transform=None), str(folder), stamp)
    try:
        hash(key)
    except TypeError:  # an option that cannot key (e.g. a user's object): read every time
        return read(options)
    if stamp is None:
        return read(options)
    if key not in _READ:
        while len(_READ) >= READ_KEEP:
            _READ.pop(next(iter(_READ)))
        _READ[key] = read(options)
    return _READ[key]


def _stamp(folder: Path | None, depth: int = 3, most: int = 2000) -> tuple | None:
    """Each file's (path, size, times, inode) under ``folder``, ``depth`` levels
    down (``DIR/alignment/gold/test.jsonl``); None past ``most`` files (not kept then)."""
    if folder is None or not folder.is_dir():
        return ()
    found = []
    top = len(folder.parts)
    for root, dirs, files in os.walk(folder):
        if len(Path(root).parts) - top >= depth - 1:
            dirs.clear()
        for name in files:
            try:
                st = os.stat(os.path.join(root, name))
            except OSError:
                continue
            found.append((os.path.join(root, name), st.st_size, st.st_mtime_ns, st.st_ino,
                          st.st_ctime_ns))
            if len(found) > most:
                return None
    return tuple(sorted(found))


@contextlib.contextmanager
def quiet():
    """``datasets``' own progress bars off inside the block where faithbench draws none
    (stderr is a log: ``core.progress.shown``), so a log holds no carriage returns."""
    import datasets

    if shown() or datasets.are_progress_bars_disabled():
        yield
        return
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        datasets.enable_progress_bars()


HUB_TIMEOUT_S = 3.0


def hub_reachable(timeout: float = HUB_TIMEOUT_S) -> bool:
    """Whether the hub answers a HEAD request (any HTTP status; proxies from the
    environment apply) within ``timeout`` seconds."""
    request = urllib.request.Request(hf_constants.ENDPOINT, method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=timeout).close()
    except urllib.error.HTTPError:
        return True  # it answered
    except (OSError, ValueError):
        return False
    return True


@contextlib.contextmanager
def _offline(on: bool):
    """``datasets`` and ``huggingface_hub`` in offline mode (cache only) inside the block."""
    if not on:
        yield
        return
    import datasets

    old = datasets.config.HF_HUB_OFFLINE, hf_constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = hf_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, hf_constants.HF_HUB_OFFLINE = old


def load_hub(dataset_id: str, splits: list[str] | None, *,
             instead: str = f"--data-dir DIR (or set ${DATA_ENV}) with a local JSON Lines copy"
             ) -> dict[str, datasets.Dataset]:
    """The hub dataset's ``splits`` (None: all it has), or at once an InputError that
    says what to pass ``instead`` (default ``--data-dir``): when the hub does not answer
    a HEAD request within ``HUB_TIMEOUT_S``, ``datasets`` is put in offline mode for
    this call (a copy in its cache still loads) instead of retrying for most of a minute
    and printing every retry."""
    import datasets

    offline = datasets.config.HF_HUB_OFFLINE  # HF_HUB_OFFLINE=1 in the environment
    reachable = not offline and hub_reachable()
    try:
        with _offline(not reachable), quiet():
            loaded = datasets.load_dataset(dataset_id)
    except Exception as exc:  # noqa: BLE001 — offline machines land here; say what to do
        why = ("HF_HUB_OFFLINE is set and no cached copy loads; " if offline else
               "" if reachable else f"the hub at {hf_constants.ENDPOINT} did not answer "
               f"within {HUB_TIMEOUT_S:g} s and no cached copy loads; ")
        raise InputError(
            f"could not load hub dataset {dataset_id!r} ({why}{type(exc).__name__}: {exc}); "
            f"pass {instead}"
        ) from None
    return {split: loaded[split] for split in (loaded if splits is None else splits)}
