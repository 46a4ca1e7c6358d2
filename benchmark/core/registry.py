"""A small registry: explicit ``add``, duplicates refused, unknown names answered
with "did you mean" (after lm-eval's registry, minus its three parallel copies)."""

import difflib
from collections.abc import Iterator
from typing import Generic, TypeVar

from faithbench.benchmark.core.errors import FaithbenchError, UnknownNameError
from faithbench.benchmark.core.ids import short_name

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        if name in self._items:
            raise FaithbenchError(f"{self.kind} {name!r} is already registered")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise unknown(self.kind, name, self._items) from None

    def __contains__(self, name: str) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def names(self) -> list[str]:
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())


def unknown(kind: str, name: str, known) -> UnknownNameError:
    """The error for a name the user typed that is not among ``known``: "did you mean"
    the closest ones, then every known name.

    >>> print(unknown("metric", "comprehensivness", ["comprehensiveness", "sufficiency"]))
    unknown metric 'comprehensivness'; did you mean 'comprehensiveness'? (known: \
comprehensiveness, sufficiency)
    """
    names = sorted(set(known))
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    # ids with parameters and versions are listed by name: one line, not a screenful
    listed = sorted({short_name(n) for n in names})
    return UnknownNameError(f"unknown {kind} {name!r}{hint} (known: {', '.join(listed)})")
