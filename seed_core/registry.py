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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Entry:
    """A name table's entry: where its implementation is (``ref``, ``"module:attr"``) and what it declares, known
    without importing it. A table whose entries declare more subclasses it (``seed_core.registries``:
    ``LossEntry``'s coefficient, ``BackendEntry``'s abilities); ``seed_core.lineage`` reads ``keys``."""

    ref: str
    reads: tuple[str, ...] = ()
    """The params.yaml keys the implementation reads beyond its stage's common ones (dotted; a section covers its
    leaves): an input of every stage that can select it."""

    @property
    def keys(self) -> tuple[str, ...]:
        """Every config key this entry's implementation depends on (a subclass adds the ones it declares)."""
        return self.reads


class Registry(Generic[T]):
    """A named table of objects of one kind: ``table`` entries (``name -> "module:attr"`` or an ``Entry``,
    imported on first ``get``) and objects added with the ``@REG.register("name")`` decorator."""

    def __init__(self, kind: str, table: Mapping[str, str | Entry] | None = None) -> None:
        self.kind = kind
        self._entries = {name: e if isinstance(e, Entry) else Entry(e) for name, e in (table or {}).items()}
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(obj: T) -> T:
            known = self._items.get(name)
            if known is not None and known is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered to {known!r}")
            ref = self.ref(name)
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
        if name not in self._entries:
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; known {self.kind}s: {', '.join(self.names())}"
            ) from None
        obj = self._items[name] = load_ref(self._entries[name].ref)  # type: ignore[assignment]
        return obj

    def ref(self, name: str) -> str | None:
        """The table entry of ``name`` (``"module:attr"``), None for an object registered in code."""
        entry = self._entries.get(name)
        return entry.ref if entry is not None else None

    def entry(self, name: str) -> Entry:
        """What the table entry of ``name`` declares (``Entry``); an unknown name fails as ``get`` does."""
        if name not in self._entries:
            if name in self._items:
                return Entry(ref_of(self._items[name]))
            self.get(name)
        return self._entries[name]

    def names(self) -> list[str]:
        return sorted({*self._items, *self._entries})

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
