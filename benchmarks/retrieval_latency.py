"""Latency, throughput and accuracy of seed's built-in retrieval (bm25, dense, hybrid) on the generated corpus.

    python benchmarks/retrieval_latency.py [--num-people 60] [--methods bm25,dense,hybrid] [--requests 300]
                                           [--topk 3] [--out FILE.json]

Over one generated corpus (``--num-people`` scales it: 60 gives ~100 passages, 600 about 1 000, 6000
about 10 000) and the same queries (its questions, cycled), for each method:

* ``index_build_s``: building the index in this process (dense/hybrid: embedding every passage,
  after the encoder is loaded and run once, ``encoder_load_s``); ``hit_at_1``: share of questions whose top-1
  passage is the first passage of their gold path (the person / company / city the question names);
* ``startup_s``: a fresh ``RetrievalServer`` process (imports + index build + bind; no embedding cache);
* through that server with the real HTTP client, ``single``: ``--requests`` sequential one-query
  requests (one Search-QA env step): p50 / p95 / mean latency in ms and queries per second;
  ``batch``: requests of ``--batch`` queries (a Search-R1 rollout step): per-request p50 / p95 and
  queries per second; ``concurrent``: ``--clients`` threads sending one-query requests: queries per second.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50_ms": 1000 * pick(0.50), "p95_ms": 1000 * pick(0.95), "mean_ms": 1000 * statistics.fmean(ordered)}


def _in_process(method: str, passages: Sequence[Any], questions: list[str], gold: list[str],
                topk: int) -> dict[str, float]:
    from seed_core.retrieval.methods import build_index

    t = time.perf_counter()
    index = build_index(method, [p.contents for p in passages])
    build_s = time.perf_counter() - t
    hits = index.search(questions, topk)
    top1 = [passages[row[0].doc].title if row else "" for row in hits]
    return {"index_build_s": build_s, "hit_at_1": statistics.fmean(found == want for found, want in zip(top1, gold))}


def _through_server(method: str, passages: Sequence[Any], questions: list[str],
                    args: argparse.Namespace) -> dict[str, Any]:
    from seed_core.retrieval.client import HttpRetriever
    from seed_core.retrieval.corpus import write_corpus
    from seed_core.retrieval.server import RetrievalServer

    # a fresh directory per method: the dense embedding cache next to the corpus must not carry over
    corpus = write_corpus(passages, Path(tempfile.mkdtemp(prefix=f"seed-bench-{method}-")) / "corpus.jsonl")
    server = RetrievalServer(corpus, startup_timeout_s=1800, method=method)
    t0 = time.perf_counter()
    server.start()
    startup_s = time.perf_counter() - t0
    try:
        client = HttpRetriever(server.url)
        client.retrieve(questions[:4], args.topk)  # warm-up
        single = []
        for i in range(args.requests):
            t = time.perf_counter()
            client.retrieve([questions[i % len(questions)]], args.topk)
            single.append(time.perf_counter() - t)
        batches, n_batches = [], max(1, args.requests // args.batch)
        for i in range(n_batches):
            chunk = [questions[(i * args.batch + j) % len(questions)] for j in range(args.batch)]
            t = time.perf_counter()
            client.retrieve(chunk, args.topk)
            batches.append(time.perf_counter() - t)
        t = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(lambda i: client.retrieve([questions[i % len(questions)]], args.topk), range(args.requests)))
        concurrent_s = time.perf_counter() - t
    finally:
        server.stop()
        shutil.rmtree(corpus.parent, ignore_errors=True)
    return {
        "startup_s": startup_s,
        "single": {**_percentiles(single), "queries_per_s": len(single) / sum(single), "requests": len(single)},
        "batch": {**_percentiles(batches), "batch_size": args.batch,
                  "queries_per_s": n_batches * args.batch / sum(batches)},
        "concurrent": {"clients": args.clients, "queries_per_s": args.requests / concurrent_s},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-people", type=int, default=60)
    parser.add_argument("--methods", default="bm25,dense,hybrid", help="comma-separated retrieval methods")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--topk", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    from seed_core.data_gen.qa_corpus import QAGenSpec, generate_qa
    from seed_core.retrieval.methods import RETRIEVAL_METHODS

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for method in methods:
        RETRIEVAL_METHODS.get(method)  # fail fast on a typo, listing the known methods
    data = generate_qa(QAGenSpec(num_people=args.num_people, num_test=10))
    items = [q for split in data.splits.values() for q in split]
    questions, gold = [q.question for q in items], [q.gold_docs[0] for q in items]
    result: dict[str, Any] = {"passages": len(data.passages), "questions": len(questions), "topk": args.topk}
    if any(m != "bm25" for m in methods):
        from seed_core.retrieval.dense import load_encoder, resolve_dense_model

        t = time.perf_counter()
        load_encoder(resolve_dense_model("")).encode(["warm-up"])  # the first forward pays one-off set-up costs
        result["encoder_load_s"] = time.perf_counter() - t
    result["methods"] = {
        m: {**_in_process(m, data.passages, questions, gold, args.topk),
            **_through_server(m, data.passages, questions, args)}
        for m in methods
    }
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
