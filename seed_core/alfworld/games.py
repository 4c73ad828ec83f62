"""Where ALFWorld games live, which of them are playable, and their task-type labels.

Layout (the one ``alfworld-download`` writes and ``AlfredTWEnv`` reads)::

    $ALFWORLD_DATA/json_2.1.1/<split>/<task dir>/<trial>/game.tw-pddl   (+ traj_data.json)

Splits: ``train`` (``json_2.1.1/<env.alfworld.train_split>`` when it holds games, else the generated
games under ``env.alfworld.generated_dir``, which use the same ``<task dir>/<trial>/`` layout),
``valid_seen`` (in distribution), ``valid_unseen`` (out of distribution) and ``valid_train``.
A game is playable when its ``game.tw-pddl`` says ``"solvable": true`` and its task is one of the six
ALFWorld task types (movable-receptacle and sliced tasks are skipped, as ``AlfredTWEnv`` does).
"""

from __future__ import annotations

import json
from pathlib import Path

from seed_core.config import endpoint_env, project_root
from seed_core.config_envs import ALFWorldConfig

GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"
JSON_DIR = "json_2.1.1"
SPLITS: tuple[str, ...] = ("train", "valid_seen", "valid_unseen", "valid_train")

TASK_TYPES: dict[str, str] = {
    "pick_and_place_simple": "pick",
    "look_at_obj_in_light": "look",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "pick_two_obj_and_place": "pick2",
}
"""ALFWorld task type -> table label; verl-agent keys success by these gamefile substrings."""
_LABEL_KEYS: dict[str, str] = {
    "pick_two_obj_and_place": "pick2",
    "look_at_obj_in_light": "look",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "pick_and_place": "pick",
}

GENERATE_HINT = "python -m seed_core.stages.generate_alfworld --config params.yaml --out data/alfworld_games"


class ALFWorldDataError(FileNotFoundError):
    """ALFWorld games are missing; the message says what to set or run."""


def task_type_label(path: str | Path) -> str:
    """``pick``/``look``/``clean``/``heat``/``cool``/``pick2`` from a gamefile path (or task type name)."""
    text = str(path)
    if "movable_recep" in text:
        raise ValueError(f"{text!r}: movable-receptacle tasks are not one of the six ALFWorld task types")
    for key, label in _LABEL_KEYS.items():
        if key in text:
            return label
    raise ValueError(f"{text!r} names none of the six ALFWorld task types ({', '.join(TASK_TYPES)})")


def full_task_type(label: str) -> str:
    """The ALFWorld task type name of a table label (``pick2`` -> ``pick_two_obj_and_place``)."""
    for name, short in TASK_TYPES.items():
        if short == label:
            return name
    raise ValueError(f"unknown ALFWorld task label {label!r}; known: {', '.join(TASK_TYPES.values())}")


def data_root() -> Path | None:
    """``$ALFWORLD_DATA`` (read through ``endpoint_env``), or None when unset."""
    value = endpoint_env("ALFWORLD_DATA")
    return Path(value).expanduser() if value else None


def generated_dir(cfg: ALFWorldConfig) -> Path:
    """``env.alfworld.generated_dir``, relative paths taken from the project root."""
    path = Path(cfg.generated_dir).expanduser()
    return path if path.is_absolute() else project_root() / path


def _is_playable(game_file: Path) -> bool:
    if "movable" in str(game_file) or "Sliced" in str(game_file):
        return False
    try:
        data = json.loads(game_file.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    try:
        task_type_label(game_file)
    except ValueError:
        return False
    return data.get("solvable") is True


def list_games(directory: Path) -> list[Path]:
    """Playable game files under ``directory`` (``<task dir>/<trial>/game.tw-pddl``), sorted by path."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob(f"*/*/{GAME_FILE}") if _is_playable(p))


def _real_split_dir(split: str) -> Path | None:
    root = data_root()
    return root / JSON_DIR / split if root is not None else None


def split_games(split: str, cfg: ALFWorldConfig) -> list[Path]:
    """The playable games of ``split``; raises ``ALFWorldDataError`` naming the fix when there are none."""
    if split not in SPLITS:
        raise ValueError(f"alfworld: unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    root = data_root()
    where = f"ALFWORLD_DATA={root}" if root is not None else "ALFWORLD_DATA is not set"
    if split == "train":
        real = _real_split_dir(cfg.train_split)
        games = list_games(real) if real is not None else []
        if games:
            return games
        gen_dir = generated_dir(cfg)
        games = list_games(gen_dir)
        if games:
            return games
        raise ALFWorldDataError(
            f"alfworld: no training games ({where}; no games under $ALFWORLD_DATA/{JSON_DIR}/{cfg.train_split} "
            f"and none under {gen_dir}). Generate them with `{GENERATE_HINT}` (the generate_alfworld DVC "
            f"stage), or set ALFWORLD_DATA to a copy of the ALFWorld data that has {JSON_DIR}/{cfg.train_split}/."
        )
    real = _real_split_dir(split)
    games = list_games(real) if real is not None else []
    if not games:
        raise ALFWorldDataError(
            f"alfworld: no playable games for split {split!r} ({where}; looked in "
            f"$ALFWORLD_DATA/{JSON_DIR}/{split}/<task>/<trial>/{GAME_FILE}). Set ALFWORLD_DATA to the directory "
            f"that holds {JSON_DIR}/ (in this workspace: export ALFWORLD_DATA=$(realpath ../shared/alfworld)), "
            "or run `alfworld-download` on a machine with network access."
        )
    return games


def game_key(game_file: Path) -> str:
    """``<task dir>/<trial>``: a game's name inside its split."""
    return f"{game_file.parent.parent.name}/{game_file.parent.name}"
