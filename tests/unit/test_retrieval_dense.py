"""Dense and hybrid retrieval: paraphrase search with the bundled MiniLM, reciprocal-rank fusion golden
values, the retrieval-method registry, the embedding cache, lazy imports and the server with method dense."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

import seed_core.retrieval.dense as dense_mod
from seed_core.config_envs import SearchQAConfig
from seed_core.registries import RETRIEVAL_METHODS
from seed_core.registry import UnknownNameError
from seed_core.retrieval.bm25 import Bm25Index
from seed_core.retrieval.client import LocalRetriever
from seed_core.retrieval.corpus import Passage, make_contents, write_corpus
from seed_core.retrieval.dense import DenseIndex, cached_embeddings, embedding_key
from seed_core.retrieval.hybrid import HybridIndex, reciprocal_rank_fusion
from seed_core.retrieval.methods import Hit
from seed_core.retrieval.server import RetrievalServer

ROOT = Path(__file__).resolve().parents[2]

PASSAGES = [Passage(str(i), make_contents(title, text)) for i, (title, text) in enumerate([
    ("Zorblax Quenton", "Zorblax Quenton is a poet who was born in Velmora in 1931."),
    ("Velmora", "Velmora is a city in Quessaria, founded in 1402."),
    ("Quessaria", "Quessaria is a country whose capital is Dralith."),
    ("Marta Ilvane", "Marta Ilvane is a physician who treats sick children at the hospital of Dralith."),
    ("Orrin Bask", "Orrin Bask is an automobile mechanic who repairs car engines in Velmora."),
    ("Tessaly Grove", "Tessaly Grove is a forest where enormous oak trees grow."),
    ("Pell Harrow", "Pell Harrow is a baker who makes bread and pastries every morning."),
    ("Lake Umbrin", "Lake Umbrin is a freshwater lake where people go fishing and sailing."),
    ("Kestrel Vane", "Kestrel Vane is an astronomer who studies distant galaxies with telescopes."),
    ("Dunmore Cup", "The Dunmore Cup is an annual football tournament played in Quessaria."),
    ("Sarn Olwic", "Sarn Olwic is a composer who writes symphonies for orchestras."),
    ("Brivel Pass", "Brivel Pass is a mountain road covered in snow during winter."),
])]
TEXTS = [p.contents for p in PASSAGES]

# (question worded unlike its passage, index of the passage that answers it)
PARAPHRASES = [
    ("which doctor looks after kids?", 3),          # no word in common with any passage
    ("who fixes vehicles?", 4),                      # BM25 matches only "who" (in 5 passages)
    ("who bakes loaves of pastry?", 6),
    ("who observes stars and the cosmos?", 8),
    ("who creates classical music?", 10),
    ("a soccer competition held every year", 9),     # BM25: "every" points at the baker
    ("a woodland full of huge trees", 5),
    ("where can I catch fish?", 7),
    ("an icy route through the peaks", 11),
    ("which nation is governed from Dralith?", 2),
]
QUESTIONS = [q for q, _ in PARAPHRASES]
GOLD = [g for _, g in PARAPHRASES]


@pytest.fixture(scope="module")
def dense() -> DenseIndex:
    return DenseIndex(TEXTS)  # the bundled all-MiniLM-L6-v2 (loaded once per process)


def _top1(hits: Sequence[Sequence[Hit]]) -> list[int | None]:
    return [h[0].doc if h else None for h in hits]


def test_dense_finds_paraphrased_passages_that_bm25_misses(dense: DenseIndex) -> None:
    hits = dense.search(QUESTIONS, k=3)
    assert _top1(hits) == GOLD, "dense top-1 is the passage that answers each paraphrased question"
    assert all(len(h) == 3 and h[0].score > h[1].score >= h[2].score for h in hits)
    assert all(-1.0 <= h.score <= 1.0 for row in hits for h in row), "scores are cosines of unit vectors"
    # k = all documents: bm25s picks arbitrarily among ties at the k-th place, Bm25Index sorts them by index
    bm25 = _top1(Bm25Index(TEXTS).search(QUESTIONS, k=len(TEXTS), positive_only=True))
    assert bm25[0] is None, "no shared term: BM25 finds nothing"
    assert bm25[1] == 0 and bm25[5] == 6, "BM25 ranks a passage sharing only 'who' / 'every' first"
    assert sum(b == g for b, g in zip(bm25, GOLD)) <= 4 < 10 == sum(d == g for d, g in zip(_top1(hits), GOLD))
    assert len(dense.search(["velmora"], k=50)[0]) == len(TEXTS), "k is clamped to the corpus size"
    with pytest.raises(ValueError, match="k must be >= 1"):
        dense.search(["x"], k=0)


def test_query_embedding_is_the_unit_mean_pooled_vector(dense: DenseIndex) -> None:
    vectors = dense.encoder.encode(["a short text", "another, longer text about lakes and fishing boats"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), [1.0, 1.0], atol=1e-5)
    alone = dense.encoder.encode(["a short text"])[0]
    np.testing.assert_allclose(vectors[0], alone, atol=1e-5, err_msg="padding in a batch must not change a vector")
    assert dense.encoder.max_length == 256, "all-MiniLM-L6-v2's sentence_bert_config.json max_seq_length"
    long_text = " ".join(["fishing"] * 2000)
    np.testing.assert_allclose(dense.encoder.encode([long_text]), dense.encoder.encode([" ".join(["fishing"] * 400)]),
                               atol=1e-5, err_msg="texts are truncated to the first 256 tokens")


def test_reciprocal_rank_fusion_golden_values() -> None:
    # doc 0: ranks 2 and 1 -> 1/62 + 1/61; doc 2: rank 1 once -> 1/61; doc 3: rank 2 -> 1/62; doc 1: rank 3 -> 1/63
    fused = reciprocal_rank_fusion([[2, 0, 1], [0, 3]], k=60)
    assert [h.doc for h in fused] == [0, 2, 3, 1]
    assert [h.score for h in fused] == pytest.approx([1 / 62 + 1 / 61, 1 / 61, 1 / 62, 1 / 63], abs=1e-12)
    assert reciprocal_rank_fusion([[7], [5]]) == [Hit(5, 1 / 61), Hit(7, 1 / 61)], "ties: lower index first"
    assert [h.score for h in reciprocal_rank_fusion([[4, 9]], k=0)] == [1.0, 0.5]
    assert reciprocal_rank_fusion([[], []]) == []
    with pytest.raises(ValueError, match="twice"):
        reciprocal_rank_fusion([[1, 1]])


def test_hybrid_fuses_bm25_and_dense_ranks() -> None:
    hybrid = HybridIndex(TEXTS)
    kids, pastry, music = hybrid.search([QUESTIONS[0], QUESTIONS[2], QUESTIONS[4]], k=3)
    assert kids[0] == Hit(3, pytest.approx(1 / 61)), "BM25 has no hit: the dense rank 1 alone"
    assert pastry[0] == Hit(6, pytest.approx(2 / 61)), "both rank the baker first"
    # BM25: poet (0) then composer (10) tie on 'who'; dense: composer then poet -> equal RRF, lower index first
    assert [h.doc for h in music[:2]] == [0, 10] and music[0].score == music[1].score
    assert len(hybrid) == len(TEXTS) and len(hybrid.search(["velmora"], k=50)[0]) == len(TEXTS)


def test_registry_builds_every_method_behind_the_local_retriever() -> None:
    assert RETRIEVAL_METHODS.names() == ["bm25", "dense", "hybrid"]
    assert SearchQAConfig().retrieval_method in RETRIEVAL_METHODS
    for method in ("bm25", "dense", "hybrid"):
        retriever = LocalRetriever(PASSAGES, method)
        doc = retriever.retrieve(["where was zorblax quenton born"], 1)[0][0]
        assert retriever.method == method and doc.title == "Zorblax Quenton"
    with pytest.raises(UnknownNameError, match="unknown retrieval method 'splade'.*bm25, dense, hybrid"):
        LocalRetriever(PASSAGES, "splade")


class _CountingEncoder:
    """Stand-in encoder: vector i = [len(text), 1], counts encode() calls."""

    def __init__(self, model_dir: Path) -> None:
        self.model_dir, self.dim, self.calls = model_dir, 2, 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_embedding_cache_is_keyed_by_model_weights_and_corpus(tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "model.safetensors").write_bytes(b"weights-v1")
    encoder = _CountingEncoder(model_dir)
    first = cached_embeddings(encoder, ["ab", "cde"], tmp_path)  # type: ignore[arg-type]
    again = cached_embeddings(encoder, ["ab", "cde"], tmp_path)  # type: ignore[arg-type]
    assert encoder.calls == 1 and again.tolist() == first.tolist() == [[2, 1], [3, 1]]
    assert len(list(tmp_path.glob(".seed-embeddings-*.npy"))) == 1
    key = embedding_key(model_dir, ["ab", "cde"])
    assert embedding_key(model_dir, ["abc", "de"]) != key, "texts are length-prefixed, not concatenated"
    (model_dir / "model.safetensors").write_bytes(b"weights-v2, other size")
    assert embedding_key(model_dir, ["ab", "cde"]) != key, "new weights, new key"
    cached_embeddings(encoder, ["ab", "cde"], None)  # type: ignore[arg-type]
    assert encoder.calls == 2 and len(list(tmp_path.glob(".seed-embeddings-*.npy"))) == 1


def test_missing_dense_packages_say_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)  # makes `import faiss` raise ImportError
    with pytest.raises(ImportError, match=r"dense retrieval needs `pip install -e \.\[dense\]`"):
        DenseIndex(TEXTS)
    monkeypatch.setattr(dense_mod, "DEFAULT_MODEL_PACKAGE", "no_such_model_package")
    with pytest.raises(ImportError, match=r"pip install -e \.\[dense\].*no_such_model_package"):
        dense_mod.resolve_dense_model("")
    with pytest.raises(FileNotFoundError, match="no config.json.*env.search_qa.dense_model"):
        dense_mod.resolve_dense_model(str(tmp_path))


def test_importing_seed_core_retrieval_loads_no_dense_packages() -> None:
    code = ("import sys, seed_core.retrieval, seed_core.envs.search_qa\n"
            "from seed_core.retrieval.client import LocalRetriever\nfrom seed_core.retrieval.corpus import Passage\n"
            "LocalRetriever([Passage('0', 'Velmora is a city')], 'bm25').retrieve(['velmora'], 1)\n"
            "print(sorted(m for m in ('faiss', 'transformers', 'torch') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_server_with_method_dense_answers_the_search_r1_request(tmp_path: Path) -> None:
    corpus = write_corpus(PASSAGES, tmp_path / "corpus.jsonl")
    with RetrievalServer(corpus, startup_timeout_s=120, method="dense") as server:
        with urllib.request.urlopen(f"{server.base_url}/health", timeout=10) as response:
            assert json.loads(response.read()) == {"status": "ok", "documents": 12, "method": "dense"}
        body = {"queries": [QUESTIONS[1], QUESTIONS[7]], "topk": 2, "return_scores": True}
        request = urllib.request.Request(server.url, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            result = json.loads(response.read())["result"]
    assert [len(row) for row in result] == [2, 2]
    assert result[0][0]["document"] == {"id": "4", "contents": PASSAGES[4].contents}
    assert result[1][0]["document"]["id"] == "7" and 0 < result[1][1]["score"] < result[1][0]["score"] <= 1
    assert len(list(tmp_path.glob(".seed-embeddings-*.npy"))) == 1, "embeddings cached next to the corpus"
    with pytest.raises(UnknownNameError, match="unknown retrieval method"):
        RetrievalServer(corpus, method="splade")


def test_search_qa_env_plays_on_a_dense_index_cached_in_its_data_dir(tmp_path: Path) -> None:
    from seed_core.config import EnvConfig
    from seed_core.data_gen.qa_corpus import QAGenSpec, generate_qa, write_qa
    from seed_core.envs.search_qa import SearchQAEnv, get_retriever

    write_qa(generate_qa(QAGenSpec(num_people=10, num_test=4)), tmp_path)
    settings = SearchQAConfig(data_dir=str(tmp_path), retrieval_method="dense", topk=2)
    env = SearchQAEnv(EnvConfig(name="search_qa", max_steps=4, search_qa=settings))
    retriever = get_retriever(settings)
    assert isinstance(retriever, LocalRetriever) and retriever.method == "dense"
    assert len(list(tmp_path.glob(".seed-embeddings-*.npy"))) == 1
    task = next(t for t in env.make_tasks("test", 0, 0) if t.task_type == "multi_hop")
    env.reset(task)
    result = env.step(env.expert_action())
    while not result.done:
        result = env.step(env.expert_action())
    assert result.won, "the expert's title searches find each gold passage through the dense index"
    get_retriever.cache_clear()
