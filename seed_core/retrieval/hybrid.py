"""Hybrid retrieval: BM25 and dense rankings fused by reciprocal-rank fusion (Cormack et al., 2009).

For a query, each retriever ranks its ``depth`` best documents (BM25 keeps only documents sharing
a term with the query); a document ``d`` then scores

    RRF(d) = sum_r 1 / (k + rank_r(d)),    rank_r(d) in 1, 2, ...  (k = 60)

over the rankings ``r`` that contain it (a ranking without ``d`` adds 0). The fused list is sorted by
that score, ties broken by the lower document index. Only ranks are fused, so BM25's unbounded
scores and the dense cosine need no calibration against each other.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from seed_core.retrieval.bm25 import Bm25Index
from seed_core.retrieval.dense import DenseIndex
from seed_core.retrieval.methods import Hit

if TYPE_CHECKING:  # the builder's signature (methods.py imports no index module)
    from seed_core.retrieval.methods import IndexOptions, SearchIndex

RRF_K = 60
"""The rank offset ``k`` of RRF (the paper's and Elasticsearch's default)."""


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[Hit]:
    """Fuse rankings (document indices, best first) into hits scored ``sum_r 1 / (k + rank_r(d))``."""
    if k < 0:
        raise ValueError(f"the RRF offset k must be >= 0, got {k}")
    scores: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        if len(set(ranking)) != len(ranking):
            raise ValueError(f"a ranking lists a document twice: {list(ranking)}")
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] += 1.0 / (k + rank)
    return sorted((Hit(doc, score) for doc, score in scores.items()), key=lambda h: (-h.score, h.doc))


class HybridIndex:
    """``search(queries, k)`` -> the ``k`` best documents by RRF of the BM25 and dense top-``depth``."""

    def __init__(self, texts: Sequence[str], model: str = "", *, cache_dir: Path | None = None,
                 depth: int = 100, rrf_k: int = RRF_K) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.bm25 = Bm25Index(texts)
        self.dense = DenseIndex(texts, model, cache_dir=cache_dir)
        self.depth = depth
        self.rrf_k = rrf_k

    def __len__(self) -> int:
        return len(self.bm25)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        depth = min(len(self), max(k, self.depth))
        lexical = self.bm25.search(queries, depth, positive_only=True)
        semantic = self.dense.search(queries, depth)
        return [reciprocal_rank_fusion([[h.doc for h in b], [h.doc for h in d]], self.rrf_k)[:k]
                for b, d in zip(lexical, semantic)]


def build_hybrid(texts: Sequence[str], options: IndexOptions) -> SearchIndex:
    """``RETRIEVAL_METHODS["hybrid"]``."""
    return HybridIndex(texts, options.dense_model, cache_dir=options.cache_dir)
