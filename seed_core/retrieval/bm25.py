"""A BM25 index over short texts (``bm25s``), shared by Search-QA retrieval and the WebShop search box.

Texts are lower-cased, split into words, English stop words dropped and Snowball-stemmed (``PyStemmer``,
a dependency; without it bm25s skips stemming); scoring is bm25s's default BM25 (Lucene variant, k1 = 1.5, b = 0.75).
``bm25s`` is imported when an index is built, so importing this module stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from seed_core.retrieval.methods import Hit, IndexOptions, SearchIndex

def _stemmer() -> Any:
    try:
        import Stemmer  # PyStemmer, optional
    except ImportError:
        return None
    return Stemmer.Stemmer("english")


def _bm25s() -> Any:
    try:
        import bm25s
    except ImportError as err:
        raise ImportError("the BM25 index needs the `bm25s` package: pip install bm25s PyStemmer") from err
    return bm25s


class Bm25Index:
    """``search(queries, k)`` -> the ``k`` best documents per query, best first."""

    def __init__(self, texts: Sequence[str]) -> None:
        if not texts:
            raise ValueError("Bm25Index needs at least one document")
        bm25s = _bm25s()
        self._stemmer = _stemmer()
        self._size = len(texts)
        tokens = bm25s.tokenize(list(texts), stopwords="en", stemmer=self._stemmer, show_progress=False)
        self._model = bm25s.BM25()
        self._model.index(tokens, show_progress=False)

    def __len__(self) -> int:
        return self._size

    def search(self, queries: Sequence[str], k: int, *, positive_only: bool = False) -> list[list[Hit]]:
        """Top ``min(k, len(self))`` hits per query (ties: lower document index first).

        ``positive_only`` drops documents sharing no term with the query (score 0), as a search
        engine's result list would; without it, every query gets exactly ``k`` hits (Search-R1's
        retriever always returns top-k).
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if not queries:
            return []
        bm25s = _bm25s()
        k = min(k, self._size)
        tokens = bm25s.tokenize(list(queries), stopwords="en", stemmer=self._stemmer,
                                return_ids=False, show_progress=False)
        # a query with no indexed term gets an empty token list; bm25s then scores every document 0
        docs, scores = self._model.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        out: list[list[Hit]] = []
        for row_docs, row_scores in zip(docs.tolist(), scores.tolist()):
            hits = sorted((Hit(int(d), float(s)) for d, s in zip(row_docs, row_scores)),
                          key=lambda h: (-h.score, h.doc))
            out.append([h for h in hits if h.score > 0] if positive_only else hits)
        return out


def build_bm25(texts: Sequence[str], options: IndexOptions) -> SearchIndex:
    """``RETRIEVAL_METHODS["bm25"]``."""
    return Bm25Index(texts)
