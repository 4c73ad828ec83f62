"""Retrieval for the Search-QA and WebShop environments: a BM25 index (``bm25``), a dense index
(``dense``, MiniLM + faiss), their rank fusion (``hybrid``), built by name (``methods``; the table is
``RETRIEVAL_METHODS`` in ``seed_core.registries``), corpus files (``corpus``), retrievers over HTTP or
in-process (``client``) and seed's own Search-R1-compatible HTTP server (``server``). Heavy imports (``bm25s``;
``torch``, ``transformers``, ``faiss`` for dense and hybrid) happen when an index is built.

Import from the modules (``from seed_core.retrieval.client import LocalRetriever``): this package re-exports
nothing, since re-exporting a module that imports a sibling is an import circle through this file (importing any
retrieval module would load them all; tests/unit/test_layering.py).
"""
