"""``sokoban``: text Sokoban with a seeded level generator, a BFS solver and the rule-based oracle.

Owns the whole game in-repo (no gym-sokoban dependency):

* Levels (gym-sokoban style): a random walk carves floor inside a wall border, targets and the player
  go on random floor cells, then ``search_depth`` random reverse moves *pull* the boxes off their targets;
  the position farthest from solved (sum of box-to-own-target Manhattan distances) is kept. A level is
  rejected (next sub-seed) when a box starts on a target, or when the solver finds no solution within
  ``max_steps`` moves, so every task is winnable inside one episode.
* Dynamics and rewards follow gym-sokoban: a move pushes a box only if the square behind it is free;
  every step costs ``-0.1``, pushing a box onto a target ``+1``, off a target ``-1``, solving ``+10``.
  An invalid or unparsed action (``""``) is a no-op that still costs the step penalty (verl-agent maps
  it to action 0 and returns ``-0.1``). The episode ends when solved or after ``max_steps`` steps.
* Text: verl-agent ``tiny_rgb_array`` grid (``" # \\t"`` per cell, one row per line), its template
  paraphrased, ending with the "Now it's your turn" anchor that skill insertion looks for.
"""

from __future__ import annotations

import random
import re
from collections import deque
from dataclasses import dataclass
from functools import lru_cache

from seed_core.config import EnvConfig
from seed_core.envs.base import TimeLimit
from seed_core.envs.prompt_parts import (
    SeededTaskSet,
    has_cjk,
    has_think_block,
    history_block,
    tag_contents,
)
from seed_core.types import HistoryItem, ParsedAction, StepResult, Task

Pos = tuple[int, int]
State = tuple[Pos, frozenset[Pos]]
"""(player, boxes): everything that changes during an episode."""
DIRECTIONS: dict[str, Pos] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
STEP_PENALTY = -0.1
BOX_ON_TARGET = 1.0
"""Added per box pushed onto a target; subtracted per box pushed off one."""
SOLVED_BONUS = 10.0
MAX_ATTEMPTS = 500
PULL_BIAS = 0.7
MAX_SOLVER_STATES = 1_000_000
STATED_MOVES = re.compile(r"\b(?:up|down|left|right)\b(?:(?:\s*,\s*|\s+then\s+|\s*(?:->|\u2192)\s*|\s+)"
                          r"(?:up|down|left|right)\b)*")
"""A run of moves as a skill states it ("up, left, left", "down then right"): what ``judge_skill`` replays."""
_WALK_SHAPES: tuple[tuple[Pos, ...], ...] = (  # stamped at each walk position: cell, pairs, square, plus
    ((0, 0),),
    ((0, 0), (0, 1)),
    ((0, 0), (1, 0)),
    ((0, 0), (0, 1), (1, 0), (1, 1)),
    ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)),
)


def _add(a: Pos, b: Pos) -> Pos:
    return (a[0] + b[0], a[1] + b[1])


@dataclass(frozen=True)
class Level:
    """A start position: every cell of the ``rows x cols`` grid is a wall or floor (targets are floor)."""

    rows: int
    cols: int
    walls: frozenset[Pos]
    targets: frozenset[Pos]
    player: Pos
    boxes: frozenset[Pos]


def move(walls: frozenset[Pos], state: State, action: str) -> State:
    """Apply one of ``DIRECTIONS``; a blocked move leaves the state unchanged."""
    player, boxes = state
    delta = DIRECTIONS[action]
    ahead = _add(player, delta)
    if ahead in walls:
        return player, boxes
    if ahead in boxes:
        beyond = _add(ahead, delta)
        if beyond in walls or beyond in boxes:
            return player, boxes
        return ahead, (boxes - {ahead}) | {beyond}
    return ahead, boxes


def solve(level: Level, start: State | None = None) -> list[str] | None:
    """Shortest action list from ``start`` (default: the level's start) to all boxes on targets, by
    breadth-first search over (player, boxes) states; ``None`` when no solution exists."""
    start = start or (level.player, level.boxes)
    parents: dict[State, tuple[State, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if state[1] <= level.targets:
            path: list[str] = []
            while parents[state] is not None:
                state, action = parents[state]  # type: ignore[misc]
                path.append(action)
            return path[::-1]
        for action in DIRECTIONS:
            nxt = move(level.walls, state, action)
            if nxt not in parents:
                parents[nxt] = (state, action)
                queue.append(nxt)
        if len(parents) > MAX_SOLVER_STATES:
            raise RuntimeError(
                f"sokoban solver explored more than {MAX_SOLVER_STATES} states; "
                "use a smaller env.sokoban.dim_room or fewer num_boxes"
            )
    return None


def _carve_floor(rng: random.Random, rows: int, cols: int) -> set[Pos]:
    """Floor cells stamped along a random walk that stays inside the wall border (always connected)."""
    pos = (rng.randint(1, rows - 2), rng.randint(1, cols - 2))
    heading = rng.choice(list(DIRECTIONS.values()))
    floor = {pos}
    for _ in range(int(1.7 * (rows + cols))):
        if rng.random() < 0.35:
            heading = rng.choice(list(DIRECTIONS.values()))
        pos = (min(max(pos[0] + heading[0], 1), rows - 2), min(max(pos[1] + heading[1], 1), cols - 2))
        for offset in rng.choice(_WALK_SHAPES):
            cell = _add(pos, offset)
            if 1 <= cell[0] <= rows - 2 and 1 <= cell[1] <= cols - 2:
                floor.add(cell)
    return floor


def _reverse_play(rng: random.Random, floor: set[Pos], targets: list[Pos], player: Pos, depth: int) -> State | None:
    """Pull boxes away from their targets with ``depth`` random reverse moves (a pull is taken with
    probability ``PULL_BIAS`` whenever one is possible); keep the position whose boxes are farthest
    (Manhattan, each from its own target, ties -> the later position) with no box on a target."""
    origin = {t: t for t in targets}  # current box position -> the target it started on
    best: tuple[int, Pos, frozenset[Pos]] = (0, player, frozenset())
    for _ in range(depth):
        walks: list[Pos] = []
        pulls: list[tuple[Pos, Pos]] = []
        for delta in DIRECTIONS.values():
            ahead = _add(player, delta)
            behind = (player[0] - delta[0], player[1] - delta[1])
            if ahead in floor and ahead not in origin:
                walks.append(ahead)
                if behind in origin:
                    pulls.append((ahead, behind))
        if not walks:
            return None
        if pulls and rng.random() < PULL_BIAS:
            ahead, pulled = rng.choice(pulls)
            origin[player] = origin.pop(pulled)
        else:
            ahead = rng.choice(walks)
        player = ahead
        score = sum(abs(b[0] - t[0]) + abs(b[1] - t[1]) for b, t in origin.items())
        if score > 0 and score >= best[0] and not set(origin) & set(targets):
            best = (score, player, frozenset(origin))
    return None if best[0] == 0 else (best[1], best[2])


@lru_cache(maxsize=4096)
def generate_level(seed: int, rows: int, cols: int, num_boxes: int, search_depth: int, max_moves: int) -> Level:
    """The level of task ``seed``: the first sub-seed giving a non-trivial level solvable in ``max_moves``."""
    if rows < 5 or cols < 5 or num_boxes < 1 or search_depth < 1:
        raise ValueError(
            f"env.sokoban needs dim_room >= (5, 5), num_boxes >= 1, search_depth >= 1; "
            f"got dim_room=({rows}, {cols}), num_boxes={num_boxes}, search_depth={search_depth}"
        )
    for attempt in range(MAX_ATTEMPTS):
        rng = random.Random(f"sokoban:{seed}:{attempt}")
        floor = _carve_floor(rng, rows, cols)
        if len(floor) < 2 * num_boxes + 2:
            continue
        cells = sorted(floor)
        targets = rng.sample(cells, num_boxes)
        player = rng.choice([c for c in cells if c not in targets])
        found = _reverse_play(rng, floor, targets, player, search_depth)
        if found is None:
            continue
        walls = frozenset((r, c) for r in range(rows) for c in range(cols)) - floor
        level = Level(rows, cols, walls, frozenset(targets), found[0], found[1])
        path = solve(level)
        if path is not None and 0 < len(path) <= max_moves:
            return level
    raise ValueError(
        f"no solvable sokoban level within {max_moves} moves for seed {seed} after {MAX_ATTEMPTS} tries; "
        "raise env.max_steps or lower env.sokoban.num_boxes / search_depth"
    )


def render(level: Level, state: State) -> str:
    """verl-agent ``tiny_rgb_array`` text: ``" <symbol> \\t"`` per cell, rows joined by newlines."""

    player, boxes = state

    def symbol(cell: Pos) -> str:
        if cell in level.walls:
            return "#"
        on_target = cell in level.targets
        if cell in boxes:
            return "√" if on_target else "X"
        if cell == player:
            return "S" if on_target else "P"
        return "O" if on_target else "_"

    return "\n".join("".join(f" {symbol((r, c))} \t" for c in range(level.cols)) for r in range(level.rows))


_RULES = """You are an expert Sokoban player.

# Symbols
- Wall (`#`): blocks movement; nothing can be moved into a wall.
- Floor (`_`): free space for you and the boxes.
- Target (`O`): a square where a box has to end up.
- Box (`X`): push these onto the targets.
- Player (`P`): you.
- Box on target (`√`): a box already placed on a target.
- Player on target (`S`): you, standing on a target.

# Goal
Push every box (`X`) onto a target (`O`). You win as soon as all boxes sit on targets.

# Rules
You can push a box but never pull it, so think ahead.
Neither you nor a box can pass through a wall (`#`).
Do not push a box into a corner or along a wall where it can no longer be moved to a target.

# Current Step
"""
ANCHOR = "Now it's your turn to take an action."
_INSTRUCTIONS = f"""Your admissible actions are ["up", "down", "left", "right"].

{ANCHOR} Choose exactly one action for this step.
First reason step by step about where the boxes, the targets and you are, and how to push a box toward
a target without trapping it; put this reasoning inside <think> </think> tags.
Then give your chosen admissible action inside <action> </action> tags."""


def _box_trap(level: Level, box: Pos) -> str:
    """Plain words for why a box square is bad: a corner, along a wall, or just a dead position."""
    near = {name: _add(box, d) in level.walls for name, d in DIRECTIONS.items()}
    if (near["up"] or near["down"]) and (near["left"] or near["right"]):
        return "into a corner"
    sides = {"up": "above it", "down": "below it", "left": "to its left", "right": "to its right"}
    walls = [sides[name] for name, blocked in near.items() if blocked]
    return f"against the wall {walls[0]}" if walls else "into a position it could not be pushed out of"


def _where(cell: Pos) -> str:
    return f"row {cell[0] + 1}, column {cell[1] + 1}"


class SokobanEnv(SeededTaskSet, TimeLimit):
    """One Sokoban episode at a time; the level is rebuilt from ``task.seed`` (``payload`` stays empty)."""

    name = "sokoban"
    task_type = "sokoban"  # SeededTaskSet: the type of every task
    splits = ("train", "test")
    task_types = ("sokoban",)

    def __init__(self, cfg: EnvConfig) -> None:
        self.cfg = cfg
        self._level: Level | None = None
        self._state: State = ((0, 0), frozenset())

    def level(self, task: Task) -> Level:
        """The start position of ``task`` (cached; depends on the seed, env.sokoban and env.max_steps)."""
        sok = self.cfg.sokoban
        return generate_level(task.seed, *sok.dim_room, sok.num_boxes, sok.search_depth, self.cfg.max_steps)

    def _reset(self, task: Task) -> str:
        self._level = self.level(task)
        self._state = (self._level.player, self._level.boxes)
        return render(self._level, self._state)

    def build_prompt(self, observation: str, history: list[HistoryItem], step: int) -> str:
        current = "Your current observation is:"
        if history:
            current = f"{history_block(history, step)}\nYou are now at step {step + 1} and y{current[1:]}"
        return f"{_RULES}{current}\n{observation}\n{_INSTRUCTIONS}"

    def parse_action(self, response: str) -> ParsedAction:
        """Valid iff there is a think block, exactly one ``<action>`` block holding one of
        up/down/left/right (case-insensitive) and no CJK text; otherwise ``("", False)``."""
        text = response.lower()
        actions = tag_contents(text, "action")
        if len(actions) != 1 or not has_think_block(text) or has_cjk(text):
            return ParsedAction(action="", valid=False)
        action = actions[0].strip()
        return ParsedAction(action=action, valid=True) if action in DIRECTIONS else ParsedAction("", False)

    def _step(self, action: str) -> StepResult:
        level = self._require_episode()
        before = len(self._state[1] & level.targets)
        if action in DIRECTIONS:
            self._state = move(level.walls, self._state, action)
        on_target = len(self._state[1] & level.targets)
        won = self._state[1] <= level.targets
        reward = STEP_PENALTY + BOX_ON_TARGET * (on_target - before) + (SOLVED_BONUS if won else 0.0)
        info = {"action_valid": action in DIRECTIONS, "boxes_on_target": on_target}
        return StepResult(render(level, self._state), reward, won, won, info)

    def task_description(self) -> str:
        return "Push every box onto a target square in the Sokoban grid."

    def expert_action(self) -> str:
        """First move of a shortest solution from the current state (``"up"`` if none exists)."""
        path = solve(self._require_episode(), self._state)
        return path[0] if path else "up"

    def format_response(self, action: str) -> str:
        return (
            "<think>I follow the shortest plan that pushes every box onto a target without trapping any box; "
            f"the next move of that plan is {action}.</think><action>{action}</action>"
        )

    def oracle_skill(self, task: Task, actions: list[str], success: bool) -> dict[str, str]:
        """Hindsight from the solver: the workflow that solved the level, or the first mistake
        (steps are 1-based, as in the prompt's "You are now at step k")."""
        level = self.level(task)
        optimal = solve(level) or []
        if success:
            moves = [a for a in actions if a in DIRECTIONS]
            pushes, state = 0, (level.player, level.boxes)
            for action in moves:
                nxt = move(level.walls, state, action)
                pushes, state = pushes + (nxt[1] != state[1]), nxt
            return {
                "episode_summary": f"Solved the level in {len(actions)} steps ({pushes} pushes); the shortest "
                f"solution has {len(optimal)} moves.",
                "episode_skill": "Workflow: find each box and the target it can reach, walk to the square on the "
                "far side of the box (opposite the target), then push it straight toward the target, re-planning "
                f"after every push. Here the moves {', '.join(moves)} worked; never push a box into a corner or "
                "against a wall that has no target along it.",
            }
        mistake, final = _first_mistake(level, actions, len(optimal), self.cfg.max_steps)
        return {
            "episode_summary": f"Failed after {len(actions)} steps with {len(final[1] & level.targets)} of "
            f"{len(level.boxes)} boxes on targets; a shortest solution from the start is {len(optimal)} moves: "
            f"{', '.join(optimal)}.",
            "episode_skill": f"Avoid this mistake: {mistake}",
        }

    def judge_skill(self, task: Task, skill: str) -> bool:
        """Whether ``skill`` states a correct plan for this level: some run of moves it names (``STATED_MOVES``:
        direction words separated by commas, spaces, "then" or arrows), played from the level's start, puts
        every box on a target. A skill that names no solving sequence (the oracle's failure skills state the
        mistake, not the plan) is not a correct plan."""
        level = self.level(task)
        for run in STATED_MOVES.finditer(skill.lower()):
            state: State = (level.player, level.boxes)
            for action in re.findall(r"up|down|left|right", run.group(0)):
                state = move(level.walls, state, action)
                if state[1] <= level.targets:
                    return True
        return False

    def _require_episode(self) -> Level:
        if self._level is None:
            raise RuntimeError("sokoban: call reset(task) before step() or expert_action()")
        if self._done:
            raise RuntimeError("sokoban: the episode is over; call reset(task) to start a new one")
        return self._level


def _first_mistake(level: Level, actions: list[str], needed: int, max_steps: int) -> tuple[str, State]:
    """Replay ``actions`` with the solver: the first invalid, blocked or non-improving step (1-based), plus
    the step after which the level became unsolvable, if any; also the final state."""
    state: State = (level.player, level.boxes)
    mistake = ""
    for number, action in enumerate(actions, start=1):
        if action not in DIRECTIONS:
            mistake = mistake or (
                f"At step {number} the response had no valid <action> (no move was made); always answer with "
                "<think>...</think> then exactly one of up/down/left/right inside <action></action>."
            )
            continue
        nxt = move(level.walls, state, action)
        if nxt == state:
            mistake = mistake or (
                f"At step {number} moving {action} was blocked by a wall or an immovable box and wasted a step; "
                "check the square in the chosen direction before moving."
            )
            continue
        path = solve(level, nxt)
        if path is None:  # only a push can make a level unsolvable
            pushed = next(iter(nxt[1] - state[1]))
            deadlock = (
                f"At step {number} pushing {action} moved the box {_box_trap(level, pushed)} at {_where(pushed)} "
                "and the level became unsolvable; before every push check that the box's new square is not a "
                "corner and not against a wall without a target along it."
            )
            return (f"{mistake} Then: {deadlock}" if mistake else deadlock), nxt
        if len(path) >= needed and not mistake:
            best = solve(level, state) or ["up"]
            mistake = (
                f"At step {number} moving {action} did not bring the level closer to solved (a shortest plan "
                f"moved {best[0]} instead); with only {max_steps} steps, follow the shortest route."
            )
        state, needed = nxt, len(path)
    return mistake or (
        f"Every move made progress, but the episode ended after {len(actions)} steps with {needed} moves "
        "still needed; plan the full push sequence before moving."
    ), state
