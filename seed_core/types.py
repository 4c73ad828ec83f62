"""The data contract between stages (DESIGN §4): tasks, step records, annotations, evaluation rows.

Records are frozen dataclasses; ``seed_core.runtime.io`` writes them as parquet with an explicit schema.

Partial task score: an environment whose tasks have a graded outcome (WebShop's purchase score r in
[0, 1]) reports it as ``StepResult.info[SCORE_INFO_KEY]``; the episode's score is the last value
reported (WebShop reports r on the buying step, 0 before). It travels as ``StepRecord.score`` and
``EvalRecord.score`` and becomes the paper's WebShop "Score" (mean x 100). Environments without a
graded outcome (ALFWorld, Search-QA, Sokoban, EZPoints) report none: their ``score`` is ``None``
(no 0/1 score is derived from success), so no Score metric or column exists for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Task:
    """One playable task: an environment instance fixed by (env, split, seed) plus env-specific payload."""

    env: str
    task_id: str
    seed: int
    split: str
    task_type: str = ""
    payload: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class ParsedAction:
    """What an environment's parser made of one response: the action sent to the engine and format validity."""

    action: str
    valid: bool


SCORE_INFO_KEY = "task_score"
"""``StepResult.info`` key of an environment's partial task score in [0, 1] (verl-agent's name)."""


@dataclass(frozen=True)
class StepResult:
    observation: str
    reward: float
    done: bool
    won: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def score(self) -> float | None:
        """The partial task score this step reports (``info[SCORE_INFO_KEY]``), ``None`` when it reports none."""
        value = self.info.get(SCORE_INFO_KEY)
        return None if value is None else float(value)


@dataclass(frozen=True)
class HistoryItem:
    """One remembered step shown in the windowed prompt history (0-based ``step``)."""

    step: int
    observation: str
    action: str


@dataclass(frozen=True)
class StepRecord:
    """One environment step = one training sample (seed-algorithm.md §1.1)."""

    env: str
    split: str
    task_id: str
    task_type: str
    seed: int
    group_id: str
    traj_id: str
    step: int
    observation: str
    """Raw environment observation before the action (analyzer input, no template)."""
    prompt: str
    """Ordinary context: the user message content the policy saw (before the chat template)."""
    response: str
    response_ids: list[int]
    sampling_logprobs: list[float]
    action: str
    format_valid: bool
    reward: float
    done: bool
    episode_return: float
    success: bool
    episode_length: int
    policy_version: str
    score: float | None = None
    """Episode-level partial task score in [0, 1] (WebShop), repeated on every step like ``episode_return``;
    ``None`` for environments without one (module docstring)."""


@dataclass(frozen=True)
class AnnotationRecord:
    """One hindsight-skill analysis of one trajectory (Stage 1 or Stage 2)."""

    traj_id: str
    client: str
    model: str
    policy_version: str
    prompt: str
    raw_output: str
    episode_summary: str
    episode_skill: str
    step_skills: str
    """JSON object text {"step index": "skill"}."""
    parse_status: str
    """``ok`` or ``failed``; a failed trajectory gets no distillation signal."""
    error: str
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float

    @property
    def ok(self) -> bool:
        return self.parse_status == "ok" and bool(self.episode_skill.strip())


@dataclass(frozen=True)
class EvalRecord:
    """One evaluation episode."""

    method: str
    env: str
    split: str
    task_id: str
    task_type: str
    seed: int
    success: bool
    episode_return: float
    length: int
    skill_prompt: bool
    checkpoint: str
    score: float | None = None
    """The episode's partial task score in [0, 1] (WebShop's purchase score), ``None`` when the env has none."""
    repeat: int = 0
    """Which of the ``eval.repeats`` plays of the instance ``task_id`` this episode is (0-based; files written
    before repeats existed load with 0)."""
    format_valid_rate: float | None = None
    """Share of the episode's steps whose response was well-formed (``StepRecord.format_valid``: the env's parser
    found one valid action); ``None`` in files written before it was recorded."""
