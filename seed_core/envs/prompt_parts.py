"""Pieces shared by the in-repo text games (``sokoban``, ``ezpoints``).

Owns: the seeded task lists of the ``train``/``test`` splits (disjoint seed spaces; ``seed_universe`` and
``seeded_tasks`` for the fixed evaluation panels), the verl-agent
history block (``SimpleMemory.fetch`` layout, 1-based step numbers), and small response checks
(tag extraction, CJK detection) used by the action parsers.
"""

from __future__ import annotations

import random
import re

from seed_core.types import HistoryItem, ParsedAction, Task

SEEDS_PER_SPLIT = 10**6
"""Size of each split's seed space; split ``s`` uses seeds ``[offset_s, offset_s + SEEDS_PER_SPLIT)``."""
SPLIT_OFFSETS: dict[str, int] = {"train": 0, "test": SEEDS_PER_SPLIT}
"""Train and test seeds never overlap (verl-agent draws them from disjoint ranges, too)."""

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def make_seeded_tasks(env: str, task_type: str, split: str, n: int, seed: int) -> list[Task]:
    """``n`` distinct generated tasks of ``split``, the same list for the same ``seed``.

    The task seed rebuilds the whole instance, so the payload stays empty.
    """
    if split not in SPLIT_OFFSETS:
        raise ValueError(f"{env}: unknown split {split!r}; choose one of {', '.join(SPLIT_OFFSETS)}")
    if not 0 <= n <= SEEDS_PER_SPLIT:
        raise ValueError(f"{env}: n={n} tasks is outside 0..{SEEDS_PER_SPLIT}; ask for fewer tasks")
    picks = random.Random(seed).sample(range(SEEDS_PER_SPLIT), n)
    return seeded_tasks(env, task_type, split, [SPLIT_OFFSETS[split] + p for p in picks])


def seed_universe(env: str, split: str) -> range:
    """Every task seed of ``split`` (the instances a fixed evaluation panel is drawn from, ``seed_core.panels``)."""
    if split not in SPLIT_OFFSETS:
        raise ValueError(f"{env}: unknown split {split!r}; choose one of {', '.join(SPLIT_OFFSETS)}")
    return range(SPLIT_OFFSETS[split], SPLIT_OFFSETS[split] + SEEDS_PER_SPLIT)


def seeded_tasks(env: str, task_type: str, split: str, seeds: list[int]) -> list[Task]:
    """The generated tasks of these seeds, in this order (a seed outside the split's range is refused)."""
    universe = seed_universe(env, split)
    if bad := [s for s in seeds if s not in universe]:
        raise ValueError(f"{env}: seed {bad[0]} is not a {split!r} seed ({universe.start}..{universe.stop - 1})")
    return [Task(env=env, task_id=f"{env}-{split}-{s}", seed=s, split=split, task_type=task_type) for s in seeds]


class SeededTaskSet:
    """Tasks and evaluation panels of a generated environment whose task is its seed (EZPoints, Sokoban): a
    mixin before ``TextEnv`` in the bases; ``task_type`` is the one type its tasks carry."""

    name: str
    task_type: str

    def make_tasks(self, split: str, n: int, seed: int) -> list[Task]:
        return make_seeded_tasks(self.name, self.task_type, split, n, seed)

    def panel_universe(self, split: str) -> range:
        """The split's task seeds (a seed rebuilds the whole instance)."""
        return seed_universe(self.name, split)

    def panel_source(self) -> dict:
        return {}

    def panel_tasks(self, split: str, ids) -> list[Task]:
        return seeded_tasks(self.name, self.task_type, split, [int(i) for i in ids])


def history_block(history: list[HistoryItem], step: int) -> str:
    """The "Prior to this step ..." paragraph: one ``[Observation k: '...', Action k: '...']`` line
    per remembered step, ``k`` 1-based (``HistoryItem.step`` is 0-based)."""
    lines = [
        f"[Observation {item.step + 1}: '{item.observation}', Action {item.step + 1}: '{item.action}']"
        for item in history
    ]
    return (
        f"Prior to this step, you have already taken {step} step(s). Below are the most recent "
        f"{len(history)} observations and the corresponding actions you took: " + "\n".join(lines)
    )


def has_cjk(text: str) -> bool:
    """True when ``text`` holds Chinese, Japanese or Korean characters (a format error for the parsers)."""
    return _CJK.search(text) is not None


def tag_contents(text: str, tag: str) -> list[str]:
    """Every ``<tag>...</tag>`` body in ``text``, in order (non-greedy, across lines)."""
    return re.findall(rf"<{tag}>(.*?)</{tag}>", text, flags=re.DOTALL)


def has_think_block(text: str) -> bool:
    """True when ``text`` has a ``<think>`` opening tag followed later by ``</think>``."""
    start = text.find("<think>")
    return start != -1 and text.find("</think>", start) != -1


def project_action_tag(response: str, fallback_chars: int) -> ParsedAction:
    """verl-agent's projection: lower-case; the text between the first ``<action>`` and the next ``</action>``,
    valid only with a think block and no CJK text; without the tags the last ``fallback_chars`` characters are
    sent and the step is invalid. Environments may add their own admissibility condition on top."""
    text = response.lower()
    start = text.find("<action>")
    end = text.find("</action>", start + len("<action>")) if start >= 0 else -1
    if start < 0 or end < 0:
        return ParsedAction(action=text[-fallback_chars:].strip(), valid=False)
    action = text[start + len("<action>"):end].strip()
    return ParsedAction(action=action, valid=has_think_block(text) and not has_cjk(response))
