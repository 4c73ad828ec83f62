"""Insert an episode-level skill into an agent prompt: the teacher (skill-augmented) context.

OPID's rule (seed-algorithm.md §2.5), used by SEED: a three-line section (bold title, instruction line
ending with ':', the skill in square brackets) on its own paragraph right after the first task line
("Your task is to:", then "Your current task is:", "Your task is:", "Your question:"); without a task
line, before the "Now it's your turn" anchor; without either, at the end. An empty skill changes nothing
(``keep_empty`` inserts the section with empty brackets: the empty-skill teacher control).
"""

from __future__ import annotations

import re

EPISODE_SKILL_TITLE = "**Episode-Level Skill**"
EPISODE_SKILL_INSTRUCTION = (
    "Refer to this episode-level skill when deciding what action to take in the current episode:"
)

TASK_LINE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(rf"^.*{re.escape(marker)}.*$", re.MULTILINE)
    for marker in ("Your task is to:", "Your current task is:", "Your task is:", "Your question:")
)
"""Tried in this order (priority, not position): the first pattern that matches anywhere wins."""

TURN_ANCHORS: tuple[str, ...] = ("Now it's your turn to", "Now it's your turn")


def render_skill_section(title: str, instruction: str, skill: str) -> str:
    """``title`` / ``instruction:`` / ``[skill]`` as three lines."""
    return f"{title}\n{instruction.rstrip().rstrip(':')}:\n[{skill.strip()}]"


def _splice(head: str, section: str, tail: str) -> str:
    """``head``, a blank line, ``section``, a blank line, ``tail`` (no blank line at an empty end)."""
    parts = [part for part in (head.rstrip("\n"), section, tail.lstrip("\n")) if part]
    return "\n\n".join(parts)


def insert_episode_skill(prompt: str, skill: str, *, keep_empty: bool = False) -> str:
    """``prompt`` with the episode-skill section inserted (see module docstring); blank skill -> unchanged, unless
    ``keep_empty``: then the section is inserted with nothing between its brackets (the empty-skill control)."""
    if not skill.strip() and not keep_empty:
        return prompt
    section = render_skill_section(EPISODE_SKILL_TITLE, EPISODE_SKILL_INSTRUCTION, skill)
    for pattern in TASK_LINE_PATTERNS:
        match = pattern.search(prompt)
        if match:
            return _splice(prompt[: match.end()], section, prompt[match.end() :])
    for anchor in TURN_ANCHORS:
        position = prompt.find(anchor)
        if position >= 0:
            return _splice(prompt[:position], section, prompt[position:])
    return _splice(prompt, section, "")


STEP_SKILL_TITLE = "**Critical-Step Skill**"
STEP_SKILL_INSTRUCTION = "Use this current-step skill for this decision only:"


def insert_step_skill(prompt: str, skill: str) -> str:
    """``prompt`` with the step-skill section (OPID §2.5) before the "Now it's your turn" anchor, else at the
    end; blank skill -> unchanged."""
    if not skill.strip():
        return prompt
    section = render_skill_section(STEP_SKILL_TITLE, STEP_SKILL_INSTRUCTION, skill)
    for anchor in TURN_ANCHORS:
        position = prompt.find(anchor)
        if position >= 0:
            return _splice(prompt[:position], section, prompt[position:])
    return _splice(prompt, section, "")
