"""Search-QA: EM normalisation, Search-R1 action parsing, generated data, episodes, prompts, data files, retrievers."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seed_core.config_envs import EnvConfig, SearchQAConfig
from seed_core.data_gen.qa_corpus import QAGenSpec, generate_qa, write_qa
from seed_core.data_gen.qa_files import read_split
from seed_core.envs import ENVS
from seed_core.envs.search_qa import (
    INVALID_OBSERVATION,
    SearchQAEnv,
    _stop_servers,
    exact_match,
    normalize_answer,
    parse_search_response,
)
from seed_core.losses.advantages import step_scores
from seed_core.retrieval.client import RetrievalError
from seed_core.retrieval.corpus import Passage, make_contents, write_corpus
from seed_core.skills.insert import insert_episode_skill
from seed_core.types import HistoryItem, ParsedAction, Task


def _cfg(**search_qa: object) -> EnvConfig:
    """An EnvConfig stand-in carrying an ``env.search_qa`` section (the lead adds the real one)."""
    return EnvConfig(name="search_qa", max_steps=4, history_length=4, invalid_action_penalty=0.01,
                     search_qa=SearchQAConfig(**search_qa))


@pytest.fixture(scope="module")
def env() -> SearchQAEnv:
    return SearchQAEnv(EnvConfig(name="search_qa", max_steps=4, history_length=4, invalid_action_penalty=0.01))


def _task(env: SearchQAEnv, label: str) -> Task:
    return next(t for t in env.make_tasks("test", 0, 0) if t.task_type == label)


def _play_expert(env: SearchQAEnv, task: Task) -> tuple[list[str], list]:
    obs, history, actions, results = env.reset(task), [], [], []
    for step in range(env.cfg.max_steps):
        env.build_prompt(obs, history[-4:], step)
        parsed = env.parse_action(env.format_response(env.expert_action()))
        assert parsed.valid
        result = env.step(parsed.action)
        history.append(HistoryItem(step, obs, parsed.action))
        actions.append(parsed.action)
        results.append(result)
        obs = result.observation
        if result.done:
            break
    return actions, results


def test_registered_under_its_config_name() -> None:
    assert ENVS.get("search_qa") is SearchQAEnv


@pytest.mark.parametrize(("text", "normalised"), [
    ("The Eiffel Tower!", "eiffel tower"),
    ("  A cat,  an apple ", "cat apple"),
    ("Theater of the Absurd", "theater of absurd"),
    ("1,000", "1000"),
    ("U.S.A.", "usa"),
])
def test_squad_normalisation_golden_cases(text: str, normalised: str) -> None:
    assert normalize_answer(text) == normalised


def test_exact_match_uses_any_golden_answer_and_no_partial_credit() -> None:
    assert exact_match("the Beijing.", ["Peking", "Beijing"])
    assert not exact_match("Paris France", ["Paris"])
    assert not exact_match("", ["Paris"])


@pytest.mark.parametrize(("response", "action", "valid"), [
    ("<think>need facts</think><search> capital of  France </search>", "<search>capital of France</search>", True),
    ("<think>known</think><answer>Paris</answer>", "<answer>Paris</answer>", True),
    ("<search>a</search> then <answer>b</answer>", "<search>a</search>", False),      # both tag types
    ("<answer>b</answer><search>a</search>", "<answer>b</answer>", False),            # cut after the first close
    ("<search>a</search><search>b</search>", "<search>a</search>", False),            # repeated tag
    ("I think the answer is Paris", "", False),                                       # no tags
    ("<search>   </search>", "", False),                                              # empty query
    ("<search>unclosed", "", False),
])
def test_action_parsing_follows_search_r1(response: str, action: str, valid: bool) -> None:
    assert parse_search_response(response) == ParsedAction(action, valid)


def test_generator_is_deterministic_and_answers_are_in_the_gold_passages() -> None:
    spec = QAGenSpec(num_people=20, num_test=10)
    first, second = generate_qa(spec), generate_qa(spec)
    assert first == second
    assert len(first.splits["test"]) == 10 and first.splits["train"]
    texts = {p.title: p.text for p in first.passages}
    labels = {item.data_source for items in first.splits.values() for item in items}
    assert labels == {"single_hop", "multi_hop"}
    for item in first.splits["train"] + first.splits["test"]:
        assert len(item.gold_docs) == (1 if item.data_source == "single_hop" else 2)
        assert item.gold_docs[0] in item.question, "hop 1 is named in the question"
        last = texts[item.gold_docs[-1]]
        assert any(answer in last for answer in item.golden_answers), (item, last)
        if len(item.gold_docs) == 2:
            assert item.gold_docs[1] in texts[item.gold_docs[0]], "the bridge entity is named in hop 1"
            assert item.gold_docs[1] not in item.question


@pytest.mark.parametrize(("label", "steps"), [("single_hop", 2), ("multi_hop", 3)])
def test_expert_wins_by_following_the_gold_path(env: SearchQAEnv, label: str, steps: int) -> None:
    task = _task(env, label)
    actions, results = _play_expert(env, task)
    assert len(actions) == steps
    assert [a for a in actions[:-1]] == [f"<search>{t}</search>" for t in task.payload["gold_docs"]]
    assert results[0].observation.startswith("<information>Doc 1 (Title: ")
    assert results[-1].won and results[-1].done and results[-1].reward == 1.0
    assert [r.reward for r in results[:-1]] == [0.0] * (steps - 1)


def test_wrong_answer_ends_with_zero_and_turns_run_out(env: SearchQAEnv) -> None:
    task = _task(env, "single_hop")
    env.reset(task)
    result = env.step("<answer>definitely not it</answer>")
    assert result.done and not result.won and result.reward == 0.0 and result.info["em"] == 0.0
    env.reset(task)
    results = [env.step("<search>something</search>") for _ in range(4)]
    assert [r.done for r in results] == [False, False, False, True] and not results[-1].won
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step("<answer>x</answer>")


def test_malformed_responses_are_invalid_noops_that_get_the_penalty(env: SearchQAEnv) -> None:
    env.reset(_task(env, "single_hop"))
    responses = ["no tags at all", "<search>a</search><answer>b</answer>", "<search>a</search><search>b</search>"]
    parsed = [env.parse_action(r) for r in responses]
    assert [p.valid for p in parsed] == [False, False, False]
    result = env.step(parsed[0].action)
    assert result.observation == INVALID_OBSERVATION and result.reward == 0.0 and not result.done
    scores = step_scores([1.0, 1.0, 1.0], [p.valid for p in parsed[:2]] + [True], penalty=0.01)
    assert scores.tolist() == pytest.approx([0.99, 0.99, 1.0])


def test_prompt_has_the_question_line_history_and_anchor(env: SearchQAEnv) -> None:
    task = _task(env, "multi_hop")
    first = env.reset(task)
    prompt0 = env.build_prompt(first, [], 0)
    assert f"Your question: {task.payload['question']}\n" in prompt0
    assert "Now it's your turn to take an action." in prompt0 and "Prior to this step" not in prompt0
    result = env.step("<search>alpha</search>")
    history = [HistoryItem(0, first, "<search>alpha</search>")]
    prompt1 = env.build_prompt(result.observation, history, 1)
    assert "already taken 1 step(s)" in prompt1
    assert f"Step 1: <search>alpha</search>\n{result.observation}" in prompt1
    with_skill = insert_episode_skill(prompt1, "Search the person first.")
    question_line = f"Your question: {task.payload['question']}"
    assert with_skill.index(question_line) < with_skill.index("**Episode-Level Skill**") < with_skill.index("Prior to")


def test_oracle_skill_gives_the_workflow_or_the_first_mistake(env: SearchQAEnv) -> None:
    task = _task(env, "multi_hop")
    first_doc, bridge = task.payload["gold_docs"]
    won = env.oracle_skill(task, [f"<search>{first_doc}</search>", f"<search>{bridge}</search>", "<answer>x</answer>"],
                           True)
    assert won["episode_skill"].startswith("Workflow:") and f"search '{first_doc}' then search '{bridge}'" in won[
        "episode_skill"]
    lost = env.oracle_skill(task, [f"<search>{first_doc}</search>", "<answer>wrong</answer>"], False)
    assert lost["episode_skill"].startswith("Avoid this mistake:") and "'wrong'" in lost["episode_skill"]
    invalid = env.oracle_skill(task, ["", "<answer>wrong</answer>"], False)
    assert "At step 1 the response had no valid action" in invalid["episode_skill"]


def test_reads_search_r1_parquet_and_labels_tasks_by_source(tmp_path: Path) -> None:
    pq.write_table(pa.table({"question": ["who wrote hamlet?", "capital of zorvia?"],
                             "golden_answers": [["William Shakespeare", "Shakespeare"], ["Dralith"]],
                             "data_source": ["nq", "hotpotqa"]}), tmp_path / "test.parquet")
    pq.write_table(pa.table({"extra_info": [{"question": "q3"}], "reward_model": [{"ground_truth": {"target": ["a3"]}}],
                             "data_source": ["triviaqa"]}), tmp_path / "train.parquet")
    write_corpus([Passage("0", make_contents("Hamlet", "Hamlet is a play by William Shakespeare."))],
                 tmp_path / "corpus.jsonl")
    env = SearchQAEnv(_cfg(data_dir=str(tmp_path)))
    tasks = env.make_tasks("test", 0, 0)
    assert [t.task_type for t in tasks] == ["nq", "hotpotqa"]
    assert read_split(tmp_path / "train.parquet")[0].golden_answers == ("a3",)
    env.reset(tasks[0])
    assert "Hamlet" in env.step(env.expert_action()).observation, "no gold path: the expert searches the question"
    assert env.step("<answer>shakespeare</answer>").won
    with pytest.raises(ValueError, match="unknown split 'dev'; this data has test, train"):
        env.make_tasks("dev", 1, 0)


def test_generated_files_load_like_external_data(tmp_path: Path) -> None:
    report = write_qa(generate_qa(QAGenSpec(num_people=20, num_test=5)), tmp_path)
    assert report["test/questions"] == 5.0 and (tmp_path / "corpus.jsonl").is_file()
    env = SearchQAEnv(_cfg(data_dir=str(tmp_path), topk=1))
    task = env.make_tasks("test", 1, 0)[0]
    actions, results = _play_expert(env, task)
    assert results[-1].won and results[0].observation.count("Doc ") == 1, "topk comes from env.search_qa"


def test_env_starts_its_own_retrieval_server_when_asked() -> None:
    env = SearchQAEnv(_cfg(retriever="server", num_people=20, num_test=5))
    try:
        actions, results = _play_expert(env, env.make_tasks("test", 1, 0)[0])
        assert results[-1].won
        from seed_core.envs.search_qa import _SERVERS
        (server,) = _SERVERS.values()
        assert server.process is not None and server.process.poll() is None
    finally:
        _stop_servers()
    assert server.process is None


def test_unreachable_retriever_names_the_url() -> None:
    env = SearchQAEnv(_cfg(retriever_url="http://127.0.0.1:9/retrieve", timeout_s=2, num_people=20, num_test=5))
    env.reset(env.make_tasks("test", 1, 0)[0])
    with pytest.raises(RetrievalError, match=r"http://127\.0\.0\.1:9/retrieve is unreachable"):
        env.step("<search>anything</search>")


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="Input should be 'local' or 'server'"):
        SearchQAEnv(_cfg(retriever="faiss"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SearchQAEnv(_cfg(data_dir="/nonexistent/dir")).make_tasks("test", 1, 0)
