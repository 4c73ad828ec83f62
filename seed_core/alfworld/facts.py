"""An ALFWorld PDDL state as plain data, read from a problem text or from the live engine.

``World.facts`` holds lower-case tuples ``(predicate, arg, ...)`` (``("inreceptacle", obj, recep)``),
exactly the atoms TextWorld keeps in ``state["_facts"]``; ``World.names`` maps every entity id to the
name the game prints (``"apple_bar__minus_01_dot_02..." -> "apple 2"``).

Names follow ALFWorld's ``AlfredDemangler``: the class is the id's text before the first ``_bar_``
(with ``basin`` appended for sink and bathtub basins), and the ids of a class, sorted, are numbered
from the class count down to 1. The numbering only depends on the set of ids of that class, which is
the same in the problem text and in the engine, so both sources give identical commands.

``Goal`` is the task read from the problem's ``(:goal ...)``: task label, object type, receptacle type
and lamp type (look tasks), all lower-case class names (``"apple"``, ``"countertop"``, ``"desklamp"``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

Fact = tuple[str, ...]

_ATOM = re.compile(r"\((\w+)((?:\s+[\w-]+)+)\s*\)")
_OBJECT_TYPE = re.compile(r"\(objectType\s+\?(\w+)\s+(\w+?)Type\)", re.IGNORECASE)
_RECEPTACLE_TYPE = re.compile(r"\(receptacleType\s+\?(\w+)\s+(\w+?)Type\)", re.IGNORECASE)


class ProblemFormatError(ValueError):
    """A PDDL problem text lacks the section or goal shape this module needs."""


@dataclass(frozen=True)
class Goal:
    label: str
    """pick, look, clean, heat, cool or pick2."""
    object_type: str
    receptacle_type: str = ""
    """Where the object must end up (empty for look)."""
    lamp_type: str = ""
    """The lamp to switch on (look only)."""

    def describe(self) -> str:
        """The goal in words, e.g. ``put a clean mug in/on a coffeemachine``."""
        verb = {"clean": "clean ", "heat": "hot ", "cool": "cool "}.get(self.label, "")
        if self.label == "look":
            return f"hold a {self.object_type} and switch on a {self.lamp_type}"
        count = "two" if self.label == "pick2" else "a"
        return f"put {count} {verb}{self.object_type} in/on a {self.receptacle_type}"


@dataclass(frozen=True)
class World:
    facts: frozenset[Fact]
    names: dict[str, str]

    def name(self, entity: str) -> str:
        return self.names.get(entity, entity)


def printed_names(ids: Iterable[str]) -> dict[str, str]:
    """Entity id -> printed name, numbered like ALFWorld's ``AlfredDemangler`` (see module docstring)."""
    by_class: dict[str, list[str]] = defaultdict(list)
    names: dict[str, str] = {}
    for entity in sorted(set(ids)):
        head, sep, _ = entity.partition("_bar_")
        if not sep:
            names[entity] = entity
            continue
        by_class[head + ("basin" if "basin" in entity else "")].append(entity)
    for cls, members in by_class.items():
        for number, entity in zip(range(len(members), 0, -1), members):
            names[entity] = f"{cls} {number}"
    return names


def _section(problem: str, start: str, end: str | None) -> str:
    lower = problem.lower()
    i = lower.find(start)
    j = lower.find(end, i) if end else len(problem)
    if i < 0 or j < 0:
        raise ProblemFormatError(f"PDDL problem has no {start!r} section; is this a game.tw-pddl problem?")
    return problem[i:j]


def world_from_problem(problem: str) -> World:
    """The initial state of a PDDL problem text (the ``pddl_problem`` field of ``game.tw-pddl``)."""
    init = _section(problem, "(:init", "(:goal")
    facts = frozenset(
        (m.group(1).lower(), *m.group(2).lower().split())
        for m in _ATOM.finditer(init)
        if not m.group(1).startswith("=")
    )
    ids = {arg for fact in facts for arg in fact[1:]}
    return World(facts=facts, names=printed_names(ids))


def world_from_engine(facts: Iterable[Any], entity_names: dict[str, str]) -> World:
    """The live state from TextWorld ``Proposition``s (``state["_facts"]``) and the engine's names."""
    tuples = frozenset(
        (p.name.lower(), *(v.name.lower() for v in p.arguments))
        for p in facts
        if not p.name.startswith("new-axiom@")
    )
    return World(facts=tuples, names={k.lower(): v.strip() for k, v in entity_names.items()})


def goal_from_problem(problem: str) -> Goal:
    """Read the task from the ``(:goal ...)`` of an ALFWorld problem (the goal-library shapes)."""
    goal = _section(problem, "(:goal", None)
    objects = {var.lower(): cls.lower() for var, cls in _OBJECT_TYPE.findall(goal)}
    receptacles = {var.lower(): cls.lower() for var, cls in _RECEPTACLE_TYPE.findall(goal)}
    lower = goal.lower()
    obj = objects.get("o") or objects.get("o1")
    if obj is None:
        raise ProblemFormatError("PDDL goal names no (objectType ?o XType); not an ALFWorld goal")
    if "ot" in objects:
        return Goal("look", obj, lamp_type=objects["ot"])
    recep = receptacles.get("r")
    if recep is None:
        raise ProblemFormatError("PDDL goal names no (receptacleType ?r YType); not an ALFWorld goal")
    for state, label in (("isclean", "clean"), ("ishot", "heat"), ("iscool", "cool")):
        if f"({state} ?o" in lower:
            return Goal(label, obj, recep)
    label = "pick2" if "?o2" in lower else "pick"
    return Goal(label, obj, recep)
