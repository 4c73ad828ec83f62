"""The checked-in accelerate configs parse with accelerate's own loader and describe the layouts they name."""

from pathlib import Path

import pytest
from accelerate.commands.config.config_args import load_config_from_file

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "accelerate"


@pytest.mark.parametrize(("name", "machines", "processes", "kind"), [
    ("1gpu.yaml", 1, 1, "NO"),
    ("8gpu_fsdp.yaml", 1, 8, "FSDP"),
    ("2x8gpu_fsdp.yaml", 2, 16, "FSDP"),
    ("cpu_2proc.yaml", 1, 2, "MULTI_GPU"),
    ("cpu_2proc_fsdp.yaml", 1, 2, "FSDP"),
])
def test_accelerate_config_layout(name, machines, processes, kind):
    cfg = load_config_from_file(str(CONFIGS / name))
    assert (cfg.num_machines, cfg.num_processes, str(cfg.distributed_type).split(".")[-1]) == (
        machines, processes, kind)
    if kind == "FSDP":  # plain HF checkpoints need the full state dict gathered on rank 0
        assert cfg.fsdp_config["fsdp_state_dict_type"] == "FULL_STATE_DICT"
        assert cfg.fsdp_config["fsdp_version"] == 2
        assert cfg.mixed_precision == ("no" if name.startswith("cpu") else "bf16")
