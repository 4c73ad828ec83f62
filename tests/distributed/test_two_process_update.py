"""A 2-process ``accelerate launch`` (CPU, gloo) RL update equals the 1-process update on the same data."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from seed_core.loader import with_overrides

DRIVER = Path(__file__).with_name("rl_update_driver.py")
CPU_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "accelerate" / "cpu_2proc.yaml"
ACCELERATE = Path(sys.executable).with_name("accelerate")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accelerate_launch(processes: int, *target: str) -> list[str]:
    """The checked-in CPU config: torchrun's launcher, and Accelerator(cpu=True) runs MULTI_CPU over gloo."""
    assert processes == 2, "configs/accelerate/cpu_2proc.yaml is a 2-process layout"
    return [str(ACCELERATE), "launch", "--config_file", str(CPU_CONFIG), "--main_process_port", str(_free_port()),
            *target]


def _run(cmd: list[str]) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def _launch(model_dir: Path, out: Path, processes: int, micro: int) -> dict:
    args = [str(DRIVER), str(model_dir), str(out), str(micro)]
    _run([sys.executable, *args] if processes == 1 else _accelerate_launch(processes, *args))
    return json.loads(out.read_text())


@pytest.mark.timeout(600)
def test_two_process_update_matches_one_process(tiny_model_dir: Path, tmp_path: Path):
    one = _launch(tiny_model_dir, tmp_path / "one.json", 1, micro=6)
    two = _launch(tiny_model_dir, tmp_path / "two.json", 2, micro=2)
    assert one["world"] == 1 and two["world"] == 2 and two["distributed_type"].endswith("MULTI_CPU")
    m1, m2 = one["metrics"], two["metrics"]
    # the same global token-mean loss, the same gradient norm, one optimizer step each
    assert m2["rl/total_loss"] == pytest.approx(m1["rl/total_loss"], abs=1e-5)
    assert m2["rl/grad_norm"] == pytest.approx(m1["rl/grad_norm"], rel=1e-4)
    assert m1["rl/optimizer_steps"] == m2["rl/optimizer_steps"] == 1.0
    assert m1["rl/samples"] == m2["rl/samples"] == 6.0
    # the weight-sync monitor pooled over the ranks' shares: |engine - theta_old| = the driver's offsets
    tokens = [3, 1, 2, 4, 2, 3]
    expected = sum(abs(o) * n for o, n in zip([0.0, 0.5, -0.25, 0.0, 0.1, 0.0], tokens)) / sum(tokens)
    for m in (m1, m2):
        assert m["rollout/sampling_logp_diff_mean"] == pytest.approx(expected, abs=1e-5)
        assert m["rollout/sampling_logp_diff_max"] == pytest.approx(0.5, abs=1e-5)
    # and the same updated weights
    assert two["param_sum"] == pytest.approx(one["param_sum"], rel=1e-5, abs=1e-3)
    diff = max(abs(a - b) for a, b in zip(one["params_head"], two["params_head"]))
    assert diff < 1e-5


@pytest.mark.timeout(600)
def test_two_process_rl_round_writes_one_round_from_both_ranks(tiny_model_dir: Path, tmp_path: Path):
    """``accelerate launch -m seed_core.stages.rl``: each rank plays its share of the tasks, trains on the gathered
    batch, and the main process writes one round with every rank's trajectories and a plain checkpoint."""
    from seed_core.config import SeedConfig
    from seed_core.runtime.io import read_records
    from seed_core.types import StepRecord

    cfg = with_overrides(SeedConfig(), {
        "model.path": str(tiny_model_dir), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 2,
        "rl.algorithm": "seed", "rl.rounds": 1, "rl.tasks_per_round": 2, "rl.group_size": 2,
        "rl.mini_batch_size": 4, "rl.micro_batch_size": 2, "generation.max_new_tokens": 8,
        "generation.max_prompt_tokens": 256, "rl.analyzer_max_new_tokens": 8, "tracking.enabled": False})
    config = tmp_path / "config.json"
    config.write_text(cfg.model_dump_json())
    out = tmp_path / "rl"
    _run(_accelerate_launch(2, "-m", "seed_core.stages.rl", "--config", str(config), "--init", str(tiny_model_dir),
                            "--out", str(out)))
    round_dir = out / "round_000"
    assert (round_dir / "DONE").is_file() and (out / "checkpoint" / "model.safetensors").is_file()
    records = read_records(round_dir / "trajectories.parquet", StepRecord)
    assert len({r.task_id for r in records}) == 2, "both ranks' tasks are in the round"
    metrics = json.loads((round_dir / "metrics.json").read_text())
    assert metrics["rl/samples"] == len([r for r in records if r.response_ids]) and metrics["rl/optimizer_steps"] >= 1
    assert metrics["rollout/sampling_logp_diff_max"] < 1e-3  # both ranks' engines sample from the trained weights
