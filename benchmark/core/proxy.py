"""A stand-in for a model: every attribute is the model's own, except what a subclass
wraps (``_wrapped``). ``isinstance(proxy, type(model))`` holds, through any number of
proxies (``__class__`` is the innermost model's). ``CountingModel`` counts an
explainer's passes; ``OnDevice`` puts the model on a device."""

from __future__ import annotations

from typing import Any


class ModelProxy:
    """Delegates to ``_inner``; a subclass lists its own fields in ``__slots__``."""

    __slots__ = ("__weakref__", "_inner")

    def __init__(self, model: Any):
        object.__setattr__(self, "_inner", model)

    def _wrapped(self, name: str, value: Any) -> Any:
        """The model's attribute ``name`` as this proxy hands it out (as it is, here)."""
        return value

    def __getattr__(self, name: str):
        if name.startswith("_") and name in _slots(type(self)):  # made without __init__
            raise AttributeError(name)
        return self._wrapped(name, getattr(self._inner, name))

    def __setattr__(self, name: str, value) -> None:
        setattr(self._inner, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._inner, name)

    @property  # type: ignore[misc]
    def __class__(self):  # the innermost model's type, through proxies of proxies
        return self._inner.__class__

    def __dir__(self):
        return dir(self._inner)

    def __repr__(self) -> str:
        return repr(self._inner)


def _slots(cls: type) -> set[str]:
    return {s for c in cls.__mro__ for s in getattr(c, "__slots__", ())}
