"""One generic name -> object registry (verl ``register_adv_est`` style).

Every variable part of seed (environments, generation backends, analyzer clients, advantages,
policy losses, distillation losses, algorithms) is chosen by a registry key, never by if/elif.

A registry whose implementations live in other modules is a *name table*: ``Registry(kind, {name:
"module:attr"})`` (``seed_core.registries``). Its names are known without importing anything, so the config
loader checks a config against it cheaply; ``get`` imports an entry's module on first use. The table is also
what ``seed_core.lineage.code_closure`` reads to tell which implementation files a stage can reach: a ``REG.get(...)``
call reaches the entries its stage's config can select, not every file of the table.
"""

from __future__ import annotations

import importlib
from typing import Callable, Generic, Iterator, Mapping, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """A registry lookup failed; the message lists the known names."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


def load_ref(ref: str) -> object:
    """The object a ``"package.module:attr"`` reference names (the module is imported)."""
    module, _, attr = ref.partition(":")
    obj: object = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def ref_of(obj: object) -> str:
    """``"module:qualname"`` of a class or function (what a table entry that names it holds)."""
    return f"{getattr(obj, '__module__', '')}:{getattr(obj, '__qualname__', '')}"


class Registry(Generic[T]):
    """A named table of objects of one kind: ``table`` entries (``name -> "module:attr"``, imported on first
    ``get``) and objects added with the ``@REG.register("name")`` decorator."""

    def __init__(self, kind: str, table: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self._refs: dict[str, str] = dict(table or {})
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(obj: T) -> T:
            known = self._items.get(name)
            if known is not None and known is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered to {known!r}")
            ref = self._refs.get(name)
            if known is None and ref is not None and ref != ref_of(obj):
                raise ValueError(f"{self.kind} {name!r} is already in the table as {ref!r}, not {ref_of(obj)!r}")
            self._items[name] = obj
            return obj

        return add

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            pass
        if name not in self._refs:
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; known {self.kind}s: {', '.join(self.names())}"
            ) from None
        obj = self._items[name] = load_ref(self._refs[name])  # type: ignore[assignment]
        return obj

    def ref(self, name: str) -> str | None:
        """The table entry of ``name`` (``"module:attr"``), None for an object registered in code."""
        return self._refs.get(name)

    def names(self) -> list[str]:
        return sorted({*self._items, *self._refs})

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._refs

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
