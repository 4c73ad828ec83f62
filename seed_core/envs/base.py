"""The environment protocol (DESIGN §5) shared by every text environment.

An environment class is named in ``ENVS`` (``seed_core.registries``) under its config name. One instance plays one
episode at a time (the rollout keeps one instance per trajectory and steps them in a batch):

    env = ENVS.get("sokoban")(cfg.env)
    tasks = env.make_tasks("train", n=4, seed=0)        # deterministic task list
    tasks = env.panel_tasks("test", [1000000, 1000001])   # evaluation: the instance ids of a panel
    obs = env.reset(tasks[0])                             # first observation (raw, no template)
    prompt = env.build_prompt(obs, history, step=0)       # the paper's template for this env
    parsed = env.parse_action(response_text)              # ParsedAction(action, valid)
    result = env.step(parsed.action)                      # StepResult(observation, reward, done, won)

Every environment subclasses ``TimeLimit``, the one owner of ``env.max_steps``: ``done = terminal or
steps >= cfg.max_steps``, where ``terminal`` is what the env's own ``_step`` reports (won, answered,
bought). The episode loop (``seed_core.rollout.collector``) stops an episode when, and only when, ``done``.

Besides play, an environment owns its success metric (``StepResult.won``), an expert
(``expert_action``), and the privileged hindsight used by the rule-based ``oracle`` analyzer
(``oracle_skill``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Protocol, Sequence, runtime_checkable

from seed_core.config import EnvConfig
from seed_core.registries import ENVS  # noqa: F401  (the table of environment classes, by env.name)
from seed_core.types import HistoryItem, ParsedAction, StepResult, Task


@runtime_checkable
class TextEnv(Protocol):
    name: ClassVar[str]
    splits: ClassVar[tuple[str, ...]]
    """Task splits this environment can generate or load (e.g. ``train``, ``test``)."""
    task_types: ClassVar[tuple[str, ...]]
    """Task-type labels reported in the tables (one ``""``-free label per task)."""

    def make_tasks(self, split: str, n: int, seed: int) -> list[Task]:
        """``n`` tasks of ``split``, deterministic in ``seed``; raises ValueError for an unknown split."""

    def panel_universe(self, split: str) -> Sequence[int | str]:
        """Every instance id of ``split``, sorted, whatever the file-system order (the ids a fixed evaluation
        panel, ``seed_core.panels``, is drawn from: task seeds, goal or row indices, ALFWorld game paths)."""

    def panel_source(self) -> dict[str, Any]:
        """The config values that decide what an instance id means (a catalogue, a data set); ``{}`` when an
        id means the same instance under every config of the environment."""

    def panel_tasks(self, split: str, ids: Sequence[int | str]) -> list[Task]:
        """The tasks of these instance ids, in this order; raises ValueError for an id not in the split."""

    def reset(self, task: Task) -> str:
        """Start ``task``; return the first raw observation."""

    def build_prompt(self, observation: str, history: list[HistoryItem], step: int) -> str:
        """The user-message text for this step (paper template; ``history`` is already windowed)."""

    def parse_action(self, response: str) -> ParsedAction:
        """Project a model response to an engine action and its format validity (never raises)."""

    def step(self, action: str) -> StepResult:
        """Apply ``action``; an invalid or inadmissible action is a legal no-op with the env's penalty.
        ``done = terminal or steps >= cfg.max_steps`` (``TimeLimit``)."""

    def task_description(self) -> str:
        """One line stating the goal of the current task (analyzer input)."""

    def expert_action(self) -> str:
        """The expert's next engine action in the current state (warm-start demonstrations)."""

    def format_response(self, action: str) -> str:
        """A well-formed model response that carries ``action`` (used for expert demonstrations)."""

    def oracle_skill(self, task: Task, actions: list[str], success: bool) -> dict[str, str]:
        """Rule-based hindsight from privileged information: ``{"episode_summary", "episode_skill"}``;
        success -> the workflow that worked, failure -> the first mistake and what to avoid."""


class TimeLimit:
    """Base class of every environment (gym's ``TimeLimit``): owns the step counter ``_steps`` and the rule
    ``done = terminal or steps >= cfg.max_steps`` for every instance, also one built directly. A subclass
    implements ``_reset(task)`` and ``_step(action)``, whose ``StepResult.done`` is ``terminal`` only."""

    name: ClassVar[str]
    cfg: EnvConfig
    _steps = 0
    _done = False

    def reset(self, task: Task) -> str:
        self._steps, self._done = 0, False
        return self._reset(task)  # type: ignore[attr-defined]

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RuntimeError(f"{self.name}: step() after the episode ended; call reset(task) first")
        result = self._step(action)  # type: ignore[attr-defined]
        self._steps += 1
        self._done = result.done or self._steps >= self.cfg.max_steps
        return replace(result, done=self._done)
