"""What ``seed doctor`` builds: a tiny testbed and one RL round under the pinned numerics, and their weights' hashes.

This module and the code it can run are the numerics the doctor's key covers (``seed_core.repro.golden.numerics_files``:
its import closure under ``GOLDEN``'s selection, less ``golden.NOT_NUMERICS``): an edit to that code needs a new
record (``seed doctor --record`` on the reference machine), an edit anywhere else does not. So the check itself
(the key, the record, the verdict) lives in ``seed_core.repro.golden``, outside this closure, and nothing but the build
goes here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

GOLDEN = {
    "project.seed": 0, "model.device": "cpu", "env.name": "ezpoints", "env.max_steps": 2, "env.history_length": 0,
    "testbed.episodes": 12, "testbed.epochs": 1, "testbed.hidden_size": 32, "testbed.layers": 2,
    "testbed.vocab_size": 300, "testbed.batch_size": 8, "testbed.max_length": 512, "testbed.noise": 0.2,
    "testbed.skill_fraction": 0.5, "testbed.analysis_fraction": 0.25, "testbed.lr": 2e-3,
    "rl.algorithm": "seed", "rl.tasks_per_round": 2, "rl.group_size": 4, "rl.mini_batch_size": 16,
    "rl.micro_batch_size": 8, "rl.lr": 1e-3, "rl.analyzer_max_new_tokens": 16, "generation.max_new_tokens": 8,
    "generation.max_prompt_tokens": 512, "annotate.client": "oracle", "tracking.enabled": False,
}
"""The check's config: small enough for seconds on 2 cores, every kind of op the pipeline's training uses."""


def golden_config() -> Any:
    from seed_core.config import SeedConfig
    from seed_core.loader import with_overrides

    return with_overrides(SeedConfig(), GOLDEN)


def weights_sha256(model_dir: Path) -> str:
    """sha256 over the tensors of ``model.safetensors`` (name, dtype, shape, bytes), in name order."""
    import torch
    from safetensors.torch import load_file

    h = hashlib.sha256()
    for name, tensor in sorted(load_file(str(Path(model_dir) / "model.safetensors")).items()):
        h.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}:".encode())
        h.update(tensor.contiguous().view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return h.hexdigest()


def build(workdir: Path) -> dict[str, str]:
    """Build the golden testbed and its RL round 0 under ``workdir``; the sha256 of each one's weights."""
    from seed_core.stages.rl import round_dir, run_rl_round
    from seed_core.modeling.testbed import build_testbed_model

    cfg = golden_config()
    testbed = build_testbed_model(cfg, Path(workdir) / "testbed")
    run_rl_round(cfg, 0, testbed, Path(workdir) / "rl")
    return {"testbed": weights_sha256(testbed), "rl_round": weights_sha256(round_dir(Path(workdir) / "rl", 0) /
                                                                            "checkpoint")}
