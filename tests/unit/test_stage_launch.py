"""seed_core.stages.launch, the one place that decides where a training stage runs: in the caller's process, or
under `accelerate launch` with the flow's params file and overrides (`--config <file> --set KEY=VALUE`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from seed_core.algorithms import effective_config
from seed_core.config import ConfigError, SeedConfig
from seed_core.loader import config_from_args, load_config, stage_parser, with_overrides
from seed_core.stages.launch import run_stage

ROOT = Path(__file__).resolve().parents[2]
CPU_2PROC = "configs/accelerate/cpu_2proc.yaml"


@pytest.fixture
def params(tmp_path: Path) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text((ROOT / "params.yaml").read_text())
    return path


class Launches(list):
    """The command lines run_stage ran; each exits with ``exit_code``."""

    exit_code = 0


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> Launches:
    calls = Launches()
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd) or subprocess.CompletedProcess(
        cmd, calls.exit_code))
    return calls


def test_the_launch_command_loads_the_flows_params_file_with_its_overrides(params: Path, launches: Launches) -> None:
    # as flows/rl.py loads it: the algorithm as an override, then the algorithm's fixed values applied
    cfg = effective_config(load_config(params, {"rl.algorithm": "sdar"}, origin="--algorithm"))
    cfg = with_overrides(cfg, {"project.accelerate_config": CPU_2PROC, "model.mixed_precision": "no"})
    assert run_stage(cfg, "seed_core.stages.rl", ["--out", "data/rl/sdar"], lambda: pytest.fail("in-process")) is None
    (cmd,) = launches
    assert Path(cmd[0]).name == "accelerate"
    assert cmd[1:] == ["launch", "--config_file", str(ROOT / CPU_2PROC), "-m", "seed_core.stages.rl",
                       "--config", str(params.resolve()), "--set", 'rl.algorithm="sdar"',
                       "--set", f'project.accelerate_config="{CPU_2PROC}"', "--set", 'model.mixed_precision="no"',
                       "--out", "data/rl/sdar"]
    # what the launched entry point loads (and run_rl applies effective_config to) is the flow's config
    launched = config_from_args(stage_parser("rl").parse_args(cmd[cmd.index("--config"):-2]))
    assert effective_config(launched) == cfg and launched.model.mixed_precision == "no"


def test_run_stage_runs_in_process_or_launches_and_launches_nothing_already_written(
        params: Path, tmp_path: Path, launches: Launches) -> None:
    cfg = load_config(params, {"project.accelerate_config": ""})
    assert run_stage(cfg, "seed_core.stages.sft", ["--out", "x"], lambda: {"sft/steps": 1.0}) == {"sft/steps": 1.0}
    assert launches == []
    launched = with_overrides(cfg, {"project.accelerate_config": CPU_2PROC})
    assert run_stage(launched, "seed_core.stages.sft", ["--out", "x"], lambda: pytest.fail("in-process")) is None
    assert len(launches) == 1 and launches[0][4:6] == ["-m", "seed_core.stages.sft"] and launches[0][-2:] == [
        "--out", "x"]
    (tmp_path / "DONE").touch()
    assert run_stage(launched, "seed_core.stages.rl", [], lambda: pytest.fail("in-process"),
                     outputs=tmp_path / "DONE") is None
    assert len(launches) == 1  # written already: not launched again
    launches.exit_code = 3
    with pytest.raises(RuntimeError, match=r"accelerate launch failed \(exit 3\): .*--config"):
        run_stage(launched, "seed_core.stages.sft", ["--out", "x"], lambda: None)


def test_launching_a_config_built_in_code_names_the_fix() -> None:
    cfg = with_overrides(SeedConfig(), {"project.accelerate_config": CPU_2PROC})
    with pytest.raises(ConfigError, match=r"built in code.*\(project.accelerate_config\).*load_config"):
        run_stage(cfg, "seed_core.stages.rl", [], lambda: None)
