"""Retrieval: BM25 ranking, corpus files, the Search-R1 HTTP server (start, answer, stop) and its client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from seed_core.retrieval.bm25 import Bm25Index
from seed_core.retrieval.client import HttpRetriever, LocalRetriever, RetrievalError
from seed_core.retrieval.corpus import Passage, make_contents, read_corpus, write_corpus
from seed_core.retrieval.server import RetrievalServer

PASSAGES = [
    Passage("0", make_contents("Zorblax Quenton", "Zorblax Quenton is a poet who was born in Velmora in 1931.")),
    Passage("1", make_contents("Velmora", "Velmora is a city in Quessaria, founded in 1402.")),
    Passage("2", make_contents("Quessaria", "Quessaria is a country whose capital is Dralith.")),
]


def _post(url: str, body: object) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    corpus = write_corpus(PASSAGES, tmp_path_factory.mktemp("corpus") / "corpus.jsonl")
    srv = RetrievalServer(corpus)
    srv.start()
    yield srv
    srv.stop()


def test_bm25_ranks_the_document_with_the_rare_query_terms_first() -> None:
    index = Bm25Index([p.contents for p in PASSAGES])
    hits = index.search(["where was zorblax quenton born", "capital of quessaria"], k=2)
    assert [h.doc for h in hits[0]][0] == 0
    assert hits[1][0].doc == 2 and hits[1][0].score > hits[1][1].score
    assert len(index.search(["velmora"], k=10)[0]) == 3, "k is clamped to the corpus size"
    assert index.search(["unrelatedword"], k=3, positive_only=True) == [[]]
    with pytest.raises(ValueError, match="k must be >= 1"):
        index.search(["x"], k=0)


def test_corpus_round_trip_and_title_split(tmp_path: Path) -> None:
    path = write_corpus(PASSAGES, tmp_path / "c.jsonl")
    back = read_corpus(path)
    assert back == PASSAGES
    assert back[1].title == "Velmora" and back[1].text.startswith("Velmora is a city")
    (tmp_path / "bad.jsonl").write_text('{"id": "0", "contents": "x"}\n{"id": "1"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        read_corpus(tmp_path / "bad.jsonl")


def test_local_retriever_payload_has_the_search_r1_shape() -> None:
    payload = LocalRetriever(PASSAGES).search_payload(["velmora city"], 2, return_scores=True)
    first = payload["result"][0][0]
    assert first["document"] == {"id": "1", "contents": PASSAGES[1].contents} and first["score"] > 0
    bare = LocalRetriever(PASSAGES).search_payload(["velmora city"], 2, return_scores=False)
    assert bare["result"][0][0] == {"id": "1", "contents": PASSAGES[1].contents}


def test_server_answers_the_search_r1_request(server: RetrievalServer) -> None:
    assert server.base_url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(f"{server.base_url}/health", timeout=10) as response:
        assert json.loads(response.read()) == {"status": "ok", "documents": 3, "method": "bm25"}
    status, body = _post(server.url, {"queries": ["zorblax quenton", "quessaria capital"], "topk": 2,
                                      "return_scores": True})
    assert status == 200 and len(body["result"]) == 2 and len(body["result"][0]) == 2
    assert body["result"][0][0]["document"]["contents"] == PASSAGES[0].contents
    assert body["result"][1][0]["document"]["id"] == "2" and isinstance(body["result"][1][0]["score"], float)
    status, body = _post(server.url, {"queries": ["velmora"], "topk": 1, "return_scores": False})
    assert status == 200 and body == {"result": [[{"id": "1", "contents": PASSAGES[1].contents}]]}


def test_server_rejects_malformed_requests(server: RetrievalServer) -> None:
    status, body = _post(server.url, {"queries": "not a list", "topk": 3})
    assert status == 400 and "queries" in body["error"]
    status, body = _post(server.url, {"queries": ["x"], "topk": 0})
    assert status == 400 and "topk" in body["error"]


def test_http_client_reads_the_server(server: RetrievalServer) -> None:
    docs = HttpRetriever(server.url).retrieve(["born in velmora", "quessaria"], topk=1)
    assert [d[0].title for d in docs] == ["Zorblax Quenton", "Quessaria"]


def test_server_stops_by_pid_and_then_is_unreachable(tmp_path: Path) -> None:
    srv = RetrievalServer(write_corpus(PASSAGES, tmp_path / "c.jsonl"))
    srv.start()
    url, process = srv.url, srv.process
    assert process is not None and process.poll() is None
    srv.stop()
    assert process.poll() is not None and srv.process is None
    with pytest.raises(RetrievalError, match=r"http://127\.0\.0\.1:\d+/retrieve is unreachable"):
        HttpRetriever(url, timeout_s=2).retrieve(["velmora"], 1)
    srv.stop()  # idempotent


def test_server_that_cannot_start_reports_its_stderr(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(RuntimeError, match=r"(?s)exited with code 1.*corpus .*empty.jsonl is empty"):
        RetrievalServer(tmp_path / "empty.jsonl", startup_timeout_s=30).start()


def test_client_rejects_bad_urls_and_bad_payloads() -> None:
    with pytest.raises(ValueError, match="http://"):
        HttpRetriever("127.0.0.1:8000/retrieve")
    client = HttpRetriever("http://127.0.0.1:1/retrieve")
    with pytest.raises(RetrievalError, match="one list per query"):
        client._parse({"result": []}, expected=1)
    with pytest.raises(RetrievalError, match="without document.contents"):
        client._parse({"result": [[{"document": {"id": "0"}}]]}, expected=1)
