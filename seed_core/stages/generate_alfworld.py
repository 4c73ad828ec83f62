"""Stage: generate solvable ALFWorld training games from the data the ``alfworld`` wheel ships.

    python -m seed_core.stages.generate_alfworld --config params.yaml --out data/alfworld_games

Builds ``env.alfworld.num_generated_games`` games, the six task types in turn (pick, look, clean,
heat, cool, pick2), game ``i`` seeded by ``project.seed`` and ``i``; each is kept only when the
planner's walkthrough (computed once, offline) wins it on the real engine
(``seed_core.alfworld.generator``). ``out`` gets the usual ``<task dir>/<trial>/game.tw-pddl`` +
``traj_data.json`` layout (the ``train`` split of the ``alfworld`` env when
``$ALFWORLD_DATA/json_2.1.1/train`` is absent) and ``generation_report.json``: games built vs
solvable, seconds per game, games per task type.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from seed_core.alfworld.engine import Engine
from seed_core.alfworld.generator import LABELS, generate_one
from seed_core.config import SeedConfig
from seed_core.loader import config_from_args, stage_parser
from seed_core.runtime.io import write_json

REPORT = "generation_report.json"


def _prepare(out_dir: Path) -> None:
    """Start from an empty ``out_dir``; only a previous generator output is ever deleted."""
    if out_dir.exists() and any(out_dir.iterdir()):
        if not (out_dir / REPORT).is_file():
            raise FileExistsError(f"{out_dir} is not empty and holds no {REPORT}; refusing to overwrite it. "
                                  "Pass an empty or new --out directory.")
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)


def run_generate_alfworld(cfg: SeedConfig, out_dir: Path, *, max_object_types: int | None = None,
                          max_attempts: int = 5) -> dict[str, float]:
    """Generate the games into ``out_dir``; returns (and writes) the generation metrics.

    ``max_object_types`` caps the object types per room (None = every type the floor plan lists).
    """
    out_dir = Path(out_dir)
    _prepare(out_dir)
    count = cfg.env.alfworld.num_generated_games
    if count < 1:
        raise ValueError(f"env.alfworld.num_generated_games must be >= 1, got {count}")
    engine = Engine()
    games, built, t0 = [], 0, time.perf_counter()
    for i in range(count):
        label = LABELS[i % len(LABELS)]
        game, attempts = generate_one(out_dir, label, cfg.project.seed * 10_000 + i, max_attempts=max_attempts,
                                      engine=engine, max_object_types=max_object_types)
        built += attempts
        if game is not None:
            games.append(game)
    seconds = time.perf_counter() - t0
    per_type = Counter(g.label for g in games)
    metrics: dict[str, float] = {
        "generate/games": float(len(games)),
        "generate/requested": float(count),
        "generate/built": float(built),
        "generate/solvable_rate": len(games) / built if built else 0.0,
        "generate/seconds_per_game": seconds / built if built else 0.0,
        "generate/mean_walkthrough_steps": sum(g.walkthrough_steps for g in games) / max(1, len(games)),
        "time/generate_s": seconds,
        **{f"generate/games_{label}": float(per_type.get(label, 0)) for label in LABELS},
    }
    write_json(out_dir / REPORT, {"metrics": metrics, "games": [asdict(g) for g in games]})
    return metrics


def main() -> None:
    parser = stage_parser("Generate solvable ALFWorld training games (offline, from the alfworld wheel)")
    parser.add_argument("--out", default="data/alfworld_games", help="output directory (a split directory)")
    args = parser.parse_args()
    print(run_generate_alfworld(config_from_args(args), Path(args.out)))


if __name__ == "__main__":
    main()
