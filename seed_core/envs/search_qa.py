"""``search_qa``: multi-turn question answering with a search tool (the Search-R1 protocol).

* Turn: the model writes ``<search> query </search>`` (the top-k passages come back as
  ``<information>Doc 1 (Title: ...) ...</information>``) or ``<answer> ... </answer>``, which ends the
  episode. Reward 1.0 when the answer exact-matches a golden answer after SQuAD normalisation, else 0
  (also 0 for every search step and for an episode that runs out of turns, ``env.max_steps`` = 4).
* Parsing (verl-agent ``search_projection``, seed-algorithm.md §4.3): cut the response after the first
  ``</search>`` or ``</answer>``; the action is the first complete search block, else the first answer
  block. Format-invalid when there is neither, when both tag types occur, or when a tag type occurs
  twice. An invalid step without any block is a no-op that tells the model the required format; the
  training penalty (``env.invalid_action_penalty``, 0.01 for Search) is the trainer's.
* Data: ``env.search_qa.data_dir`` holding ``train.parquet``/``test.parquet`` (Search-R1 columns, see
  ``seed_core.data_gen.qa_files``) and optionally ``corpus.jsonl``; empty -> the generated set
  (``seed_core.data_gen.qa_corpus``) built in memory. ``Task.task_type`` = the row's ``data_source``
  (nq, triviaqa, ..., bamboogle for Search-R1 data; single_hop / multi_hop for the generated set).
* Retrieval: ``retriever_url`` set -> that Search-R1-compatible server (an unreachable one raises an error
  naming the URL); else seed's built-in index over the corpus (``retrieval_method``: bm25, dense or
  hybrid, see ``seed_core.retrieval.methods``), in-process (``retriever: local``) or as its own
  HTTP server on 127.0.0.1 started once per process and stopped at exit (``retriever: server``).
* Prompt: verl-agent's search template, paraphrased: role, "Your question: ..." on one line (the skill
  goes right after it), the past turns (query, returned information) of the history window, then the
  "Now it's your turn to take an action." anchor and the format instructions.
"""

from __future__ import annotations

import atexit
import random
import re
import shutil
import string
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from seed_core.config import project_root
from seed_core.config_envs import EnvConfig, SearchQAConfig
from seed_core.data_gen.qa_corpus import QAGenSpec, generate_qa
from seed_core.data_gen.qa_files import GENERATED_SOURCES, SEARCH_R1_SOURCES, QAItem, read_split
from seed_core.envs.base import TimeLimit
from seed_core.retrieval.client import HttpRetriever, LocalRetriever, RetrievalError, RetrievedDoc, Retriever
from seed_core.retrieval.corpus import Passage, read_corpus, write_corpus
from seed_core.retrieval.methods import IndexOptions
from seed_core.retrieval.server import RetrievalServer
from seed_core.types import HistoryItem, ParsedAction, StepResult, Task

SERVER_STARTUP_S = 900.0
"""Seconds the built-in retrieval server may take to build its index (dense: ~50 passages/s on 2 CPU cores)."""
WIN_REWARD = 1.0
"""Search pays 1 for a correct answer (seed-algorithm.md §6.2), not 10."""
INVALID_OBSERVATION = (
    "Your previous response had no valid action. To search, put the query between <search> and </search>. "
    "To answer, put the answer between <answer> and </answer>. Use exactly one of them."
)

_ROLE = "You are an expert agent answering the question below step by step with the help of a search engine."
_TURN = (
    "Now it's your turn to take an action.\n"
    "First reason about what you know and what is still missing, inside <think> </think> tags. Then do "
    "exactly one of the following, not both:\n"
    "(1) if some needed knowledge is missing or uncertain, search for it: <search> your query </search>\n"
    "(2) if you can answer with confidence, give only the short answer: <answer> your answer </answer>, "
    "for example <answer>Beijing</answer>."
)


SearchQASettings = SearchQAConfig
"""``env.search_qa``: the typed config section (frozen and hashable, so caches are keyed by it)."""


# --- scoring ----------------------------------------------------------------------------------------


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation, drop the articles a/an/the, collapse spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golden_answers: tuple[str, ...] | list[str]) -> bool:
    target = normalize_answer(prediction)
    return any(target == normalize_answer(g) for g in golden_answers)


def format_information(docs: list[RetrievedDoc]) -> str:
    """Search-R1's passage block: ``Doc i (Title: t) text`` per hit, inside ``<information>`` tags."""
    body = "\n".join(f"Doc {i} (Title: {d.title}) {d.text}" for i, d in enumerate(docs, start=1))
    return f"<information>{body}</information>"


# --- data and retrievers (one per process and setting; envs are built per trajectory) ----------------


@dataclass(frozen=True)
class QAData:
    passages: tuple[Passage, ...] | None
    splits: dict[str, list[QAItem]]


def _data_root(settings: SearchQASettings) -> Path:
    root = Path(settings.data_dir).expanduser()
    return root if root.is_absolute() else project_root() / root


@lru_cache(maxsize=4)
def load_data(settings: SearchQASettings) -> QAData:
    if not settings.data_dir:
        ds = generate_qa(QAGenSpec(num_people=settings.num_people, num_test=settings.num_test))
        return QAData(tuple(ds.passages), ds.splits)
    root = _data_root(settings)
    if not root.is_dir():
        raise FileNotFoundError(f"env.search_qa.data_dir {root} does not exist; generate it with "
                                f"`python -m seed_core.data_gen.generate search_qa --out {settings.data_dir}` or set it to ''")
    splits = {p.stem: read_split(p) for p in sorted(root.glob("*.parquet"))}
    if not splits:
        raise FileNotFoundError(f"env.search_qa.data_dir {root} holds no <split>.parquet files")
    corpus = root / "corpus.jsonl"
    return QAData(tuple(read_corpus(corpus)) if corpus.is_file() else None, splits)


_SERVERS: dict[SearchQASettings, RetrievalServer] = {}


def _stop_servers() -> None:
    """Stop every built-in server this process started (also at exit) and forget their clients."""
    for server in _SERVERS.values():
        server.stop()
        shutil.rmtree(server.corpus.parent, ignore_errors=True)
    _SERVERS.clear()
    get_retriever.cache_clear()


atexit.register(_stop_servers)


@lru_cache(maxsize=4)
def get_retriever(settings: SearchQASettings) -> Retriever:
    if settings.retriever_url:
        return HttpRetriever(settings.retriever_url, settings.timeout_s)
    passages = load_data(settings).passages
    if passages is None:
        raise ValueError(f"env.search_qa.data_dir {settings.data_dir} has no corpus.jsonl and no "
                         "env.search_qa.retriever_url is set; point the URL at your Search-R1 retrieval server")
    if settings.retriever == "local":
        # embeddings (dense, hybrid) are cached next to a data_dir corpus; the generated one has no directory
        cache_dir = _data_root(settings) if settings.data_dir else None
        options = IndexOptions(dense_model=settings.dense_model, cache_dir=cache_dir)
        return LocalRetriever(passages, settings.retrieval_method, options)
    corpus = write_corpus(passages, Path(tempfile.mkdtemp(prefix="seed-corpus-")) / "corpus.jsonl")
    # a dense index embeds the whole corpus before the server is ready: allow minutes, not seconds
    server = _SERVERS[settings] = RetrievalServer(corpus, startup_timeout_s=SERVER_STARTUP_S,
                                                  method=settings.retrieval_method, dense_model=settings.dense_model)
    server.start()
    return HttpRetriever(server.url, settings.timeout_s)


# --- parsing ----------------------------------------------------------------------------------------


def parse_search_response(response: str) -> ParsedAction:
    """Action ``<search>q</search>``, ``<answer>a</answer>`` or ``""``; validity per the module docstring."""
    ends = [i + len(tag) for tag in ("</search>", "</answer>") if (i := response.find(tag)) != -1]
    head = response[: min(ends)] if ends else response
    action = ""
    for tag in ("search", "answer"):
        match = re.search(rf"<{tag}>(.*?)</{tag}>", head, flags=re.DOTALL)
        if match and match.group(1).strip():
            action = f"<{tag}>{' '.join(match.group(1).split())}</{tag}>"
            break
    searches, answers = response.count("<search>"), response.count("<answer>")
    valid = bool(action) and not (searches and answers) and searches <= 1 and answers <= 1
    return ParsedAction(action=action, valid=valid)


def _body(action: str, tag: str) -> str | None:
    prefix, suffix = f"<{tag}>", f"</{tag}>"
    return action[len(prefix): -len(suffix)] if action.startswith(prefix) and action.endswith(suffix) else None


def _item(task: Task) -> QAItem:
    p = task.payload
    if not p.get("question") or not p.get("golden_answers"):
        raise ValueError(f"search_qa task {task.task_id!r} has no payload question/golden_answers; build tasks "
                         "with make_tasks() (tasks.json keeps the payload)")
    return QAItem(id=str(p.get("id", task.task_id)), question=str(p["question"]),
                  golden_answers=tuple(p["golden_answers"]), data_source=task.task_type,
                  gold_docs=tuple(p.get("gold_docs", ())))


class SearchQAEnv(TimeLimit):
    name: ClassVar[str] = "search_qa"
    splits: ClassVar[tuple[str, ...]] = ("train", "test")
    task_types: ClassVar[tuple[str, ...]] = SEARCH_R1_SOURCES + GENERATED_SOURCES

    def __init__(self, cfg: EnvConfig) -> None:
        self.cfg = cfg
        self.settings = cfg.search_qa
        self._item: QAItem | None = None
        self._seen_titles: set[str] = set()

    @staticmethod
    def check_service(cfg: EnvConfig, timeout_s: float) -> str | None:
        """``seed_core.runtime.services``: one one-query search at ``env.search_qa.retriever_url`` (Search-R1 API); what
        failed, or None (no URL set, or it answers)."""
        settings = cfg.search_qa
        if not settings.retriever_url:
            return None
        try:
            HttpRetriever(settings.retriever_url, min(settings.timeout_s, timeout_s)).retrieve(["preflight"], 1)
        except (RetrievalError, ValueError) as err:
            return (f"the Search-QA retriever (env.search_qa.retriever_url) failed its check before the first "
                    f"rollout: {err}")
        return None

    def make_tasks(self, split: str, n: int, seed: int) -> list[Task]:
        """``n`` questions of ``split`` drawn with ``seed``; all of them (file order) when ``n <= 0`` or
        ``n`` covers the split. Task ids use the row number (Search-R1's own ids repeat across sources)."""
        rows = self.panel_universe(split)
        everything = n <= 0 or n >= len(rows)
        return self.panel_tasks(split, list(rows) if everything else random.Random(seed).sample(rows, n))

    def _split_items(self, split: str) -> list[QAItem]:
        items = load_data(self.settings).splits.get(split)
        if items is None:
            known = ", ".join(load_data(self.settings).splits)
            raise ValueError(f"search_qa: unknown split {split!r}; this data has {known}")
        return items

    def panel_universe(self, split: str) -> range:
        """The row numbers of ``split`` (file order)."""
        return range(len(self._split_items(split)))

    def panel_source(self) -> dict[str, Any]:
        """A row number means a row of this data: ``env.search_qa.data_dir``, or the generated set's size keys."""
        qa = self.settings
        if qa.data_dir:
            return {"env.search_qa.data_dir": qa.data_dir}
        return {"env.search_qa.data_dir": "", "env.search_qa.num_people": qa.num_people,
                "env.search_qa.num_test": qa.num_test}

    def panel_tasks(self, split: str, ids: Sequence[int | str]) -> list[Task]:
        items = self._split_items(split)
        if bad := [i for i in ids if not 0 <= int(i) < len(items)]:
            raise ValueError(f"search_qa: row {bad[0]} is not a row of split {split!r} ({len(items)} rows)")
        return [
            Task(env=self.name, task_id=f"search_qa-{split}-{i}", seed=int(i), split=split,
                 task_type=items[int(i)].data_source,
                 payload={"id": items[int(i)].id, "question": items[int(i)].question,
                          "golden_answers": list(items[int(i)].golden_answers),
                          "gold_docs": list(items[int(i)].gold_docs)})
            for i in ids
        ]

    def _reset(self, task: Task) -> str:
        self._item, self._seen_titles = _item(task), set()
        return self.question

    @property
    def question(self) -> str:
        return " ".join(self._require_item().question.split())

    def build_prompt(self, observation: str, history: list[HistoryItem], step: int) -> str:
        head = f"{_ROLE}\nYour question: {self.question}\n\n"
        if step == 0:
            return head + _TURN
        turns = []
        for i, item in enumerate(history):
            result = history[i + 1].observation if i + 1 < len(history) else observation
            turns.append(f"Step {item.step + 1}: {item.action or '(no valid action)'}\n{result}")
        if not turns:
            turns = [f"Latest result:\n{observation}"]
        return (f"{head}Prior to this step, you have already taken {step} step(s). Below is the interaction "
                "history, where <search> </search> wraps your past queries and <information> </information> "
                "wraps what the search engine returned:\n" + "\n".join(turns) + f"\n\n{_TURN}")

    def parse_action(self, response: str) -> ParsedAction:
        return parse_search_response(response)

    def _step(self, action: str) -> StepResult:
        item = self._require_item()
        query, answer = _body(action, "search"), _body(action, "answer")
        info: dict[str, Any] = {"task_type": item.data_source, "action_valid": bool(query or answer)}
        if answer is not None:
            won = exact_match(answer, item.golden_answers)
            info.update(answer=answer, em=float(won))
            return StepResult(f"Your answer: {answer}", WIN_REWARD if won else 0.0, True, won, info)
        if query is not None:
            docs = get_retriever(self.settings).retrieve([query], self.settings.topk)[0]
            self._seen_titles |= {d.title for d in docs}
            observation = format_information(docs)
            info["retrieved"] = [d.title for d in docs]
        else:
            observation = INVALID_OBSERVATION
        return StepResult(observation, 0.0, False, False, info)

    def task_description(self) -> str:
        return self.question

    # --- expert and oracle ------------------------------------------------------------------------

    def expert_action(self) -> str:
        """Search each passage of the gold path not retrieved yet (by its title), then answer; without a
        gold path (external data) search the question once. Answers on the last turn regardless."""
        item = self._require_item()
        missing = [t for t in item.gold_docs if t not in self._seen_titles]
        if not item.gold_docs and self._steps == 0:
            missing = [self.question]
        if missing and self._steps < self.cfg.max_steps - 1:
            return f"<search>{missing[0]}</search>"
        return f"<answer>{item.golden_answers[0]}</answer>"

    def format_response(self, action: str) -> str:
        query, answer = _body(action, "search"), _body(action, "answer")
        if query is not None:
            thought = f"I do not know this yet, so I search for {query}."
        elif answer is not None:
            thought = "The retrieved passages state the fact the question asks for, so I answer."
        else:
            thought = "I am not sure what to do."
        return f"<think>{thought}</think>\n{action}"

    def oracle_skill(self, task: Task, actions: list[str], success: bool) -> dict[str, str]:
        """Hindsight from the gold path: the workflow that worked, or the first mistake (1-based steps)."""
        item = _item(task)
        queries = [q for a in actions if (q := _body(a, "search")) is not None]
        answers = [a for act in actions if (a := _body(act, "answer")) is not None]
        path = (" then ".join(f"search '{t}'" for t in item.gold_docs) if item.gold_docs
                else "search the key entity named in the question")
        hops = "two passages (the second entity is named in the first passage)" if len(item.gold_docs) > 1 \
            else "one passage"
        workflow = (f"This question needs {hops}: {path}, reading which entity each passage names; then answer with "
                    "only the short name or year copied from the passage inside <answer></answer>.")
        if success:
            return {"episode_summary": f"Answered correctly after {len(queries)} search(es) in {len(actions)} steps"
                                       f"{': ' + '; '.join(queries) if queries else ''}.",
                    "episode_skill": f"Workflow: {workflow}"}
        invalid = [i for i, a in enumerate(actions, start=1) if not a]
        if invalid:
            mistake = (f"At step {invalid[0]} the response had no valid action; write exactly one <search>...</search>"
                       " or one <answer>...</answer>, never both and never twice.")
        elif not answers:
            mistake = (f"All {len(actions)} turns were spent without answering; a multi-hop question needs at most "
                       "two searches, then answer on the next turn.")
        else:
            seen = {d.title for q in queries for d in get_retriever(self.settings).retrieve([q], self.settings.topk)[0]}
            unread = [t for t in item.gold_docs if t not in seen]
            mistake = (f"The answer '{answers[-1]}' was given before reading the passage '{unread[0]}' that holds the "
                       "needed fact; search it by its exact name before answering." if unread else
                       f"The answer '{answers[-1]}' does not match the fact in the retrieved passage; copy the exact "
                       "name or year the passage states.")
        return {"episode_summary": f"Failed after {len(actions)} steps ({len(queries)} searches, "
                                   f"{len(answers)} answers).",
                "episode_skill": f"Avoid this mistake: {mistake} {workflow}"}

    def instance_values(self, task: Task) -> dict[str, str]:
        """The question's gold-path entities and answers as type-level phrases (``seed_core.skills.static``)."""
        item = _item(task)
        values = {a: "the answer" for a in item.golden_answers}
        values.update({t: "<entity named in the previous passage>" for t in item.gold_docs[1:]})
        values.update({t: "<entity named in the question>" for t in item.gold_docs[:1]})
        return {k: v for k, v in values.items() if k.strip()}

    def _require_item(self) -> QAItem:
        if self._item is None:
            raise RuntimeError("search_qa: call reset(task) before playing")
        return self._item
