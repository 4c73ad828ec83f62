"""Evaluated methods = the rows of the report: which policy is evaluated and whether it plays with the static
skill of its task type in the prompt (the paper's "*" rows, seed-algorithm.md §5.1). One table, in the
paper's order and with the paper's labels; the report, the sweep report and the pipeline read it.

| key | policy (checkpoint) | static skill in the prompt | label |
|---|---|---|---|
| ``vanilla`` / ``sft`` | base model / Stage-1 SFT | no | Vanilla / SFT |
| ``<algorithm>`` (every key of ALGORITHMS) | ``data/rl/<algorithm>/checkpoint`` | no | ``Algorithm.label`` |
| ``<policy>_star`` (e.g. ``skill_grpo_star``) | the policy's checkpoint | yes | ``<label>*`` (Skill-GRPO*) |

``vanilla_star`` is the paper's "Skill-Prompt*" (the base model with the static skills). Row order: the
policies in ``PAPER_ORDER``, each "*" row right after its policy; a key that is not a method (a label given
on the command line) goes last, by name, and is shown as is. Keys are machine-readable (file names, DVC stage
names ``evaluate@skill_grpo_star``, CSV/JSON ``method`` columns); labels are for people.
"""

from __future__ import annotations

from dataclasses import dataclass

from seed_core.algorithms import ALGORITHMS, CHECKPOINT_METHODS, PAPER_ORDER
from seed_core.registry import Registry

STAR = "_star"
"""Suffix of a method key evaluated with the static skills in the prompt (``skill_grpo_star``)."""
CHECKPOINT_LABELS = {"vanilla": "Vanilla", "sft": "SFT"}
STAR_LABELS = {"vanilla": "Skill-Prompt*"}
"""Starred rows whose paper label is not ``<label>*``."""


@dataclass(frozen=True)
class Method:
    key: str
    policy: str
    """``vanilla``, ``sft`` or a key of ALGORITHMS: the checkpoint that is evaluated."""
    with_skills: bool
    """Every task is played with the static skill of its type in the prompt (``seed_core.skills.static``)."""
    label: str
    """Row label in the tables (the paper's name)."""
    rank: int
    """Row position: 2 x the policy's index in PAPER_ORDER, + 1 for the "*" row."""

    @property
    def trained(self) -> bool:
        """The policy is an RL result (an ``rl@<policy>`` stage), not a fixed checkpoint."""
        return self.policy not in CHECKPOINT_METHODS

    @property
    def start(self) -> str:
        """What the policy was trained from (the report's ``from`` column): ``-`` for the base model itself,
        ``base`` for the Stage-1 SFT checkpoint and the RL runs that start from the base model, ``SFT`` for the RL
        runs that start from the Stage-1 checkpoint (``Algorithm.init``)."""
        if self.policy == "vanilla":
            return "-"
        return "base" if self.policy == "sft" or ALGORITHMS.get(self.policy).init == "base" else "SFT"


METHODS: Registry[Method] = Registry("method")

for _i, _policy in enumerate(PAPER_ORDER):
    _label = CHECKPOINT_LABELS.get(_policy) or ALGORITHMS.get(_policy).label
    for _star, _key in ((False, _policy), (True, _policy + STAR)):
        _text = STAR_LABELS.get(_policy, _label + "*") if _star else _label
        METHODS.register(_key)(Method(_key, _policy, _star, _text, 2 * _i + _star))


def star(key: str) -> str:
    """The "*" method of a policy: ``skill_grpo`` -> ``skill_grpo_star``."""
    return METHODS.get(key + STAR).key


def label(key: str) -> str:
    """The paper's label of a method key; an unknown key is its own label."""
    return METHODS.get(key).label if key in METHODS else key


def sort_key(key: str) -> tuple[int, str]:
    """Row order: the paper's (``PAPER_ORDER``, "*" after its policy), unknown keys last by name."""
    return (METHODS.get(key).rank if key in METHODS else 2 * len(PAPER_ORDER), key)


def in_paper_order(keys: list[str] | tuple[str, ...]) -> list[str]:
    return sorted(keys, key=sort_key)
