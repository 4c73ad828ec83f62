"""The real ``openai`` client against the loopback fault server: retries, backoff, Retry-After, re-asks,
bounded concurrency, and the reachability check that runs before any work."""

from __future__ import annotations

import time
from typing import Callable

import pytest

from seed_core.analyzer.annotate import annotate_trajectories
from seed_core.analyzer.clients import CLIENTS, AnalysisRequest, AnalyzerSetupError
from seed_core.analyzer.openai_client import OpenAIClient
from seed_core.analyzer.parse import parse_analysis
from seed_core.config import SeedConfig
from seed_core.envs import make_env
from seed_core.loader import with_overrides
from seed_core.rollout.collector import group_by_trajectory
from seed_core.types import Task
from tests.faults import openai_server as fs
from tests.faults.helpers import closed_port_url, make_collect

TASK = Task(env="sokoban", task_id="t0", seed=0, split="train")
Serve = Callable[..., fs.FaultServer]


def request(i: int = 0) -> AnalysisRequest:
    return AnalysisRequest(traj_id=f"t{i}", prompt=f"analyse episode {i}", task=TASK, actions=["up"], success=True)


def skill_of(prompt: str) -> str:
    return parse_analysis(fs.default_answer(prompt)).episode_skill


@pytest.mark.parametrize("kind", ["delay", "timeout", "rate_limit", "server_error", "truncated_body",
                                  "malformed_body", "empty_answer"])
def test_a_transient_fault_is_retried_and_the_answer_used(
    kind: str, fault_server: Serve, openai_cfg: SeedConfig
) -> None:
    server = fault_server(fs.scripted([fs.default_faults(hang_s=2.0)[kind]]))
    (answer,) = CLIENTS.get("openai")(openai_cfg).analyze([request()])
    assert answer.error == ""
    assert parse_analysis(answer.text).episode_skill == skill_of("analyse episode 0")
    expected = [kind] if kind == "delay" else [kind, "ok"]  # a late answer is still an answer
    assert [c.kind for c in server.chat_calls()] == expected


def test_retry_after_is_honoured_instead_of_the_backoff(fault_server: Serve, openai_cfg: SeedConfig) -> None:
    server = fault_server(fs.scripted([fs.server_error(), fs.rate_limit(retry_after="0.05")]))
    (answer,) = CLIENTS.get("openai")(openai_cfg).analyze([request()])
    first, second, third = server.chat_calls()
    assert answer.error == ""
    assert 0.375 <= second.time - first.time < 0.8  # 500 without Retry-After: 0.5 s * (1 - 0..25% jitter)
    assert 0.05 <= third.time - second.time < 0.3  # Retry-After: 0.05 s, not the 0.75-1 s second backoff


def test_own_retries_back_off_exponentially(fault_server: Serve, openai_cfg: SeedConfig) -> None:
    server = fault_server(fs.always(fs.empty_answer()))
    client = OpenAIClient(openai_cfg.annotate.model_copy(update={"max_retries": 2}),
                          base_url=server.base_url, api_key="sk-test", backoff_s=0.1)
    (answer,) = client.analyze([request()])
    times = [c.time for c in server.chat_calls()]
    assert answer.error == "empty answer (after 3 calls)" and answer.text == ""
    assert 0.075 <= times[1] - times[0] < 0.3 and 0.15 <= times[2] - times[1] < 0.4  # 0.1 s, 0.2 s, -25% jitter
    assert (answer.prompt_tokens, answer.completion_tokens) == (33, 21)  # usage of all 3 calls


@pytest.mark.parametrize(("reply", "calls", "reason"), [
    (fs.server_error(503, headers={"retry-after-ms": "1"}), 4, "InternalServerError"),
    (fs.error(400, "bad request: context too long"), 1, "BadRequestError"),
    (fs.ok("", finish_reason="length"), 1, "empty answer (finish_reason=length)"),
])
def test_a_lasting_fault_is_recorded_with_its_reason(
    reply: fs.Reply, calls: int, reason: str, fault_server: Serve, openai_cfg: SeedConfig
) -> None:
    server = fault_server(fs.always(reply))
    (answer,) = CLIENTS.get("openai")(openai_cfg).analyze([request()])
    assert answer.text == "" and answer.error.startswith(reason)
    assert len(server.chat_calls()) == calls  # 1 + max_retries for retryable faults, else 1


def test_hanging_endpoint_times_out_and_is_recorded(fault_server: Serve, openai_cfg: SeedConfig) -> None:
    server = fault_server(fs.always(fs.hang(2.0)))
    cfg = with_overrides(openai_cfg, {"annotate.max_retries": 0, "annotate.timeout_s": 0.3})
    start = time.perf_counter()
    (answer,) = CLIENTS.get("openai")(cfg).analyze([request()])
    assert answer.error.startswith("APITimeoutError") and time.perf_counter() - start < 1.5
    assert len(server.chat_calls()) == 1


def test_malformed_answer_is_reasked_with_the_parse_error(fault_server: Serve, openai_cfg: SeedConfig) -> None:
    server = fault_server(fs.scripted([fs.malformed_answer()]))
    tasks, records = make_collect(1)
    (record,) = annotate_trajectories(group_by_trajectory(records), {t.task_id: t for t in tasks},
                                      CLIENTS.get("openai")(openai_cfg), parse_attempts=2, policy_version="base",
                                      env=make_env(openai_cfg.env))
    first, second = server.chat_calls()
    assert second.prompt.startswith(first.prompt.rstrip("\n"))
    assert "could not be used: no JSON object found" in second.prompt
    assert '{"episode_summary": "The agent mo' in second.prompt  # the tail of the failed answer
    assert record.ok and record.attempts == 2 and record.episode_skill == skill_of(second.prompt)


def test_concurrency_is_bounded(fault_server: Serve, openai_cfg: SeedConfig) -> None:
    server = fault_server(latency_s=0.2)
    start = time.perf_counter()
    answers = CLIENTS.get("openai")(with_overrides(openai_cfg, {"annotate.concurrency": 3})).analyze(
        [request(i) for i in range(6)])
    elapsed = time.perf_counter() - start
    assert [parse_analysis(a.text).episode_skill for a in answers] == [skill_of(f"analyse episode {i}")
                                                                       for i in range(6)]
    # two waves of three (no upper bound: a loaded CI machine is slow; the in-flight count is the check)
    assert server.max_in_flight == 3 and elapsed >= 0.4
    assert all(a.latency_s >= 0.2 for a in answers)


def test_unreachable_endpoint_fails_before_any_call(monkeypatch: pytest.MonkeyPatch, openai_cfg: SeedConfig) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", closed_port_url())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-unreachable")
    with pytest.raises(AnalyzerSetupError) as err:
        CLIENTS.get("openai")(openai_cfg)
    message = str(err.value)
    assert "cannot reach the analyzer endpoint http://127.0.0.1:" in message
    assert "set OPENAI_BASE_URL" in message and "annotate.client: oracle" in message
    assert "SECRET" not in message


def test_rejected_key_fails_before_any_call(fault_server: Serve, openai_cfg: SeedConfig) -> None:
    server = fault_server(api_key="sk-test-SECRET-rejected")
    server.models = fs.error(401, "Incorrect API key provided: sk-test-SECRET-rejected")
    with pytest.raises(AnalyzerSetupError) as err:
        CLIENTS.get("openai")(openai_cfg)
    assert "rejected the API key (HTTP 401): set OPENAI_API_KEY" in str(err.value)
    assert "SECRET" not in str(err.value) and server.chat_calls() == []


def test_endpoint_without_models_route_counts_as_reachable(fault_server: Serve, openai_cfg: SeedConfig) -> None:
    server = fault_server()
    server.models = fs.error(404, "Not Found")
    (answer,) = CLIENTS.get("openai")(openai_cfg).analyze([request()])
    assert answer.error == "" and len(server.chat_calls()) == 1
