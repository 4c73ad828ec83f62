"""``alfworld``: ALFWorld text games on the real engine (TextWorld PDDL from the ``alfworld`` package).

* Tasks: one task per playable game of a split (``seed_core.alfworld.games``): ``train`` (the real
  train split, else the generated games), ``valid_seen`` (in distribution), ``valid_unseen`` (out of
  distribution), ``valid_train``. ``Task.payload = {"gamefile": path}``, ``Task.task_type`` is the
  table label (pick, look, clean, heat, cool, pick2). Evaluation plays the fixed panel
  ``data/panels/alfworld-<split>.json`` (``seed_core.panels``): game paths relative to $ALFWORLD_DATA.
* Play: ``AlfredDemangler(PddlEnv)`` with ``won`` and ``admissible_commands`` only, no planner in the
  loop (``seed_core.alfworld.engine``). Reward 10 on the step that wins, else 0 (verl-agent text mode);
  the format penalty is the trainer's (``env.invalid_action_penalty``). An inadmissible command is a
  no-op ("Nothing happens."). The episode ends when won or after ``env.max_steps`` steps.
* Prompt (verl-agent ALFWorld templates, paraphrased; seed-algorithm.md §2.1): the first step shows the
  observation, whose last line is "Your task is to: ...", then the admissible actions; later steps put
  "Your task is to: {task}" on the role line, then the ``[Observation k: '...', Action k: '...']``
  history window, the current step and observation, and the admissible actions. Both end with the
  "Now it's your turn to take an action." anchor and the ``<think>``/``<action>`` instruction. The
  decorative "-= Welcome to TextWorld, ALFRED! =-" banner is dropped from the first observation.
* Parsing (verl-agent ``alfworld_projection``): lower-case; the text between the first ``<action>`` and
  the next ``</action>``; valid iff those tags and a ``<think>...</think>`` block are present and the
  response has no CJK text; without action tags the last 30 characters are sent and valid is False.
* Expert: the game's walkthrough (``"walkthrough"`` in ``game.tw-pddl``; for the real games, which ship
  none, the rule-based plan of their initial state) while the agent follows it, else a re-plan from
  the live PDDL state (``seed_core.alfworld.solver``). Oracle: ``seed_core.alfworld.oracle``.
"""

from __future__ import annotations

import json
import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Sequence

from seed_core.alfworld import oracle, solver
from seed_core.alfworld.engine import Engine
from seed_core.alfworld.facts import Goal, goal_from_problem, world_from_problem
from seed_core.alfworld.games import (SPLITS, TASK_TYPES, data_root, game_key, generated_dir, split_games,
                                      task_type_label)
from seed_core.config import EnvConfig
from seed_core.envs.base import TimeLimit
from seed_core.envs.prompt_parts import history_block, project_action_tag
from seed_core.types import HistoryItem, ParsedAction, StepResult, Task

WIN_REWARD = 10.0
TASK_PREFIX = "Your task is to: "
BANNER = "-= Welcome to TextWorld, ALFRED! =-"
FALLBACK_CHARS = 30
"""verl-agent sends the last 30 characters of a response without action tags."""

_ROLE = "You are an expert household agent acting in the ALFRED embodied environment."
_TURN = (
    "Now it's your turn to take an action.\n"
    "First think step by step about the situation and what to do next, and write that reasoning inside "
    "<think> </think> tags. Then pick exactly one of the admissible actions for this step and write it "
    "inside <action> </action> tags."
)
_TASK_LINE = re.compile(r"Your task is to: (.*)")


@lru_cache(maxsize=256)
def game_plan(game_file: str) -> tuple[Goal, tuple[str, ...], str]:
    """(goal, walkthrough, task text) of a game file, read once per process.

    The walkthrough is the file's own (planner-made for generated games) when present, else the
    rule-based plan of the initial state.
    """
    data = json.loads(Path(game_file).read_text())
    goal = goal_from_problem(data["pddl_problem"])
    walkthrough = data.get("walkthrough") or solver.plan(world_from_problem(data["pddl_problem"]), goal)
    match = _TASK_LINE.search(data.get("grammar", ""))
    task_text = match.group(1).strip().rstrip('".') if match else goal.describe()
    return goal, tuple(walkthrough), task_text


def _gamefile(task: Task) -> str:
    path = task.payload.get("gamefile")
    if not path:
        raise ValueError(f"alfworld task {task.task_id!r} has no payload['gamefile']; build tasks with "
                         "make_tasks() (tasks.json keeps the payload)")
    return str(path)


class ALFWorldEnv(TimeLimit):
    name: ClassVar[str] = "alfworld"
    splits: ClassVar[tuple[str, ...]] = SPLITS
    task_types: ClassVar[tuple[str, ...]] = tuple(TASK_TYPES.values())

    def __init__(self, cfg: EnvConfig) -> None:
        self.cfg = cfg
        self._engine: Engine | None = None
        self._task: Task | None = None
        self._task_text = ""
        self._actions: list[str] = []
        self._won = False

    # --- tasks ------------------------------------------------------------------------------------

    def make_tasks(self, split: str, n: int, seed: int) -> list[Task]:
        """``n`` games of ``split`` drawn with ``seed``; all of them, in path order, when ``n <= 0`` or
        ``n`` is at least the number of games (evaluation on a whole split)."""
        games = split_games(split, self.cfg.alfworld)
        if n <= 0 or n >= len(games):
            indices = list(range(len(games)))
        else:
            indices = random.Random(seed).sample(range(len(games)), n)
        return [self._game_task(split, games[i], i) for i in indices]

    def _game_task(self, split: str, game: Path, index: int) -> Task:
        return Task(env=self.name, task_id=f"alfworld-{split}-{game_key(game).replace('/', '-')}", seed=index,
                    split=split, task_type=task_type_label(game), payload={"gamefile": str(game)})

    def _game_id(self, game: Path) -> str:
        """A game's path relative to $ALFWORLD_DATA (``json_2.1.1/<split>/<task>/<trial>/game.tw-pddl``), or to
        ``env.alfworld.generated_dir`` for a generated training game: the same id on every machine."""
        root = data_root()
        if root is not None and game.is_relative_to(root):
            return game.relative_to(root).as_posix()
        return game.relative_to(generated_dir(self.cfg.alfworld)).as_posix()

    def panel_universe(self, split: str) -> list[str]:
        """The playable games of ``split`` as ids (``_game_id``), sorted."""
        return sorted(self._game_id(g) for g in split_games(split, self.cfg.alfworld))

    def panel_source(self) -> dict[str, Any]:
        return {}

    def panel_tasks(self, split: str, ids: Sequence[int | str]) -> list[Task]:
        """The games of these ids under this machine's $ALFWORLD_DATA; a game it lacks is refused by name."""
        games = {self._game_id(g): g for g in split_games(split, self.cfg.alfworld)}
        index = {key: (i, games[key]) for i, key in enumerate(sorted(games))}  # seed: the id's rank, not the listing's
        if missing := [str(i) for i in ids if str(i) not in index]:
            raise ValueError(f"alfworld: {len(missing)} panel game(s) of split {split!r} are not playable games "
                             f"here, e.g. {missing[0]} (ALFWORLD_DATA={data_root()})")
        return [self._game_task(split, index[str(i)][1], index[str(i)][0]) for i in ids]

    # --- play -------------------------------------------------------------------------------------

    def _reset(self, task: Task) -> str:
        if self._engine is None:
            self._engine = Engine()
        self._engine.load(Path(_gamefile(task)))
        text = self._engine.reset()
        self._task, self._actions, self._won = task, [], False
        match = _TASK_LINE.search(text)
        self._task_text = match.group(1).strip() if match else ""
        return text.replace(BANNER, "").strip()

    def _admissible_block(self) -> str:
        actions = [a for a in self._require_engine().admissible_commands if a != "help"]
        return "Your admissible actions of the current situation are: [" + "\n ".join(f"'{a}'" for a in actions) + "]."

    def build_prompt(self, observation: str, history: list[HistoryItem], step: int) -> str:
        if not history:
            return f"{_ROLE}\nYour current observation is: {observation}\n{self._admissible_block()}\n\n{_TURN}"
        return (
            f"{_ROLE} {TASK_PREFIX}{self._task_text}\n{history_block(history, step)}\n"
            f"You are now at step {step + 1} and your current observation is: {observation}\n"
            f"{self._admissible_block()}\n\n{_TURN}"
        )

    def parse_action(self, response: str) -> ParsedAction:
        return project_action_tag(response, FALLBACK_CHARS)

    def _step(self, action: str) -> StepResult:
        engine = self._require_engine()
        admissible = action in engine.admissible_commands
        observation, won = engine.step(action)
        self._actions.append(action)
        reward = WIN_REWARD if won and not self._won else 0.0
        self._won = self._won or won
        info = {"won": self._won, "admissible": admissible, "task_type": self._task.task_type if self._task else "",
                "admissible_commands": engine.admissible_commands}
        return StepResult(observation, reward, self._won, self._won, info)

    def task_description(self) -> str:
        return self._task_text

    # --- expert and oracle --------------------------------------------------------------------------

    def walkthrough(self, task: Task | None = None) -> list[str]:
        """The reference command list of ``task`` (default: the current one)."""
        task = task or self._task
        if task is None:
            raise RuntimeError("alfworld: walkthrough() needs a task or a reset() first")
        return list(game_plan(_gamefile(task))[1])

    def expert_action(self) -> str:
        """The walkthrough's next command while the episode follows it, else a re-plan from the live state."""
        engine = self._require_engine()
        assert self._task is not None
        goal, walkthrough, _ = game_plan(_gamefile(self._task))
        k = len(self._actions)
        if k < len(walkthrough) and tuple(self._actions) == walkthrough[:k]:
            return walkthrough[k]
        try:
            commands = solver.plan(engine.world(), goal)
        except solver.NoPlanError:
            commands = []
        return commands[0] if commands else "look"

    def format_response(self, action: str) -> str:
        task = self._task_text.rstrip(".") or "finish the task"
        return (f"<think>My task is to {task}. Following my plan, the next step is: {action}.</think>"
                f"<action>{action}</action>")

    def oracle_skill(self, task: Task, actions: list[str], success: bool) -> dict[str, str]:
        goal, walkthrough, task_text = game_plan(_gamefile(task))
        return oracle.hindsight(goal, task_text, list(walkthrough), [a.strip().lower() for a in actions], success)

    def instance_values(self, task: Task) -> dict[str, str]:
        """The goal's object, receptacle and lamp types as type-level phrases (``seed_core.skills.static``)."""
        goal = game_plan(_gamefile(task))[0]
        values = {goal.object_type: "<object>", goal.receptacle_type: "<receptacle>", goal.lamp_type: "<lamp>"}
        return {k: v for k, v in values.items() if k.strip()}

    def _require_engine(self) -> Engine:
        if self._engine is None or self._task is None:
            raise RuntimeError("alfworld: call reset(task) before playing")
        return self._engine
