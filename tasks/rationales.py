"""Human rationales as token masks: the rules that turn SST phrase labels and e-SNLI
highlights into one bool per model token (True = in the rationale), and their loaders.

The masks become ``Example.reference``; the plausibility metrics (``faithbench.metrics.plausibility``)
score explainers against them. An all-False mask is a valid answer ("this example has
no usable rationale"): the runner skips such examples for plausibility.

SST-2 (``sst_phrase_rationale``)
--------------------------------
SST annotators gave every node of each parse tree a 5-way label (0 very negative ..
4 very positive). A token is in the rationale iff it lies inside a *minimal phrase
that is polar in the direction of the sentence label*:

1. polar in the label's direction: fine label ≤ 1 for a negative sentence (label 0),
   ≥ 3 for a positive one (label 1). This is exactly the cut that defines the SST-2
   binary label from the 5-way one (2 = neutral is dropped), so a phrase counts as
   evidence for the label by the same standard as the sentence itself. Using only
   the very polar labels (0 / 4) would leave a third of the validation sentences
   without a rationale (582 of 872 keep one, against 859) and favour longer phrases
   (mean rationale 6.5 tokens against 5.1): in validation only 18% of the polar
   leaves carry an extreme label, against 24% of the polar phrases.
2. minimal: no other such phrase lies strictly inside it, so the rationale is the
   smallest phrases that carry the sentiment. Leaves count (72% of the minimal
   phrases in validation are single words); a phrase whose polarity comes from composition ("not bad",
   positive, over a negative "bad") is kept whole, because "bad" is not polar in
   the positive direction.
3. the whole sentence is never a candidate: the root's label *is* the sentence label
   (every root agrees with it), and a rationale of every token gives every explainer
   a perfect score. A sentence with no polar phrase below the root gets all-False
   (13 of 872 validation sentences, 30 of 1,821 test sentences).

Spans are ``[start, end, fine]`` in the annotation file's tokens (end exclusive).
Three treebank leaves, all in train, hold two words joined by a no-break space
(``8\\xa01\\/2`` once, ``2\\xa01\\/2`` twice): each is a one-token span in the
file, and ``str.split`` (the sentiment task's tokenizer) makes that token two. The
rule needs no notion of leaves, only of containment, so a span of any width is
handled like any other; ``load_sst_rationales`` then spreads each annotation token's
bit over the task tokens it splits into.

e-SNLI (``esnli_highlights``)
-----------------------------
e-SNLI annotators clicked the words of premise and hypothesis that explain the
label. The CSV release marks them in ``Sentence1_marked_k`` / ``Sentence2_marked_k``
(k = annotator; only 1 in train, 1..3 in dev/test) by wrapping each highlighted word,
with any punctuation attached to it, in asterisks: ``"A *man* is *sleeping.*"``.
Older exports carry ``Sentence1_Highlighted_k`` / ``Sentence2_Highlighted_k``: the
0-based indices of the highlighted whitespace-separated words, comma-separated, or
``{}`` for none. The authors ask users to read the ``marked`` columns and ignore the
``Highlighted`` ones, so ``marked`` wins per annotator and ``Highlighted`` is a
fallback when an export has only those.

- Words are the whitespace-split words of the marked (or raw) sentence. A word is
  highlighted if it contains an asterisk or lies between an opening and a closing one
  (so a span ``*a man*`` marks both words). Asterisks are stripped and each word is
  tokenized with ``nli_tokenize``; a highlighted word marks all its tokens (``dog.``
  gives ``dog`` and ``.``). The tokens must equal the task's tokens of that sentence.
- Annotators are combined by union: a token is in the rationale if any annotator
  present highlighted it. ERASER does the same for scoring: its token-level scorer
  flattens every evidence group of an annotation into one truth mask
  (``rationale_benchmark/metrics.py``, ``PositionScoredDocument.from_results``).
- ``nli_tokenize`` is the NLI task's tokenizer (lower-cased ``\\w+|[^\\w\\s]``), defined
  here so that the rationale and the task tokenize identically; ``faithbench.tasks.nli`` imports it.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from faithbench.benchmark.core.errors import DataFileError, InputError
from faithbench.tasks.data import check_jsonl

SST_COLUMNS = {"idx": int, "tokens": list, "label": int, "spans": list}
NLI_TOKEN = re.compile(r"\w+|[^\w\s]")
ESNLI_LABELS = ("entailment", "neutral", "contradiction")
ESNLI_REQUIRED = ("pairID", "gold_label", "Sentence1", "Sentence2")
ANNOTATORS = (1, 2, 3)


class RationaleError(InputError, ValueError):
    """A rationale does not fit its sentence (bad span, index, or token mismatch)."""


# ---- SST-2 ---------------------------------------------------------------------------


def sst_phrase_rationale(
    n_tokens: int, label: int, spans: Sequence[Sequence[int]]
) -> tuple[bool, ...]:
    """(n_tokens,) mask of the minimal phrases polar in the label's direction, the root
    excluded (rules in the module docstring); all-False if there is none.

    >>> spans = [[0, 1, 2], [1, 2, 1], [0, 2, 3], [2, 3, 2], [0, 3, 3]]  # "not bad ."
    >>> sst_phrase_rationale(3, 1, spans)
    (True, True, False)
    >>> sst_phrase_rationale(3, 0, spans)
    (False, True, False)
    """
    if label not in (0, 1):
        raise RationaleError(f"SST-2 label must be 0 or 1, got {label!r}")
    candidates = []
    for span in spans:
        start, end, fine = _check_span(span, n_tokens)
        agrees = fine <= 1 if label == 0 else fine >= 3
        if agrees and (start, end) != (0, n_tokens):
            candidates.append((start, end))
    mask = [False] * n_tokens
    for start, end in candidates:
        inside = any((s, e) != (start, end) and start <= s and e <= end for s, e in candidates)
        if not inside:
            mask[start:end] = [True] * (end - start)
    return tuple(mask)


def _check_span(span, n_tokens: int) -> tuple[int, int, int]:
    if (
        not isinstance(span, (list, tuple))
        or len(span) != 3
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in span)
    ):
        raise RationaleError(f"span {span!r} is not [start, end, fine_label] of integers")
    start, end, fine = span
    if not 0 <= start < end <= n_tokens:
        raise RationaleError(f"span {span!r} is outside the sentence's {n_tokens} tokens")
    if not 0 <= fine <= 4:
        raise RationaleError(f"span {span!r} has fine label {fine}, expected 0..4")
    return start, end, fine


def load_sst_rationales(
    data_dir: Path, split: str, sentences: Mapping[int, Sequence[str]]
) -> dict[int, tuple[bool, ...]]:
    """``idx -> mask`` over the task's tokens, read from
    ``data_dir/sst_phrase_annotations/<split>.jsonl``.

    ``sentences`` maps each SST-2 ``idx`` to the task's tokens of that sentence. Each
    annotation token must split (``str.lower().split()``, the sentiment tokenizer) into
    exactly the task's tokens, in order; its bit is copied to each of them. Every
    problem is a ``DataFileError`` naming the file, line, field and idx.
    """
    path = Path(data_dir) / "sst_phrase_annotations" / f"{split}.jsonl"
    if not path.is_file():
        raise InputError(f"{path}: missing phrase-annotation file for split {split!r}")
    check_jsonl(path, SST_COLUMNS, {0, 1})
    out: dict[int, tuple[bool, ...]] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            idx = row["idx"]
            if idx in out:
                raise DataFileError(path, lineno, "idx", f"duplicate idx {idx}")
            if idx not in sentences:
                raise DataFileError(
                    path, lineno, "idx", f"idx {idx} is not an sst2 {split} sentence"
                )
            if not all(isinstance(t, str) for t in row["tokens"]):
                raise DataFileError(path, lineno, "tokens", f"idx {idx}: tokens must be strings")
            pieces = [tuple(t.lower().split()) for t in row["tokens"]]
            flat = tuple(p for piece in pieces for p in piece)
            want = tuple(sentences[idx])
            if flat != want:
                at = next(
                    (i for i, (a, b) in enumerate(zip(flat, want)) if a != b),
                    min(len(flat), len(want)),
                )
                raise DataFileError(
                    path,
                    lineno,
                    "tokens",
                    f"idx {idx}: tokens differ from the sst2 sentence at token {at} "
                    f"({flat[at : at + 3]!r} vs {want[at : at + 3]!r}; "
                    f"{len(flat)} vs {len(want)} tokens)",
                )
            try:
                mask = sst_phrase_rationale(len(row["tokens"]), row["label"], row["spans"])
            except RationaleError as exc:
                raise DataFileError(path, lineno, "spans", f"idx {idx}: {exc}") from None
            out[idx] = tuple(bit for bit, piece in zip(mask, pieces) for _ in piece)
    return out


# ---- e-SNLI --------------------------------------------------------------------------


def nli_tokenize(text: str) -> tuple[str, ...]:
    """The NLI task's tokens: lower-cased runs of word characters, and single symbols.

    >>> nli_tokenize("A man's dog, asleep.")
    ('a', 'man', "'", 's', 'dog', ',', 'asleep', '.')
    """
    return tuple(NLI_TOKEN.findall(text.lower()))


def esnli_highlights(
    row: Mapping[str, str | None],
    n_premise: int,
    n_hypothesis: int,
    premise_tokens: Sequence[str],
    hypothesis_tokens: Sequence[str],
) -> tuple[tuple[bool, ...], tuple[bool, ...]] | None:
    """(premise mask (n_premise,), hypothesis mask (n_hypothesis,)), the union over the
    annotators present, or None if the row has no highlight column at all.

    ``premise_tokens`` / ``hypothesis_tokens`` are the task's tokens of each sentence
    (``nli_tokenize``); the highlights must tokenize to exactly them. The masks are cut
    to ``n_premise`` / ``n_hypothesis`` tokens, for a task that truncates its inputs.

    >>> row = {"pairID": "p", "Sentence1": "A man sleeps.", "Sentence2": "A dog.",
    ...        "Sentence1_marked_1": "A *man* sleeps.", "Sentence2_marked_1": "A *dog.*"}
    >>> esnli_highlights(row, 4, 3, ("a", "man", "sleeps", "."), ("a", "dog", "."))
    ((False, True, False, False), (False, True, True))
    """
    found = False
    masks = []
    for sentence, n, tokens in (
        (1, n_premise, premise_tokens),
        (2, n_hypothesis, hypothesis_tokens),
    ):
        tokens = tuple(tokens)
        if not 0 <= n <= len(tokens):
            raise RationaleError(
                f"e-SNLI pair {row.get('pairID')!r}: asked for {n} tokens of "
                f"Sentence{sentence}, which has {len(tokens)}"
            )
        union = [False] * len(tokens)
        for k in ANNOTATORS:
            got = _annotator_mask(row, sentence, k, tokens)
            if got is not None:
                found = True
                union = [a or b for a, b in zip(union, got)]
        masks.append(tuple(union[:n]))
    return (masks[0], masks[1]) if found else None


def _value(row: Mapping[str, str | None], column: str) -> str | None:
    value = row.get(column)
    return value if value not in (None, "") else None


def _annotator_mask(row, sentence: int, k: int, tokens: tuple[str, ...]) -> list[bool] | None:
    """Annotator k's mask over ``tokens`` for Sentence{sentence}; None if k left no column."""
    marked_col = f"Sentence{sentence}_marked_{k}"
    index_col = f"Sentence{sentence}_Highlighted_{k}"
    if (marked := _value(row, marked_col)) is not None:
        column, words, flags = marked_col, *_marked_words(marked)
    elif (indices := _value(row, index_col)) is not None:
        column = index_col
        raw = (
            _value(row, f"Sentence{sentence}")
            or _value(row, "premise" if sentence == 1 else "hypothesis")
            or ""
        )
        words = raw.split()
        chosen = _highlight_indices(indices)
        if any(i >= len(words) for i in chosen):
            raise RationaleError(
                f"e-SNLI pair {row.get('pairID')!r}: column {index_col!r} "
                f"indexes word {max(chosen)} of a {len(words)}-word sentence"
            )
        flags = [i in chosen for i in range(len(words))]
    else:
        return None
    pieces = [nli_tokenize(w) for w in words]
    flat = tuple(t for piece in pieces for t in piece)
    if flat != tokens:
        raise RationaleError(
            f"e-SNLI pair {row.get('pairID')!r}: column {column!r} tokenizes to "
            f"{list(flat)}, but the task's tokens are {list(tokens)}"
        )
    return [flag for flag, piece in zip(flags, pieces) for _ in piece]


def _marked_words(marked: str) -> tuple[list[str], list[bool]]:
    """Words with asterisks stripped, and whether each is highlighted."""
    words, flags, inside = [], [], False
    for word in marked.split():
        flags.append(inside or "*" in word)
        inside ^= word.count("*") % 2 == 1
        words.append(word.replace("*", ""))
    if inside:
        raise RationaleError(f"unbalanced asterisks in {marked!r}")
    return words, flags


def _highlight_indices(value: str) -> set[int]:
    """``"3,7"`` / ``"{3, 7}"`` / ``"{}"`` -> word indices."""
    inner = value.strip().removeprefix("{").removesuffix("}").strip()
    if not inner:
        return set()
    try:
        out = {int(part) for part in inner.split(",")}
    except ValueError:
        raise RationaleError(f"{value!r} is not a comma-separated list of word indices") from None
    if any(i < 0 for i in out):
        raise RationaleError(f"{value!r} has a negative word index")
    return out


def load_esnli_csv(path: Path) -> list[dict[str, str]]:
    """Rows of an e-SNLI CSV (``esnli_{train,dev,test}.csv`` layout) as dicts of strings.

    Checks the header has ``pairID, gold_label, Sentence1, Sentence2``, every row has
    exactly the header's fields, ``gold_label`` is a known label, and the highlight
    columns parse; a problem is a ``DataFileError`` naming the file, line (where the
    record ends; the header is line 1) and column.
    """
    path = Path(path)
    rows = []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        for column in ESNLI_REQUIRED:
            if column not in header:
                raise DataFileError(path, 1, column, "missing column in the header")
        for row in reader:
            line = reader.line_num  # the physical line the record ends on
            if None in row:
                raise DataFileError(
                    path,
                    line,
                    None,
                    f"{len(header) + len(row[None])} fields, the header has {len(header)}",
                )
            short = [c for c in header if row[c] is None]
            if short:
                raise DataFileError(
                    path,
                    line,
                    short[0],
                    f"missing field ({len(header) - len(short)} of {len(header)})",
                )
            if row["gold_label"] not in ESNLI_LABELS:
                raise DataFileError(
                    path,
                    line,
                    "gold_label",
                    f"unknown label {row['gold_label']!r} (expected one of "
                    f"{', '.join(ESNLI_LABELS)})",
                )
            for column in header:
                if not row[column]:
                    continue
                try:
                    if "_marked_" in column:
                        _marked_words(row[column])
                    elif "_Highlighted_" in column:
                        _highlight_indices(row[column])
                except RationaleError as exc:
                    raise DataFileError(path, line, column, str(exc)) from None
            rows.append(dict(row))
    return rows
