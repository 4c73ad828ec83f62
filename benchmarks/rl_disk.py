"""Bytes one short RL stage writes (issue 14/15): ``run_rl`` on a tiny random Qwen2 (CPU), measured as the
process's ``wchar`` (/proc/self/io: every byte passed to write(), whatever the file) around the call, and
what is left on disk under the output directory.

    python benchmarks/rl_disk.py --rounds 6 --save-every 0 --out benchmarks/results/rl_disk_after.json

Run it with ``PYTHONPATH`` pointing at another checkout to measure that code (the "before" figure).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path


def wchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no wchar")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--save-every", type=int, default=0)
    parser.add_argument("--out", default=None, help="JSON result file")
    args = parser.parse_args()
    import torch

    from seed_core.config import SeedConfig
    from seed_core.loader import with_overrides
    from seed_core.modeling.builders import build_tiny_model
    from seed_core.stages.rl import run_rl

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_model(Path(tmp) / "tiny", seed=0)
        cfg = with_overrides(SeedConfig(), {
            "model.path": str(model), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 1,
            "rl.algorithm": "grpo", "rl.rounds": args.rounds, "rl.tasks_per_round": 1, "rl.group_size": 2,
            "rl.kl_coef": 0.0, "rl.micro_batch_size": 4, "rl.mini_batch_size": 1, "rl.save_every": args.save_every,
            "generation.max_new_tokens": 4, "generation.max_prompt_tokens": 256})
        out = Path(tmp) / "rl"
        before = wchar()
        run_rl(cfg, model, out)
        written = wchar() - before
        weights = sum(f.stat().st_size for f in model.glob("*.safetensors"))
        left = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    result = {"rounds": args.rounds, "save_every": args.save_every, "bytes_written": written,
              "bytes_left_in_out_dir": left, "model_weights_bytes": weights,
              "written_per_round_in_weights": round(written / args.rounds / weights, 2)}
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
