"""The id grammar, in one place: ``name[key=value;...]@version``, the same string in
records, cache keys, leaderboard columns and on the command line.

Formatting sorts the keys, leaves out parameters set to None (so adding an optional
parameter keeps existing ids), joins a tuple's values with commas and writes floats
by ``repr``. Parsing reads each value as int, float, None/True/False or a string, and
a comma-separated value as a tuple. The grammar alone cannot tell ``bins=0.5`` (a
tuple of one) from a float: the parameter's declaration (``core.params``) turns the
parsed value into the spec's, so an id parses back to the spec that wrote it.

>>> format_id("comprehensiveness", (("eraser", "mask"), ("bins", (0.1, 0.5))), "1")
'comprehensiveness[bins=0.1,0.5;eraser=mask]@1'
>>> parse_id("comprehensiveness[bins=0.1,0.5;eraser=mask]@1")
ParsedId(name='comprehensiveness', params={'bins': (0.1, 0.5), 'eraser': 'mask'}, version='1')
>>> short_name("attention[heads=max;layer=-2]@1")
'attention'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from faithbench.benchmark.core.errors import InputError

_WORDS = {"None": None, "True": True, "False": False}


@dataclass(frozen=True)
class ParsedId:
    """An id as written: the name, its parameters as parsed (not yet checked against
    a declaration), and the version if one was given."""

    name: str
    params: dict[str, Any]
    version: str | None = None


def format_value(value: Any) -> str:
    """A parameter value as ids write it.

    >>> format_value((0.1, 0.5)), format_value(0.5), format_value(None), format_value(3)
    ('0.1,0.5', '0.5', 'None', '3')
    """
    if isinstance(value, (tuple, list)):
        return ",".join(format_value(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_id(name: str, params, version: str) -> str:
    """``name[key=value;...]@version`` from (key, value) pairs; None values left out."""
    inner = ";".join(f"{k}={format_value(v)}" for k, v in sorted(params) if v is not None)
    return f"{name}[{inner}]@{version}" if inner else f"{name}@{version}"


def parse_value(text: str) -> Any:
    """One value as the grammar reads it, untyped.

    >>> parse_value("5"), parse_value("0.5"), parse_value("0.1,0.5"), parse_value("max")
    (5, 0.5, (0.1, 0.5), 'max')
    >>> parse_value("None"), parse_value("True"), parse_value("-2")
    (None, True, -2)
    """
    if "," in text:
        return tuple(parse_value(t.strip()) for t in text.split(","))
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return _WORDS.get(text, text)


def parse_id(text: str, what: str = "metric") -> ParsedId:
    """Split an id (or a name with parameters, as typed on the command line) into
    name, parameters and version; ``what`` names the thing in error messages.

    >>> parse_id("aopc_morf[k_max=5;eraser=mask]@1")
    ParsedId(name='aopc_morf', params={'k_max': 5, 'eraser': 'mask'}, version='1')
    >>> parse_id("gradient")
    ParsedId(name='gradient', params={}, version=None)
    >>> parse_id("attention[layer]", "explainer")
    Traceback (most recent call last):
    ...
    faithbench.benchmark.core.errors.InputError: explainer 'attention[layer]': parameter 'layer' is not key=value
    """
    head, at, version = text.partition("@")
    params: dict[str, Any] = {}
    if "[" in head:
        if not head.endswith("]"):
            raise InputError(f"{what} {text!r}: expected name[key=value;...]@version")
        head, inner = head[:-1].split("[", 1)
        for item in filter(None, inner.split(";")):
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise InputError(f"{what} {text!r}: parameter {item!r} is not key=value")
            if key.strip() in params:
                raise InputError(f"{what} {text!r}: parameter {key.strip()!r} given twice")
            params[key.strip()] = parse_value(value.strip())
    elif "]" in head:
        raise InputError(f"{what} {text!r}: expected name[key=value;...]@version")
    if at and not version:
        raise InputError(f"{what} {text!r}: nothing after '@' (a version, e.g. @1)")
    return ParsedId(head.strip(), params, version or None)


def short_name(text: str) -> str:
    """The name inside an id, for tables and for matching a name typed by a user.

    >>> short_name("comprehensiveness[bins=0.1,0.5;eraser=delete]@1"), short_name("aer@1")
    ('comprehensiveness', 'aer')
    """
    return text.split("[", 1)[0].split("@", 1)[0]


def distinct_labels(ids) -> dict[str, str]:
    """A short label for each id that still tells it from the others: its name where no
    other id has that name, else the name with the parameters (and version) in which
    same-named ids differ; the full id where even that is not unique.

    >>> labels = distinct_labels(["lime[n_samples=500;ridge=1.0]@1", "gradient[norm=l2]@1",
    ...                           "lime[n_samples=50;ridge=1.0]@1", "comprehensiveness@1",
    ...                           "comprehensiveness[eraser=mask]@1"])
    >>> sorted(labels.values())
    ['comprehensiveness', 'comprehensiveness[eraser=mask]', 'gradient', 'lime[n_samples=500]', \
'lime[n_samples=50]']
    """
    unique = list(dict.fromkeys(ids))
    parsed = {i: _parsed_or_none(i) for i in unique}
    by_name: dict[str, list[str]] = {}
    for i in unique:
        by_name.setdefault(short_name(i), []).append(i)
    out = {}
    for name, same in by_name.items():
        if len(same) == 1:
            out[same[0]] = name
            continue
        if any(parsed[i] is None for i in same):
            out.update({i: i for i in same})
            continue
        keys = sorted({k for i in same for k in parsed[i].params})  # type: ignore[union-attr]
        differ = [k for k in keys if len({format_value(parsed[i].params.get(k))  # type: ignore[union-attr]
                                          for i in same}) > 1]
        versions = {parsed[i].version for i in same}  # type: ignore[union-attr]
        for i in same:
            p = parsed[i]
            assert p is not None
            inner = ";".join(f"{k}={format_value(p.params[k])}" for k in differ if k in p.params)
            label = f"{name}[{inner}]" if inner else name
            out[i] = label + (f"@{p.version}" if len(versions) > 1 and p.version else "")
        labels = [out[i] for i in same]
        if len(set(labels)) < len(labels):
            out.update({i: i for i in same})
    return out


def _parsed_or_none(text: str) -> ParsedId | None:
    try:
        return parse_id(text)
    except InputError:
        return None
