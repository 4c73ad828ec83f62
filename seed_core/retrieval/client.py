"""Retrievers the Search-QA environment calls: over HTTP (the Search-R1 API) or in-process.

The Search-R1 retrieval API (``search_r1/search/retrieval_server.py``), which seed's own server
(``seed_core.retrieval.server``) also speaks::

    POST <url>   {"queries": ["q1", ...], "topk": 3, "return_scores": true}
    ->           {"result": [[{"document": {"id": "...", "contents": "\\"Title\\"\\ntext"}, "score": 12.3}, ...], ...]}

(with ``return_scores: false`` each hit is the bare document). ``url`` is the full endpoint, e.g.
``http://127.0.0.1:8000/retrieve``, exactly the ``retriever.url`` of a Search-R1 launch script.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from seed_core.retrieval.corpus import Passage
from seed_core.retrieval.methods import IndexOptions, build_index


class RetrievalError(RuntimeError):
    """The retriever could not answer; the message names the URL and what to do."""


@dataclass(frozen=True)
class RetrievedDoc:
    contents: str
    score: float

    @property
    def title(self) -> str:
        return Passage("", self.contents).title

    @property
    def text(self) -> str:
        return Passage("", self.contents).text


class Retriever(Protocol):
    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDoc]]:
        """The ``topk`` best passages per query, best first."""


class LocalRetriever:
    """A built-in index (``method``: bm25, dense or hybrid, see ``seed_core.retrieval.methods``) over an
    in-memory corpus, no server (fast path for tests and single-process runs; the server wraps one too)."""

    def __init__(self, passages: Sequence[Passage], method: str = "bm25", options: IndexOptions | None = None) -> None:
        self.passages = list(passages)
        self.method = method
        self.index = build_index(method, [p.contents for p in self.passages], options)

    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDoc]]:
        return [
            [RetrievedDoc(self.passages[h.doc].contents, h.score) for h in hits]
            for hits in self.index.search(queries, topk)
        ]

    def search_payload(self, queries: Sequence[str], topk: int, return_scores: bool) -> dict[str, Any]:
        """The Search-R1 response body for ``queries`` (what the HTTP server sends back)."""
        result: list[list[Any]] = []
        for hits in self.index.search(queries, topk):
            docs = [{"id": self.passages[h.doc].id, "contents": self.passages[h.doc].contents} for h in hits]
            result.append([{"document": d, "score": h.score} for d, h in zip(docs, hits)] if return_scores else docs)
        return {"result": result}


class HttpRetriever:
    """Client of any Search-R1-compatible retrieval server (seed's own, or e5 + FAISS over wiki-18)."""

    def __init__(self, url: str, timeout_s: float = 60.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"retriever url {url!r} must start with http:// or https:// "
                             "(e.g. http://127.0.0.1:8000/retrieve)")
        self.url = url
        self.timeout_s = timeout_s

    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDoc]]:
        body = json.dumps({"queries": list(queries), "topk": topk, "return_scores": True}).encode()
        request = urllib.request.Request(self.url, data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                payload = json.loads(response.read())
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")[:500]
            raise RetrievalError(f"retrieval server {self.url} answered HTTP {err.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
            reason = getattr(err, "reason", err)
            raise RetrievalError(
                f"retrieval server {self.url} is unreachable ({reason}); start it (seed's own: "
                "`python -m seed_core.retrieval.server --corpus CORPUS.jsonl --port 8000`, or Search-R1's "
                "retrieval_launch.sh) or fix env.search_qa.retriever_url"
            ) from None
        except json.JSONDecodeError as err:
            raise RetrievalError(f"retrieval server {self.url} did not answer JSON ({err})") from None
        return self._parse(payload, len(queries))

    def _parse(self, payload: Any, expected: int) -> list[list[RetrievedDoc]]:
        rows = payload.get("result") if isinstance(payload, dict) else None
        if not isinstance(rows, list) or len(rows) != expected:
            raise RetrievalError(f"retrieval server {self.url} answered {str(payload)[:200]!r}; expected "
                                 f'{{"result": [...]}} with one list per query ({expected})')
        out: list[list[RetrievedDoc]] = []
        for row in rows:
            docs = []
            for hit in row:
                doc = hit.get("document", hit) if isinstance(hit, dict) else None
                if not isinstance(doc, dict) or "contents" not in doc:
                    raise RetrievalError(f"retrieval server {self.url} sent a hit without document.contents: "
                                         f"{str(hit)[:200]!r}")
                docs.append(RetrievedDoc(str(doc["contents"]), float(hit.get("score", 0.0))))
            out.append(docs)
        return out
