"""How metrics and reference explainers declare their settable parameters: one
``Param`` per parameter (type, choices, range, None allowed, tuple of values), read
when a name is resolved, before any model is prepared, so that a bad value stops a
run with an exit-2 error listing what can be set.

>>> bins = Param(float, low=0, high=1, low_open=True, tuple_of=True,
...              text="one or more fractions in (0, 1], comma-separated")
>>> bins.coerce(0.5), bins.accepts((0.1, 0.5)), bins.accepts((0.0,))
((0.5,), True, False)
>>> Param(str, choices=("mean", "max"), optional=True).describe()
'None | mean | max'
>>> Param(int, low=1).accepts(2.0), Param(float).accepts(2), Param(bool).accepts(1)
(False, True, False)
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any

from faithbench.benchmark.core.errors import InputError


@dataclass(frozen=True)
class Param:
    """One settable parameter. ``kind`` is bool, int, float or str; an int is a float
    too, a bool is neither (``positive_only=1`` is refused). ``text`` overrides the
    generated description where a unit or meaning helps the reader."""

    kind: type
    choices: tuple | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    optional: bool = False  # None allowed (the parameter is then left out of the id)
    tuple_of: bool = False  # one or more values; one value alone is a tuple of one
    text: str = ""

    def coerce(self, value: Any) -> Any:
        """The parsed value as the spec holds it: lists and single values of a
        ``tuple_of`` parameter become tuples. Numbers keep their type, so ids stay."""
        if isinstance(value, list):
            value = tuple(value)
        if self.tuple_of and value is not None and not isinstance(value, tuple):
            value = (value,)
        return value

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.optional
        if self.tuple_of:
            return isinstance(value, tuple) and len(value) > 0 and all(map(self._one, value))
        return self._one(value)

    def _one(self, value: Any) -> bool:
        if self.kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) \
                and math.isfinite(value)
        else:
            ok = type(value) is self.kind
        if not ok or (self.choices is not None and value not in self.choices):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def describe(self) -> str:
        if self.text:
            return self.text
        if self.choices is not None:
            words = [str(c) for c in self.choices]
        else:
            word = self.kind.__name__
            if self.low is not None or self.high is not None:
                lo = "(" if self.low_open else "["
                hi = ")" if self.high_open else "]"
                low = "-inf" if self.low is None else f"{self.low:g}"
                high = "inf" if self.high is None else f"{self.high:g}"
                word = f"{word} in {lo}{low}, {high}{hi}"
            words = [word + (", comma-separated" if self.tuple_of else "")]
        return " | ".join((["None"] if self.optional else []) + words)


def listing(declared: dict[str, Param], keys=None) -> str:
    """``key: description; ...`` for error messages (``keys`` in their order)."""
    keys = list(declared) if keys is None else list(keys)
    return "; ".join(f"{k}: {declared[k].describe()}" for k in keys) or "none"


def check(what: str, ref: str, given: dict[str, Any], declared: dict[str, Param],
          keys=None, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """``given`` (parsed from ``ref``) as declared values: every key settable, every
    value accepted; else an InputError naming the key and listing what can be set.
    A value of None is left out of the id, so it is refused where the default
    (``defaults``) is not None: the id would read as the default.

    >>> check("explainer", "x[n=2.5]", {"n": 2.5}, {"n": Param(int, low=1)})
    Traceback (most recent call last):
    ...
    faithbench.benchmark.core.errors.InputError: explainer 'x[n=2.5]': n=2.5 is not int in [1, inf] (settable: n: int in [1, inf])
    """
    keys = list(declared) if keys is None else list(keys)
    defaults = defaults or {}
    settable = listing(declared, keys)
    out = {}
    for key, value in given.items():
        if key not in keys:
            close = difflib.get_close_matches(key, keys, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InputError(f"{what} {ref!r}: no settable parameter {key!r}{hint} "
                             f"(settable: {settable})")
        value = declared[key].coerce(value)
        if not declared[key].accepts(value):
            raise InputError(f"{what} {ref!r}: {key}={value!r} is not "
                             f"{declared[key].describe()} (settable: {settable})")
        if value is None and defaults.get(key) is not None:
            raise InputError(f"{what} {ref!r}: {key} cannot be None here (its id would read "
                             f"as the default, {key}={defaults[key]!r}; settable: {settable})")
        out[key] = value
    return out
