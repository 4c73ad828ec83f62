"""Rooms for generated ALFWorld games, built only from data the ``alfworld`` wheel ships.

``wheel_data()`` reads ``alfworld/gen/layouts/FloorPlan<N>-{objects,openable}.json`` and
``-layout.npy`` plus the affordance tables of ``alfworld.gen.constants``. ``build_scene`` then makes one
seeded room (environments-notes.md §1.6):

1. the floor plan's real receptacle ids with their interaction poses (``openable.json``; basins keep
   the THOR child id ``Sink|x|y|z|SinkBasin`` so the game prints ``sinkbasin 1``), plus one instance of
   every other static receptacle type the room has, placed on a free ``layout.npy`` point;
2. the room's pickupable object types, 1-2 instances each (``counts`` overrides), each put into a
   random receptacle that ``VAL_RECEPTACLE_OBJECTS`` says can hold it, never into ``avoid`` types; desk
   and floor lamps stand on furniture (they are in no receptacle table);
3. the agent on a free point that is no receptacle's location.

Locations are ALFWorld's ``loc|x|z|rotation|horizon`` on the 0.25 m grid.
"""

from __future__ import annotations

import importlib.util
import json
import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from seed_core.alfworld.engine import INSTALL_HINT

KITCHENS, LIVING_ROOMS, BEDROOMS, BATHROOMS = (range(1, 31), range(201, 231), range(301, 331), range(401, 431))
UNSEEN_FLOOR_PLANS = frozenset({10, 219, 308, 424})
"""The rooms of ``valid_unseen``; generated training games never use them (they stay out of distribution)."""
LAMPS = ("DeskLamp", "FloorLamp")
LAMP_STANDS = ("Desk", "SideTable", "Dresser", "Shelf", "DiningTable", "CoffeeTable", "TVStand")
GRID = 0.25


@dataclass(frozen=True)
class WheelData:
    """The parts of the ``alfworld`` wheel the generator reads."""

    package_dir: Path
    holds: dict[str, frozenset[str]]
    """static receptacle type -> object types it can hold (``VAL_RECEPTACLE_OBJECTS``)."""
    actions: dict[str, frozenset[str]]
    """Heatable/Coolable/Cleanable/Sliceable/Toggleable -> object types (``VAL_ACTION_OBJECTS``)."""
    openable: frozenset[str]
    movable: frozenset[str]
    object_types: tuple[str, ...]
    receptacle_types: tuple[str, ...]

    def layout(self, floor_plan: int, kind: str) -> Path:
        return self.package_dir / "gen" / "layouts" / f"FloorPlan{floor_plan}-{kind}"

    def floor_plans(self) -> list[int]:
        """Every floor plan the wheel ships a layout for."""
        names = (self.package_dir / "gen" / "layouts").glob("FloorPlan*-objects.json")
        return sorted(int(p.name.split("-")[0][len("FloorPlan"):]) for p in names)


@lru_cache(maxsize=1)
def wheel_data() -> WheelData:
    """Read the affordance tables once (imports ``alfworld.gen.constants`` lazily)."""
    spec = importlib.util.find_spec("alfworld")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(INSTALL_HINT)
    from alfworld.gen import constants as c

    movable = frozenset(c.MOVABLE_RECEPTACLES)
    static = frozenset(c.RECEPTACLES) - movable
    holds = {r: frozenset(objs) for r, objs in c.VAL_RECEPTACLE_OBJECTS.items() if r in static}
    return WheelData(
        package_dir=Path(spec.submodule_search_locations[0]),
        holds=holds,
        actions={k: frozenset(v) for k, v in c.VAL_ACTION_OBJECTS.items()},
        openable=frozenset(c.OPENABLE_CLASS_SET),
        movable=movable,
        object_types=tuple(sorted(c.OBJECTS_SET - static)),
        receptacle_types=tuple(sorted(static)),
    )


def room_kind(floor_plan: int) -> str:
    for name, plans in (("Kitchen", KITCHENS), ("LivingRoom", LIVING_ROOMS), ("Bedroom", BEDROOMS),
                        ("Bathroom", BATHROOMS)):
        if floor_plan in plans:
            return name
    raise ValueError(f"FloorPlan{floor_plan} is not an ALFRED room (1-30, 201-230, 301-330, 401-430)")


@dataclass
class Scene:
    floor_plan: int
    receptacles: dict[str, str] = field(default_factory=dict)
    """THOR receptacle id -> receptacle type."""
    locations: dict[str, str] = field(default_factory=dict)
    """THOR receptacle id -> ``loc|x|z|r|h``."""
    objects: dict[str, str] = field(default_factory=dict)
    """THOR object id -> object type."""
    inside: dict[str, str] = field(default_factory=dict)
    """THOR object id -> receptacle id."""
    agent_location: str = ""

    def types_present(self) -> set[str]:
        return set(self.receptacles.values())

    def receptacles_of(self, rtype: str) -> list[str]:
        return sorted(r for r, t in self.receptacles.items() if t == rtype)


def _location(x: float, z: float, rotation: float, horizon: float) -> str:
    return f"loc|{round(x / GRID)}|{round(z / GRID)}|{int(rotation) // 90 % 4}|{int(horizon)}"


def _thor_id(kind: str, rng: random.Random, suffix: str = "") -> str:
    coords = "|".join(f"{rng.uniform(-4.0, 4.0):+06.2f}" for _ in range(3))
    return f"{kind}|{coords}{'|' + suffix if suffix else ''}"


def room_types(floor_plan: int, data: WheelData) -> tuple[list[str], dict[str, Any]]:
    """(object types listed for the room, openable.json poses)."""
    objects = json.loads(data.layout(floor_plan, "objects.json").read_text())
    poses = json.loads(data.layout(floor_plan, "openable.json").read_text())
    return objects, poses


def build_scene(floor_plan: int, rng: random.Random, data: WheelData, *, counts: dict[str, int] | None = None,
                avoid: dict[str, set[str]] | None = None, max_object_types: int | None = None) -> Scene:
    """One room; ``counts`` fixes instances per object type (those types are always placed), ``avoid``
    maps an object type to receptacle types it must not start in (the goal receptacle: a goal must not
    hold at reset), ``max_object_types`` caps the object types placed (smaller, faster-to-plan rooms)."""
    import numpy as np

    listed, poses = room_types(floor_plan, data)
    points = [tuple(p) for p in np.load(data.layout(floor_plan, "layout.npy")).tolist()]
    rng.shuffle(points)
    scene = Scene(floor_plan)
    for recep_id, pose in sorted(poses.items()):
        parts = recep_id.split("|")
        scene.receptacles[recep_id] = parts[-1] if len(parts) > 4 else parts[0]
        scene.locations[recep_id] = _location(*pose)
    used = set(scene.locations.values())

    def free_location() -> str:
        while points:
            x, z = points.pop()
            loc = _location(x, z, rng.choice((0, 90, 180, 270)), 30)
            if loc not in used:
                used.add(loc)
                return loc
        raise ValueError(f"FloorPlan{floor_plan}: no free layout point left")

    for kind in sorted(set(listed) & set(data.receptacle_types) - scene.types_present()):
        base = {"SinkBasin": ("Sink", "SinkBasin"), "BathtubBasin": ("Bathtub", "BathtubBasin")}.get(kind)
        recep_id = _thor_id(base[0], rng, base[1]) if base else _thor_id(kind, rng)
        scene.receptacles[recep_id] = kind
        scene.locations[recep_id] = free_location()

    counts, avoid = counts or {}, avoid or {}
    kinds = sorted(set(listed) & set(data.object_types) - set(counts))
    if max_object_types is not None:
        kinds = sorted(rng.sample(kinds, max(0, min(len(kinds), max_object_types - len(counts)))))
    for kind in sorted(set(kinds) | set(counts)):
        if kind in LAMPS:
            homes = [r for r in sorted(scene.receptacles) if scene.receptacles[r] in LAMP_STANDS]
        else:
            homes = [r for r in sorted(scene.receptacles)
                     if kind in data.holds.get(scene.receptacles[r], ()) and
                     scene.receptacles[r] not in avoid.get(kind, set())]
        if not homes:
            continue
        for _ in range(counts.get(kind, rng.randint(1, 2))):
            obj_id = _thor_id(kind, rng)
            scene.objects[obj_id] = kind
            scene.inside[obj_id] = rng.choice(homes)
    scene.agent_location = free_location()
    return scene
