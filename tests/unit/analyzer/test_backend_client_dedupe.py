"""BackendClient: by default (``sort_by_length``) a greedy analysis generates each distinct prompt once, shortest
first, and every request gets the answer of its own prompt in request order; when sampling, or with
``sort_by_length=False``, every analysis prompt goes to the backend as given (the code before's batches)."""

from typing import Any

import pytest

from seed_core.analyzer.clients import AnalysisRequest, BackendClient
from seed_core.rollout.completion import Completion
from seed_core.types import Task


class EchoBackend:
    """Answers each prompt with a text derived from it, so a wrong mapping shows."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def generate(self, prompts: list[str], *, temperature: float, max_new_tokens: int,
                 seed: int | None = None) -> list[Any]:
        self.calls.append(list(prompts))
        return [Completion(text=f"answer to {p}", token_ids=list(range(len(p))), logprobs=[]) for p in prompts]


def _request(traj_id: str, prompt: str) -> AnalysisRequest:
    return AnalysisRequest(traj_id=traj_id, prompt=prompt, task=Task(env="e", split="train", task_id="t", seed=0),
                           actions=[], success=False)


PROMPTS = ["ccc", "a", "bb", "a", "ccc", "dd"]


def _analyze(temperature: float, **kwargs: Any) -> tuple[EchoBackend, list[Any]]:
    backend = EchoBackend()
    client = BackendClient(backend, identity=("policy", "m"), temperature=temperature, max_new_tokens=8,
                           count_prompt_tokens=len, **kwargs)
    return backend, client.analyze([_request(str(i), p) for i, p in enumerate(PROMPTS)])


def test_greedy_by_default_generates_distinct_prompts_once_shortest_first_and_maps_back():
    backend, answers = _analyze(0.0)
    assert backend.calls == [["a", "bb", "dd", "ccc"]]
    assert [a.text for a in answers] == [f"answer to {p}" for p in PROMPTS]
    assert [(a.prompt_tokens, a.completion_tokens) for a in answers] == [(len(p), len(p)) for p in PROMPTS]


@pytest.mark.parametrize("temperature, kwargs", [(0.0, {"sort_by_length": False}), (0.7, {}),
                                                 (0.7, {"sort_by_length": True})])
def test_unsorted_or_sampling_every_prompt_goes_as_given(temperature, kwargs):
    backend, answers = _analyze(temperature, **kwargs)
    assert backend.calls == [PROMPTS]
    assert [a.text for a in answers] == [f"answer to {p}" for p in PROMPTS]
