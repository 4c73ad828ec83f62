"""The SFT stage under FSDP2 on 2 CPU processes, with the collected trajectories, as a paper preset runs it.

Found by the Sokoban rehearsal (issue 44): after training, only rank 0 measured the checkpoint's skill sensitivity,
but the sharded model's forward gathers its weights from every rank, and rank 1 had already returned; rank 0 then
died in gloo ("Connection closed by peer"). Every rank now scores the same rows.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from seed_core.config import SeedConfig, dump_resolved
from seed_core.loader import with_overrides

ROOT = Path(__file__).resolve().parents[2]
FSDP_CONFIG = ROOT / "configs" / "accelerate" / "cpu_2proc_fsdp.yaml"
ACCELERATE = Path(sys.executable).with_name("accelerate")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(600)
def test_sft_with_skill_sensitivity_runs_on_two_fsdp_ranks(tiny_model_dir: Path, tmp_path: Path) -> None:
    from seed_core.stages.annotate import run_annotate
    from seed_core.stages.collect import run_collect

    cfg = with_overrides(SeedConfig(), {
        "model.path": str(tiny_model_dir), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 2,
        "collect.num_tasks": 2, "collect.group_size": 2, "generation.max_new_tokens": 8,
        "generation.max_prompt_tokens": 256, "sft.epochs": 1, "annotate.min_ok_fraction": 0.0,
        "tracking.enabled": False})
    run_collect(cfg, tiny_model_dir, tmp_path / "collect")
    run_annotate(cfg, tmp_path / "collect", tmp_path / "annotate")
    params = dump_resolved(cfg, tmp_path / "params.json")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([str(ACCELERATE), "launch", "--config_file", str(FSDP_CONFIG), "--main_process_port",
                           str(_free_port()), "-m", "seed_core.stages.sft", "--config", str(params),
                           "--model", str(tiny_model_dir), "--annotate", str(tmp_path / "annotate"),
                           "--collect", str(tmp_path / "collect"), "--out", str(tmp_path / "sft")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-5000:]
    metrics = json.loads((tmp_path / "sft" / "metrics.json").read_text())
    assert metrics["skill/examples"] > 0 and "skill/delta_matched" in metrics, metrics
    assert (tmp_path / "sft" / "checkpoint" / "model.safetensors").is_file()
