"""Training stages on several processes: ``accelerate launch`` of the stage's own command line.

When ``project.accelerate_config`` names an accelerate config, the sft and rl tasks do not train in the
flow's process; they write the resolved config next to the stage outputs and run

    accelerate launch --config_file <project.accelerate_config> -m seed_core.stages.<stage> --config <resolved> ...

from this interpreter's environment, then read the stage's outputs back (a failed launch raises with
the command). Every process runs the same code; only the main process writes (seed_core.trainer.scale).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from seed_core import timing
from seed_core.config import SeedConfig, dump_resolved, project_root


def is_launched(cfg: SeedConfig) -> bool:
    return bool(cfg.project.accelerate_config)


def accelerate_command(cfg: SeedConfig, module: str, config_file: Path, args: list[str]) -> list[str]:
    launch_cfg = Path(cfg.project.accelerate_config)
    if not launch_cfg.is_absolute():
        launch_cfg = project_root() / launch_cfg
    if not launch_cfg.is_file():
        raise FileNotFoundError(f"project.accelerate_config = {cfg.project.accelerate_config!r}: no such file; "
                                "use one of configs/accelerate/*.yaml or set it to '' to train in-process")
    accelerate = Path(sys.executable).with_name("accelerate")
    return [str(accelerate), "launch", "--config_file", str(launch_cfg), "-m", module,
            "--config", str(config_file), *args]


def run_launched(cfg: SeedConfig, module: str, work_dir: Path, args: list[str]) -> None:
    """Run ``module`` under ``accelerate launch`` with ``cfg`` (resolved into ``work_dir``)."""
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    config_file = work_dir / f"launch_config.{module.rsplit('.', 1)[-1]}.json"
    dump_resolved(cfg, config_file)
    cmd = accelerate_command(cfg, module, config_file, args)
    with timing.span("engine"):  # the launched processes run the engine (their start-up included)
        done = subprocess.run(cmd, cwd=project_root())
    if done.returncode != 0:
        raise RuntimeError(f"accelerate launch failed (exit {done.returncode}): {' '.join(cmd)}")
