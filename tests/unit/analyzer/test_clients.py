"""Analyzer clients: oracle (fake env), policy/checkpoint (tiny model), openai (loopback server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from seed_core.analyzer.clients import (
    CLIENTS,
    AnalysisRequest,
    AnalyzerSetupError,
    BackendClient,
)
from seed_core.analyzer.parse import parse_analysis
from seed_core.config import SeedConfig
from seed_core.loader import with_overrides
from seed_core.types import Task
from tests.faults import openai_server as fs
from tests.faults.openai_server import fault_server  # noqa: F401  (fixture)

TASK = Task(env="sokoban", task_id="t0", seed=0, split="train")
Serve = Callable[..., fs.FaultServer]
GOOD_JSON = json.dumps(
    {"episode_summary": "pushed the box", "episode_skill": "Push boxes away from walls.", "step_skills": {}}
)


def request(traj_id: str = "tr0", prompt: str = "analyse this", success: bool = True) -> AnalysisRequest:
    return AnalysisRequest(traj_id=traj_id, prompt=prompt, task=TASK, actions=["up", "left"], success=success)


@pytest.fixture
def cfg() -> SeedConfig:
    return with_overrides(SeedConfig(), {"annotate.model": "judge-1", "annotate.max_tokens": 321,
                                        "annotate.temperature": 0.3, "annotate.max_retries": 0,
                                        "annotate.concurrency": 3, "annotate.timeout_s": 10.0})


def test_registry_holds_the_four_clients() -> None:
    assert CLIENTS.names() == ["checkpoint", "openai", "oracle", "policy"]


# --- oracle ----------------------------------------------------------------------------------------


class FakeEnv:
    """Only what the oracle client uses."""

    def __init__(self) -> None:
        self.calls: list[tuple[Task, list[str], bool]] = []

    def oracle_skill(self, task: Task, actions: list[str], success: bool) -> dict[str, str]:
        self.calls.append((task, actions, success))
        verdict = "workflow" if success else "avoid"
        return {"episode_summary": f"{len(actions)} moves",
                "episode_skill": f"{verdict}: {' then '.join(actions)}"}


def test_oracle_answers_json_that_the_parser_accepts(cfg: SeedConfig) -> None:
    env = FakeEnv()
    client = CLIENTS.get("oracle")(cfg, env=env)
    answers = client.analyze([request("a", success=True), request("b", success=False)])
    skills = [parse_analysis(a.text).episode_skill for a in answers]
    assert skills == ["workflow: up then left", "avoid: up then left"]
    assert parse_analysis(answers[0].text).episode_summary == "2 moves"
    assert json.loads(answers[0].text)["step_skills"] == {}
    assert env.calls[1] == (TASK, ["up", "left"], False)
    assert client.identity == ("oracle", "rules:sokoban")
    assert all(a.error == "" for a in answers)


def test_oracle_without_env_is_a_clear_error(cfg: SeedConfig) -> None:
    with pytest.raises(AnalyzerSetupError, match="needs the environment"):
        CLIENTS.get("oracle")(cfg)


# --- policy / checkpoint ---------------------------------------------------------------------------


class ScriptedBackend:
    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.calls: list[dict[str, Any]] = []

    def generate(self, prompts: list[str], *, temperature: float, max_new_tokens: int,
                 seed: int | None = None) -> list[Any]:
        from seed_core.rollout.backends import Completion

        self.calls.append({"prompts": prompts, "temperature": temperature, "max_new_tokens": max_new_tokens})
        return [Completion(text=t, token_ids=list(range(len(t.split()))), logprobs=[]) for t in self.texts]


def test_backend_client_maps_completions_to_answers() -> None:
    backend = ScriptedBackend([GOOD_JSON, "  "])
    client = BackendClient(backend, identity=("policy", "m"), temperature=0.0, max_new_tokens=64,
                           count_prompt_tokens=len)
    answers = client.analyze([request("a", prompt="abc"), request("b", prompt="abcdef")])
    assert backend.calls == [{"prompts": ["abc", "abcdef"], "temperature": 0.0, "max_new_tokens": 64}]
    assert answers[0].text == GOOD_JSON and answers[0].error == ""
    assert (answers[0].prompt_tokens, answers[0].completion_tokens) == (3, len(GOOD_JSON.split()))
    assert answers[1].error == "empty answer" and answers[1].prompt_tokens == 6
    assert client.analyze([]) == []


def test_policy_client_uses_rl_analyzer_settings(cfg: SeedConfig) -> None:
    cfg = with_overrides(cfg, {"rl.analyzer_temperature": 0.7, "rl.analyzer_max_new_tokens": 99})
    client = CLIENTS.get("policy")(cfg, backend=ScriptedBackend([]))
    assert (client.temperature, client.max_new_tokens) == (0.7, 99)
    assert client.identity == ("policy", cfg.model.path)
    with pytest.raises(AnalyzerSetupError, match="backend="):
        CLIENTS.get("policy")(cfg)


def test_checkpoint_client_needs_a_checkpoint(cfg: SeedConfig) -> None:
    with pytest.raises(AnalyzerSetupError, match="rl.analyzer_checkpoint"):
        CLIENTS.get("checkpoint")(cfg)


def test_checkpoint_client_generates_with_a_real_tiny_model(cfg: SeedConfig, tiny_model_dir: Path) -> None:
    from seed_core.modeling.models import encode_prompt

    cfg = with_overrides(cfg, {"model.device": "cpu", "rl.analyzer_max_new_tokens": 4,
                              "rl.analyzer_temperature": 0.0})
    client = CLIENTS.get("checkpoint")(cfg, checkpoint=tiny_model_dir)
    (answer,) = client.analyze([request(prompt="Analyse the agent episode below.")])
    assert client.identity == ("checkpoint", str(tiny_model_dir))
    assert 1 <= answer.completion_tokens <= 4
    policy = client.backend.policy
    assert answer.prompt_tokens == len(encode_prompt(policy.tokenizer, "Analyse the agent episode below."))
    assert not policy.model.training


# --- openai ----------------------------------------------------------------------------------------
# Against the loopback fault server of tests/faults (real HTTP, real SDK); fault handling is tested there.


def test_openai_client_parses_reasoning_answers_in_order(cfg: SeedConfig, fault_server: Serve) -> None:
    server = fault_server(lambda call: fs.ok(f'{{"episode_summary": "s", "episode_skill": "skill for {call.prompt}"}}',
                                             reasoning="I think {draft} the agent should open the fridge.",
                                             usage=(17, 23)), api_key="sk-test-secret")
    client = CLIENTS.get("openai")(cfg)
    answers = client.analyze([request(f"t{i}", prompt=f"p{i}") for i in range(5)])
    assert [parse_analysis(a.text).episode_skill for a in answers] == [f"skill for p{i}" for i in range(5)]
    assert answers[0].text.startswith("I think {draft} the agent should open the fridge.\n{")
    assert all((a.prompt_tokens, a.completion_tokens, a.error) == (17, 23, "") for a in answers)
    assert all(a.latency_s > 0 for a in answers)
    sent = server.chat_calls()[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-secret"
    body = sent.body
    assert body["model"] == "judge-1" and body["temperature"] == 0.3 and body["max_completion_tokens"] == 321
    assert body["messages"] == [{"role": "user", "content": body["messages"][0]["content"]}]
    assert client.identity == ("openai", "judge-1")


def test_openai_sdk_retries_a_503_then_succeeds(cfg: SeedConfig, fault_server: Serve) -> None:
    server = fault_server(fs.scripted([fs.server_error(503, headers={"retry-after-ms": "10"}), fs.ok(GOOD_JSON)]))
    (answer,) = CLIENTS.get("openai")(with_overrides(cfg, {"annotate.max_retries": 1})).analyze([request()])
    assert len(server.chat_calls()) == 2
    assert answer.error == "" and parse_analysis(answer.text).episode_skill == "Push boxes away from walls."


def test_openai_failure_is_recorded_without_the_key(cfg: SeedConfig, fault_server: Serve) -> None:
    fault_server(fs.always(fs.error(401, "bad key sk-test-secret")), api_key="sk-test-secret")
    (answer,) = CLIENTS.get("openai")(cfg).analyze([request()])
    assert answer.text == "" and "AuthenticationError" in answer.error
    assert "sk-test-secret" not in answer.error and "***" in answer.error


def test_openai_empty_content_is_an_error(cfg: SeedConfig, fault_server: Serve) -> None:
    server = fault_server(fs.always(fs.ok("", reasoning="thinking only")), api_key=None)  # a local server needs no key
    (answer,) = CLIENTS.get("openai")(cfg).analyze([request()])
    assert server.chat_calls()[0].headers["authorization"] == "Bearer EMPTY"
    assert answer.error == "empty answer (after 1 call)"


def test_openai_without_endpoint_fails_before_any_request(
    cfg: SeedConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(AnalyzerSetupError) as err:
        CLIENTS.get("openai")(cfg)
    message = str(err.value)
    assert "OPENAI_BASE_URL" in message and "OPENAI_API_KEY" in message
    assert "annotate.client: oracle" in message
