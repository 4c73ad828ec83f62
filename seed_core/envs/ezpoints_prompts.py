"""EZPoints' prompt texts: the paper's (``INTRO`` + ``ANSWER``, gym-cards' rules as prose) and the compact ones of
the mechanism lab (``env.ezpoints.prompt: compact``); ``seed_core.envs.ezpoints`` fills them in."""

INTRO = """You are an expert card-game player. Build a formula that evaluates to {target} using only the numbers
on the two playing cards described below. You build it one token at a time: each step appends exactly one
token to the end of the current formula, either one of the two card numbers, the operator '+' or '*', or
the equals sign '='.

Card rules:
1. There are exactly two cards, and each card stands for one number.
2. Number cards (2-10) count as their face value; face cards (Jack, Queen, King) count as 10;
   an Ace counts as 1.
3. Only these two card numbers may appear in the formula.
4. Each card can be used only once (a number shown on both cards can be used twice).

Formula rules:
1. Each step appends one token: a card number, '+', '*' or '='.
2. Appending '=' evaluates the formula and ends the game.
3. A formula longer than {max_length} tokens cannot grow any further.

Rewards:
+10 if, when you append '=', the formula equals {target} and uses both card numbers.
-1 for a number that is not on the cards or is already used, for a formula that has grown too long,
   and for a wrong formula at '='.

"""
ANSWER = """
Your response must be one valid JSON object in this format:
{{
  "thoughts": "read both card numbers and the current formula, then reason step by step toward {target}",
  "action": "the next token to append: a card number, '+', '*' or '='"
}}"""


COMPACT = """Your task is: append one token per step (a card number, '+', '*' or '=') to build a formula equal to \
{target}.
Step {step}. {observation}
Answer with JSON: {{"thoughts": "...", "action": "<token>"}}"""
"""``env.ezpoints.prompt: compact``: task line (skills are inserted after it), observation, answer format."""

COMPACT_OPERATOR = """Your task is: choose the operator ('+' or '*') that makes the first card number, the operator and \
the second card number equal {target}.
Step {step}. {observation}
Answer with JSON: {{"thoughts": "...", "action": "<operator>"}}"""
"""``prompt: compact`` with ``action_unit: operator``."""

HIDDEN_TARGET = "the hidden target (the sum or the product of the two card numbers)"
"""How the task line names the target under ``target_rule: suit`` (it never says which)."""
