"""``ezpoints``: the gym-cards EZPoints card game as text (build a formula equal to 12 from two cards).

Rules as in gym-cards ``EZPointEnv`` (environments-notes.md §3.2):

* Cards: the first rank is uniform in 2..13 (J, Q, K count 10); the second card is ``target / first``
  with probability 0.5 when that is a card value, else ``target - first``; the pair is swapped with
  probability 0.5; suits are random. Seeded per task, so a solution always exists. (An ace, value 1,
  is in the rules text but is never dealt for target 12, exactly as in gym-cards.)
* Tokens ``"1".."10"``, ``"+"``, ``"*"``, ``"="``; the formula is a token list shown joined (``"10+2"``).
* Each step, checked in this order: (1) a formula already longer than ``max_formula_length`` *tokens*
  (gym-cards counts list items, so ``"10"`` is one) gives ``-1`` and changes nothing (gym-cards sets
  ``truncated``; verl-agent forwards only ``terminated``, so the episode goes on); (2) a number not on the
  cards, or used more often than it appears, gives ``-1`` and appends ``" "`` (faithful: gym-cards pads so
  the formula still grows); (3) ``"="`` evaluates the formula: ``+10`` iff it equals ``target`` and both
  cards were used (won), else ``-1``; the episode ends; (4) anything else is appended for reward 0.
* An unparsed response (``""``) or an unknown token is a no-op with reward 0 (the trainer applies the
  format penalty). The episode also ends after ``max_steps`` steps (verl-agent: 8).
* The formula is evaluated by a tiny parser that mirrors Python's ``eval`` on this alphabet (``+``/``*``,
  unary ``+``, ``**``, digits, spaces), never by ``eval`` itself.

The mechanism-lab variant (issue 25; ``presets/testbed-mechanism.yaml``) changes three rules, each a key of
``env.ezpoints``:

* ``target_rule: suit``: both card values uniform in 2..10 (J, Q, K count 10; never two 2s, whose sum is their
  product), suits random; the hidden target is ``a + b`` if the first card is red (hearts, diamonds) and ``a * b``
  if it is black. The task line says "the sum or the product", so a policy that ignores the suit is right half
  the time, and a failed episode tells in hindsight which one it was (the other).
* ``action_unit: operator``: the action is the operator alone (``+`` or ``*``), played as the first card, the
  operator, the second card and ``=``: an episode is one decision, P(expert action) is the probability of that
  decision, and nothing has to be copied from the observation.
* ``reward: binary``: 1 for a win, else 0 (no -1 penalties), so an all-fail group has zero GRPO advantage.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from seed_core.config import EnvConfig
from seed_core.envs.base import TimeLimit
from seed_core.envs.ezpoints_prompts import ANSWER, COMPACT, COMPACT_OPERATOR, HIDDEN_TARGET, INTRO
from seed_core.envs.prompt_parts import SeededTaskSet, history_block
from seed_core.types import HistoryItem, ParsedAction, StepResult, Task

NUMBERS = tuple(str(v) for v in range(1, 11))
TOKENS = (*NUMBERS, "+", "*", "=")
SUITS = ("hearts", "spades", "diamonds", "clubs")
RANK_NAMES = {1: "Ace", 11: "Jack", 12: "Queen", 13: "King"}
WIN_REWARD = 10.0
PENALTY = -1.0
_MAX_EXPONENT = 64
STATED_FORMULA = re.compile(r"(?<!\d)(?<!\d\.)(\d{1,2})\s*([+*])\s*(\d{1,2})(?!\d|\.\d)")
"""A formula of two numbers as a skill states it (``4*3``, ``10 + 2``, ``Answer 4*6.``; not a decimal such as ``4*6.5``):
what ``judge_skill`` reads."""
RED_SUITS = ("hearts", "diamonds")
"""``target_rule: suit``: a red first card makes the hidden target the sum, a black one the product."""
PLAN = re.compile(r"answer '([+*])'")
"""The plan a ``target_rule: suit`` oracle skill states (``...: answer '*'.``): what ``plan_action`` reads."""


def evaluate(formula: str) -> int | None:
    """Value of ``formula`` as Python's ``eval`` would compute it, or ``None`` on a syntax error.

    Grammar (Python's, restricted): ``sum := prod ('+' prod)*``, ``prod := unary ('*' unary)*``,
    ``unary := '+' unary | power``, ``power := NUMBER ('**' unary)?``; spaces separate tokens, so
    ``"5 7"`` is an error while ``"5+ 7"`` is 12.
    """
    tokens = re.findall(r"\d+|\*\*|[+*]|\S", formula)
    pos = 0

    def peek() -> str:
        return tokens[pos] if pos < len(tokens) else ""

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def unary() -> int | None:
        if peek() == "+":
            take()
            return unary()
        if not peek().isdigit():
            return None
        base = int(take())
        if peek() != "**":
            return base
        take()
        exponent = unary()
        return None if exponent is None or exponent > _MAX_EXPONENT else base**exponent

    def chain(op: str, operand: Callable[[], int | None]) -> int | None:
        value = operand()
        while value is not None and peek() == op:
            take()
            right = operand()
            value = None if right is None else (value + right if op == "+" else value * right)
        return value

    value = chain("+", lambda: chain("*", unary))
    return value if pos == len(tokens) else None


def deal(seed: int, target: int) -> tuple[tuple[int, int], tuple[str, str]]:
    """The two card values and their names for task ``seed`` (gym-cards ``_generate_cards``)."""
    if not any(1 <= target - v <= 10 or (target % v == 0 and target // v <= 10) for v in range(2, 11)):
        raise ValueError(f"env.ezpoints.target={target} cannot be made from two card values; use e.g. 12")
    rng = random.Random(f"ezpoints:{seed}")
    while True:
        rank = rng.randint(2, 13)
        first = min(rank, 10)
        product = target // first if target % first == 0 and 1 <= target // first <= 10 else None
        total = target - first if 1 <= target - first <= 10 else None
        if product is None and total is None:
            continue  # only for unusual targets; 12 always has an answer
        second = product if product is not None and (total is None or rng.random() <= 0.5) else total
        assert second is not None
        names = [f"{RANK_NAMES.get(r, str(r))} of {rng.choice(SUITS)}" for r in (rank, second)]
        cards, labels = (first, second), (names[0], names[1])
        if rng.random() <= 0.5:
            cards, labels = cards[::-1], labels[::-1]
        return cards, labels


def deal_suit(seed: int) -> tuple[tuple[int, int], tuple[str, str], int]:
    """Cards, their names and the hidden target of task ``seed`` under ``target_rule: suit`` (module docstring)."""
    rng = random.Random(f"ezpoints-suit:{seed}")
    while True:
        ranks = (rng.randint(2, 13), rng.randint(2, 13))
        cards = (min(ranks[0], 10), min(ranks[1], 10))
        if cards != (2, 2):
            break
    suits = (rng.choice(SUITS), rng.choice(SUITS))
    labels = (f"{RANK_NAMES.get(ranks[0], str(ranks[0]))} of {suits[0]}",
              f"{RANK_NAMES.get(ranks[1], str(ranks[1]))} of {suits[1]}")
    target = cards[0] + cards[1] if suits[0] in RED_SUITS else cards[0] * cards[1]
    return cards, labels, target


def solutions(cards: tuple[int, int], target: int) -> list[list[str]]:
    """Every winning token sequence ``[a, op, b, "="]`` for these cards (either order)."""
    a, b = (str(c) for c in cards)
    found = []
    for op in ("+", "*"):
        if (cards[0] + cards[1] if op == "+" else cards[0] * cards[1]) == target:
            found += [[a, op, b, "="]] + ([[b, op, a, "="]] if a != b else [])
    return found


def first_card_operator(game: "Game") -> str:
    """The operator of the winning formula that starts with the first card (``action_unit: operator``)."""
    return next(s[1] for s in solutions(game.cards, game.target) if s[0] == str(game.cards[0]))


@dataclass
class Game:
    """Mutable state of one EZPoints formula; ``play`` applies one token and returns (reward, note).
    ``over`` is set once ``=`` has been played (the env also ends the episode at ``max_steps``)."""

    cards: tuple[int, int]
    target: int
    max_length: int
    tokens: list[str] = field(default_factory=list)
    used: list[int] = field(default_factory=list)
    over: bool = False
    won: bool = False

    @property
    def formula(self) -> str:
        return "".join(self.tokens)

    def play(self, action: str) -> tuple[float, str]:
        """Notes: ``invalid``, ``too_long``, ``unavailable``, ``evaluated``, ``appended``."""
        if action not in TOKENS:
            return 0.0, "invalid"
        if len(self.tokens) > self.max_length:
            return PENALTY, "too_long"
        if action in NUMBERS:
            if Counter(self.used + [int(action)]) - Counter(self.cards):
                self.tokens.append(" ")
                return PENALTY, "unavailable"
            self.used.append(int(action))
        if action == "=":
            self.over = True
            self.won = evaluate(self.formula) == self.target and len(self.used) == len(self.cards)
            return (WIN_REWARD if self.won else PENALTY), "evaluated"
        self.tokens.append(action)
        return 0.0, "appended"

    def next_tokens(self) -> list[str]:
        """Tokens that keep the formula on a winning sequence (empty once it has left every one)."""
        n = len(self.tokens)
        matching = [s[n] for s in solutions(self.cards, self.target) if s[:n] == self.tokens and n < len(s)]
        return list(dict.fromkeys(matching))  # first card first


class EZPointsEnv(SeededTaskSet, TimeLimit):
    """One EZPoints episode at a time; the cards are rebuilt from ``task.seed`` (``payload`` stays empty)."""

    name = "ezpoints"
    splits = ("train", "test")
    task_types = ("ezpoints",)
    task_type = "ezpoints"  # SeededTaskSet: the type of every task

    def __init__(self, cfg: EnvConfig) -> None:
        if cfg.ezpoints.action_unit == "operator" and cfg.ezpoints.prompt != "compact":
            raise ValueError("env.ezpoints.action_unit=operator needs env.ezpoints.prompt=compact (the paper prompt "
                             "teaches one token per step); set prompt: compact")
        self.cfg = cfg
        self._game: Game | None = None
        self._labels: tuple[str, str] = ("", "")

    @property
    def operator_actions(self) -> bool:
        return self.cfg.ezpoints.action_unit == "operator"

    def new_game(self, task: Task) -> tuple[Game, tuple[str, str]]:
        ez = self.cfg.ezpoints
        if ez.target_rule == "suit":
            cards, labels, target = deal_suit(task.seed)
        else:
            (cards, labels), target = deal(task.seed, ez.target), ez.target
        return Game(cards, target, ez.max_formula_length), labels

    def _target_text(self) -> str:
        return HIDDEN_TARGET if self.cfg.ezpoints.target_rule == "suit" else str(self.cfg.ezpoints.target)

    def _reset(self, task: Task) -> str:
        self._game, self._labels = self.new_game(task)
        return self._observation()

    def _observation(self) -> str:
        game = self._require_game()
        cards = f"Cards: {self._labels[0]}, {self._labels[1]} (values {game.cards[0]} and {game.cards[1]})"
        return cards if self.operator_actions else f"{cards}\nThe current formula is: '{game.formula}'"

    def build_prompt(self, observation: str, history: list[HistoryItem], step: int) -> str:
        ez, target = self.cfg.ezpoints, self._target_text()
        if ez.prompt == "compact":
            template = COMPACT_OPERATOR if self.operator_actions else COMPACT
            return template.format(target=target, observation=observation, step=step + 1)
        current = "Your current observation is:"
        if history:
            current = f"{history_block(history, step)}\nYou are now at step {step + 1} and y{current[1:]}"
        return (
            f"{INTRO.format(target=target, max_length=ez.max_formula_length)}{current}\n{observation}\n"
            f"Append the next token to the current formula.\n{ANSWER.format(target=target)}"
        )

    def parse_action(self, response: str) -> ParsedAction:
        """gym-cards projection: after the first ``"action":`` exactly one distinct allowed token may
        occur (``10`` is removed before looking for ``1``); anything else is ``("", False)``."""
        text = response.lower()
        start = text.find('"action":')
        if start == -1:
            return ParsedAction(action="", valid=False)
        rest = text[start + len('"action":') :]
        if self.operator_actions:  # exactly one distinct operator after "action":
            found = {op for op in "+*" if op in rest}
            return ParsedAction(found.pop(), True) if len(found) == 1 else ParsedAction("", False)
        found = {"10"} if "10" in rest else set()
        rest = rest.replace("10", "")
        found |= {t for t in TOKENS if t != "10" and t in rest}
        return ParsedAction(action=found.pop(), valid=True) if len(found) == 1 else ParsedAction("", False)

    def _step(self, action: str) -> StepResult:
        game = self._require_game()
        if self.operator_actions:  # the first card, the operator, the second card and ``=``
            reward, note = 0.0, "invalid"
            a, b = game.cards
            for token in [str(a), action, str(b), "="] if action in ("+", "*") else []:
                step_reward, note = game.play(token)
                reward += step_reward
        else:
            reward, note = game.play(action)
        if self.cfg.ezpoints.reward == "binary":
            reward = 1.0 if game.won else 0.0
        info = {"action_valid": note != "invalid", "note": note, "formula": game.formula}
        return StepResult(self._observation(), reward, game.over, game.won, info)

    def task_description(self) -> str:
        game = self._require_game()
        a, b = game.cards
        target = HIDDEN_TARGET if self.cfg.ezpoints.target_rule == "suit" else str(game.target)
        return f"Build a formula equal to {target} from the card numbers {a} and {b}."

    def expert_action(self) -> str:
        """Next token of a winning formula, or ``"="`` once the formula has left every winning one; with
        ``action_unit: operator`` the operator of the winning formula that starts with the first card."""
        game = self._require_game()
        if self.operator_actions:
            return first_card_operator(game)
        options = game.next_tokens()
        return options[0] if options else "="

    def naive_action(self) -> str:
        """What a player who ignores the hidden rule does (``testbed.plain_policy: naive``): the *sum* of the two
        card numbers, first card first (``+``, or the next token of that formula)."""
        game = self._require_game()
        a, b = game.cards
        if self.operator_actions:
            return "+"
        naive = Game(game.cards, a + b, game.max_length, list(game.tokens), list(game.used))
        options = naive.next_tokens()
        return options[0] if options else "="

    def random_action(self, rng: random.Random) -> str:
        """A uniformly random action: an operator, or a token."""
        return rng.choice("+*") if self.operator_actions else rng.choice(TOKENS)

    def plan_action(self, skill: str) -> str | None:
        """The action a skill's plan prescribes (``PLAN``: ``answer '*'``), operator actions only; None if it states
        none (``testbed.mismatch_fraction``: the policy is taught to follow the content of another task's skill)."""
        match = PLAN.search(skill) if self.operator_actions else None
        return match.group(1) if match else None

    def format_response(self, action: str) -> str:
        thoughts = ("I read both cards and choose the operator." if self.operator_actions else
                    "I read both card numbers and the current formula and append the token that completes it.")
        return json.dumps({"thoughts": thoughts, "action": action})

    def oracle_skill(self, task: Task, actions: list[str], success: bool) -> dict[str, str]:
        """The formula that worked, or the first token that left every winning formula (1-based step); under
        ``target_rule: suit`` the rule the first card's colour decides and the answer (``suit_skill``)."""
        if self.cfg.ezpoints.target_rule == "suit":
            return self.suit_skill(task, actions, success)
        game, _ = self.new_game(task)
        a, b = game.cards
        answer = solutions(game.cards, game.target)[0]
        tokens = ", ".join(repr(t) for t in answer)
        plan = f"{a} and {b}: {''.join(answer[:3])} = {game.target}, so append {tokens}"
        if success:
            for action in actions:
                game.play(action)
            summary = f"Built '{game.formula}' = {game.target} from the cards {a} and {b} in {len(actions)} steps."
            skill = (
                f"Workflow: first check whether the two card numbers add up to {game.target} (use '+') or "
                f"multiply to {game.target} (use '*'); then append the first number, the operator, the second "
                f"number and '='. Here the cards were {plan}."
            )
            return {"episode_summary": summary, "episode_skill": skill}
        mistake = ""
        for number, action in enumerate(actions, start=1):
            expected = game.next_tokens()
            before = game.formula
            _, note = game.play(action)
            if action not in expected:
                mistake = self._describe(number, action, before, note, expected)
                break
        formula = game.formula
        mistake = mistake or f"The formula '{formula}' was never finished with '=' in {self.cfg.max_steps} steps."
        summary = f"Failed with the formula '{formula}' after {len(actions)} steps; the cards were {a} and {b}."
        skill = (
            f"Avoid this mistake: {mistake} Rule: use only the card numbers {a} and {b}, each once, and never "
            f"append '=' before the formula is complete. For cards {plan}."
        )
        return {"episode_summary": summary, "episode_skill": skill}

    def suit_skill(self, task: Task, actions: list[str], success: bool) -> dict[str, str]:
        """``target_rule: suit``: "the first card is red/black, so the hidden target is the sum/product of the two
        card numbers: answer '+'/'*'." (``PLAN``, which ``plan_action`` reads; no instance values)."""
        _, labels = self.new_game(task)
        colour, kind, op = ("red", "sum", "+") if labels[0].rsplit(" ", 1)[-1] in RED_SUITS else \
            ("black", "product", "*")
        tried = " then ".join(repr(a) for a in actions) or "nothing"
        rule = f"the first card is {colour}, so the hidden target is the {kind} of the two card numbers: answer '{op}'."
        if success:
            return {"episode_summary": f"Answered {tried} and won.", "episode_skill": f"Workflow: {rule}"}
        return {"episode_summary": f"Answered {tried} and failed.",
                "episode_skill": f"Avoid the wrong operator: {rule}"}

    def judge_skill(self, task: Task, skill: str) -> bool:
        """Whether ``skill`` states a correct solution for this instance: some formula ``a op b`` in its text
        (``STATED_FORMULA``: two numbers joined by ``+`` or ``*``) uses exactly the two card values and equals
        the target. A skill for other cards, with the wrong operator, or with no formula at all is wrong (the
        oracle's skills, success and failure alike, state the winning formula). With ``action_unit: operator``
        the plan is the operator: a skill is correct iff the operator it prescribes (``plan_action``) is this
        instance's (another instance's skill with the same rule is a correct plan here too)."""
        game, _ = self.new_game(task)
        if self.operator_actions:
            return self.plan_action(skill) == first_card_operator(game)
        for a, op, b in STATED_FORMULA.findall(skill):
            x, y = int(a), int(b)
            if sorted((x, y)) == sorted(game.cards) and (x + y if op == "+" else x * y) == game.target:
                return True
        return False

    def instance_values(self, task: Task) -> dict[str, str]:
        """The values of this instance (``seed_core.skills.static`` step 3): the two card values and card names,
        cut out of a type-level skill ("the card numbers 4 and 8" -> "the card numbers")."""
        game, labels = self.new_game(task)
        return {**{str(c): "" for c in game.cards}, **{label: "" for label in labels}}

    def _describe(self, number: int, action: str, before: str, note: str, expected: list[str]) -> str:
        should = f"; the right token was {' or '.join(repr(t) for t in expected)}" if expected else ""
        reasons = {
            "invalid": "the response had no single valid action in its JSON",
            "too_long": f"the formula '{before}' was already too long to extend",
            "unavailable": f"'{action}' is not an unused card number",
            "evaluated": f"appending '=' evaluated the unfinished or wrong formula '{before}'",
            "appended": f"appending '{action}' to '{before}' cannot lead to {self.cfg.ezpoints.target}",
        }
        return f"At step {number} {reasons[note]}{should}."

    def _require_game(self) -> Game:
        if self._game is None:
            raise RuntimeError("ezpoints: call reset(task) before step() or expert_action()")
        return self._game
