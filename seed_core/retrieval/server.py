"""seed's retrieval server: a built-in index over a corpus jsonl behind the Search-R1 HTTP API, on 127.0.0.1 only.

    python -m seed_core.retrieval.server --corpus data/search_qa/corpus.jsonl [--port 8000] \
        [--method bm25|dense|hybrid] [--dense-model DIR]

Routes: ``POST /retrieve`` (Search-R1 request and response shapes, see ``seed_core.retrieval.client``)
and ``GET /health`` (``{"status": "ok", "documents": N, "method": "bm25"}``). Dense and hybrid cache the
passage embeddings next to the corpus (``seed_core.retrieval.dense``). ``--port 0`` picks a free port. Once the
index is built and the socket bound, the process prints one line ``SEED_RETRIEVAL_READY <url>``.

``RetrievalServer`` starts that process from Python, waits for the ready line and stops it by PID
(terminate, then kill after a grace period); it is a context manager.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

from seed_core.retrieval.client import LocalRetriever
from seed_core.retrieval.corpus import read_corpus
from seed_core.retrieval.methods import RETRIEVAL_METHODS, IndexOptions

HOST = "127.0.0.1"
READY = "SEED_RETRIEVAL_READY"
MAX_TOPK = 100
MAX_BODY_BYTES = 1 << 20


def _validate(body: Any) -> tuple[list[str], int, bool]:
    """(queries, topk, return_scores) of a request body, or ValueError saying what is wrong."""
    if not isinstance(body, dict):
        raise ValueError('the body must be a JSON object {"queries": [...], "topk": k, "return_scores": bool}')
    queries = body.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ValueError('"queries" must be a list of strings')
    topk = body.get("topk", 3)
    if not isinstance(topk, int) or isinstance(topk, bool) or not 1 <= topk <= MAX_TOPK:
        raise ValueError(f'"topk" must be an integer in 1..{MAX_TOPK}, got {topk!r}')
    return queries, topk, bool(body.get("return_scores", False))


def make_handler(retriever: LocalRetriever) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            if self.path.rstrip("/") == "/health":
                self._send(200, {"status": "ok", "documents": len(retriever.passages), "method": retriever.method})
            else:
                self._send(404, {"error": f"unknown path {self.path}; use POST /retrieve or GET /health"})

        def do_POST(self) -> None:  # noqa: N802
            if self.path.rstrip("/") != "/retrieve":
                self._send(404, {"error": f"unknown path {self.path}; use POST /retrieve"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY_BYTES:
                self._send(400, {"error": f"the body must be 1..{MAX_BODY_BYTES} bytes of JSON"})
                return
            try:
                queries, topk, scores = _validate(json.loads(self.rfile.read(length)))
            except (json.JSONDecodeError, ValueError) as err:
                self._send(400, {"error": str(err)})
                return
            self._send(200, retriever.search_payload(queries, topk, scores))

        def log_message(self, format: str, *args: Any) -> None:  # quiet: one line per request is noise
            return

    return Handler


def serve(corpus: Path, port: int, method: str = "bm25", dense_model: str = "") -> None:
    """Build the index, bind ``127.0.0.1:port``, announce readiness on stdout, serve until SIGTERM."""
    options = IndexOptions(dense_model=dense_model, cache_dir=corpus.parent)
    retriever = LocalRetriever(read_corpus(corpus), method, options)
    server = ThreadingHTTPServer((HOST, port), make_handler(retriever))
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    print(f"{READY} http://{HOST}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


class RetrievalServer:
    """The server as a child process: ``start()`` -> base URL, ``stop()`` by PID; ``url`` is the
    ``/retrieve`` endpoint to give ``HttpRetriever``."""

    def __init__(self, corpus: str | Path, port: int = 0, startup_timeout_s: float = 60.0, *,
                 method: str = "bm25", dense_model: str = "") -> None:
        self.corpus = Path(corpus)
        self.port = port
        RETRIEVAL_METHODS.get(method)  # an unknown name fails here (listing the known ones), not in the child
        self.method = method
        self.dense_model = dense_model
        self.startup_timeout_s = startup_timeout_s
        self.process: subprocess.Popen[str] | None = None
        self.base_url = ""
        self._stderr: IO[str] | None = None

    @property
    def url(self) -> str:
        if not self.base_url:
            raise RuntimeError("retrieval server not started; call start() first")
        return f"{self.base_url}/retrieve"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> str:
        """Launch the child, return its base URL once it printed the ready line; RuntimeError (with the
        child's stderr) if it exits or stays silent for ``startup_timeout_s``."""
        if self.process is not None:
            raise RuntimeError(f"retrieval server already running (pid {self.process.pid})")
        if not self.corpus.is_file():
            raise FileNotFoundError(f"retrieval corpus {self.corpus} does not exist")
        cmd = [sys.executable, "-m", "seed_core.retrieval.server",
               "--corpus", str(self.corpus), "--port", str(self.port), "--method", self.method]
        if self.dense_model:
            cmd += ["--dense-model", self.dense_model]
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
        lines: queue.Queue[str] = queue.Queue()
        stdout = self.process.stdout
        assert stdout is not None
        threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.1)
            except queue.Empty:
                if self.process.poll() is not None and lines.empty():
                    break
                continue
            if line.startswith(READY):
                self.base_url = line.split()[1]
                return self.base_url
        self._stderr.seek(0)
        err = self._stderr.read()
        code = self.process.poll()
        self.stop()
        why = f"exited with code {code}" if code is not None else f"was not ready after {self.startup_timeout_s:.0f} s"
        raise RuntimeError(f"retrieval server on {self.corpus} {why}; its stderr ends with:\n{err[-2000:]}")

    def stop(self, grace_s: float = 5.0) -> None:
        """Terminate the child by PID (SIGTERM, then SIGKILL after ``grace_s``); idempotent."""
        proc, self.process, self.base_url = self.process, None, ""
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=grace_s)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> "RetrievalServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="seed's retrieval server (Search-R1 API) on 127.0.0.1")
    parser.add_argument("--corpus", required=True, help="corpus jsonl: one {'id', 'contents'} object per line")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port (printed on the ready line)")
    parser.add_argument("--method", default="bm25", choices=RETRIEVAL_METHODS.names(), help="built-in index")
    parser.add_argument("--dense-model", default="",
                        help="encoder directory for dense/hybrid ('' = the bundled all-MiniLM-L6-v2)")
    args = parser.parse_args()
    serve(Path(args.corpus), args.port, args.method, args.dense_model)


if __name__ == "__main__":
    main()
