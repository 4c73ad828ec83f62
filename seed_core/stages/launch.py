"""Where the sft and rl stages run, decided in one place (``run_stage``): in the caller's process, or, with
``project.accelerate_config``, as ``accelerate launch --config_file <project.accelerate_config> -m
seed_core.stages.<stage> --config <the flow's params file> --set KEY=VALUE ... <stage arguments>``, whose processes
load the flow's config the same way (``seed_core.loader.source_args``) and apply the same fixed values
(``effective_config``); only the main process writes (seed_core.trainer.scale)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from seed_core.runtime import timing
from seed_core.config import SeedConfig, project_root
from seed_core.loader import source_args


def run_stage(cfg: SeedConfig, module: str, args: list[str], in_process: Callable[[], Any],
              outputs: Path | None = None) -> Any:
    """``in_process()`` without ``project.accelerate_config``; with it, ``module`` with ``args`` under
    ``accelerate launch`` (not when ``outputs`` exists: a launch wrote them already) and None: the caller reads
    the outputs back. A failed launch raises with the command."""
    if not cfg.project.accelerate_config:
        with timing.span("engine"):
            return in_process()
    if outputs is not None and outputs.exists():
        return None
    launch_cfg = project_root() / cfg.project.accelerate_config  # an absolute path stays as it is
    if not launch_cfg.is_file():
        raise FileNotFoundError(f"project.accelerate_config = {cfg.project.accelerate_config!r}: no such file; "
                                "use one of configs/accelerate/*.yaml or set it to '' to train in-process")
    cmd = [str(Path(sys.executable).with_name("accelerate")), "launch", "--config_file", str(launch_cfg), "-m",
           module, *source_args(cfg), *args]
    with timing.span("engine"):  # the launched processes run the engine (their start-up included)
        done = subprocess.run(cmd, cwd=project_root())
    if done.returncode != 0:
        raise RuntimeError(f"accelerate launch failed (exit {done.returncode}): {' '.join(cmd)}")
    return None
