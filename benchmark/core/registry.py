"""A small registry: explicit ``add``, duplicates refused, unknown names answered
with "did you mean" (after lm-eval's registry, minus its three parallel copies)."""

import difflib
from collections.abc import Iterator
from typing import Generic, TypeVar

from faithbench.benchmark.core.errors import FaithbenchError, UnknownNameError

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
            close = difflib.get_close_matches(name, self._items, n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            known = ", ".join(sorted(self._items))
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}{hint} (known: {known})"
            ) from None

    def __contains__(self, name: str) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def names(self) -> list[str]:
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())
