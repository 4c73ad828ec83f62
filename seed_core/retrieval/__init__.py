"""Retrieval for the Search-QA and WebShop environments: a BM25 index (``bm25``), a dense index
(``dense``, MiniLM + faiss), their rank fusion (``hybrid``), the registry of them by name
(``methods``), corpus files (``corpus``), retrievers over HTTP or in-process (``client``) and seed's
own Search-R1-compatible HTTP server (``server``). Heavy imports (``bm25s``; ``torch``,
``transformers``, ``faiss`` for dense and hybrid) happen when an index is built."""

from seed_core.retrieval.bm25 import Bm25Index, Hit
from seed_core.retrieval.client import HttpRetriever, LocalRetriever, RetrievalError, RetrievedDoc, Retriever
from seed_core.retrieval.corpus import Passage, make_contents, read_corpus, write_corpus
from seed_core.retrieval.dense import DenseIndex
from seed_core.retrieval.hybrid import HybridIndex, reciprocal_rank_fusion
from seed_core.retrieval.methods import RETRIEVAL_METHODS, IndexOptions, SearchIndex, build_index

__all__ = [
    "Bm25Index", "DenseIndex", "Hit", "HttpRetriever", "HybridIndex", "IndexOptions", "LocalRetriever", "Passage",
    "RETRIEVAL_METHODS", "RetrievalError", "RetrievedDoc", "Retriever", "SearchIndex", "build_index",
    "make_contents", "read_corpus", "reciprocal_rank_fusion", "write_corpus",
]
