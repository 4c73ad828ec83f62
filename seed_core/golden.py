"""The numerics golden check behind ``seed doctor``: a tiny testbed and one RL round built under the pinned numerics
(``seed_core.numerics``), hashed, and compared with the hashes committed in ``benchmarks/results/numerics.json``.

A machine whose CPU numerics differ from the committed reference machine's then says so up front, instead of
silently producing another table (the testbed amplifies a last-bit difference through pretraining and RL).

- ``build(workdir)``: the testbed of ``golden_config()`` (a few pretraining steps of a 2-layer Qwen2 on EZPoints)
  and round 0 of RL (``seed``: rollouts, its own hindsight analysis, the teacher's scores, one update) from it;
  returns the sha256 of each one's weights (the tensors' bytes in name order). ``python -m seed_core.golden
  --out DIR`` runs it in a fresh interpreter, numerics pinned before torch loads, and prints ``machine_record``.
- The hashes hold only for the same code and libraries: a record carries ``key`` (the sha256 of every file the
  check can import, ``code_closure``, plus the torch and transformers versions), and records are compared only
  under the same key. The first committed record of a key is its reference.
- ``verdict(record, records)``: (exit code, lines): 0 the hashes match the reference's, 1 they differ or no
  record of this key is committed (then ``seed doctor --record`` on the reference machine makes one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from seed_core import numerics

RESULTS = Path("benchmarks") / "results" / "numerics.json"
"""Under the project root: every machine the check was recorded on (``{"machines": [record, ...]}``)."""
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
    from seed_core.testbed import build_testbed_model

    cfg = golden_config()
    testbed = build_testbed_model(cfg, Path(workdir) / "testbed")
    run_rl_round(cfg, 0, testbed, Path(workdir) / "rl")
    return {"testbed": weights_sha256(testbed), "rl_round": weights_sha256(round_dir(Path(workdir) / "rl", 0) /
                                                                            "checkpoint")}


def key() -> str:
    """What the hashes depend on besides the CPU: the check's code (every file it can import) and the libraries."""
    import torch
    import transformers

    from seed_core.code_closure import fingerprint

    text = fingerprint("seed_core.golden") + f"torch {torch.__version__}\ntransformers {transformers.__version__}\n"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def machine_record(hashes: dict[str, str], seconds: float) -> dict[str, Any]:
    """This process's record: the CPU, the numerics it ran under (``numerics.record``), the key and the hashes."""
    import platform

    import torch
    import transformers

    rec = numerics.record()
    return {"cpu_model": rec["cpu_model"], "isa": rec["isa"], "cpus": os.cpu_count(),
            "platform": platform.platform(), "settings": rec["settings"], "sources": rec["sources"],
            "cpu_capability": rec.get("cpu_capability"), "torch_threads": rec.get("torch_threads"),
            "torch": str(torch.__version__), "transformers": str(transformers.__version__), "key": key(),
            "hashes": hashes, "seconds": round(seconds, 1), "recorded": time.strftime("%Y-%m-%d")}


def verdict(record: dict[str, Any], records: Sequence[dict[str, Any]]) -> tuple[int, list[str]]:
    """``record`` against the committed ``records``: (0 match / 1 differs or nothing to compare with, lines)."""
    lines = [f"seed doctor: {record['cpu_model'] or 'unknown CPU'}, {len(record['isa'])} SIMD flags "
             f"({'avx512f' if 'avx512f' in record['isa'] else 'no avx512f'}), torch {record['torch']} at "
             f"{record['cpu_capability']} with {record['torch_threads']} threads, "
             + ", ".join(f"{k}={v or '(native)'} ({record['sources'][k]})" for k, v in record["settings"].items()),
             *(f"  {name}: {digest}" for name, digest in record["hashes"].items())]
    same_key = [r for r in records if r.get("key") == record["key"]]
    if not same_key:
        return 1, [*lines, f"seed doctor: no committed record for this code and these libraries (key {record['key']}); "
                           f"`seed doctor --record` on the reference machine makes one ({len(records)} records of "
                           f"other code are committed)"]
    ref = same_key[0]
    others = ", ".join(f"{r['cpu_model']} ({'match' if r['hashes'] == ref['hashes'] else 'differs'})"
                       for r in same_key[1:])
    seen = f"; also recorded with this key: {others}" if others else ""
    if record["hashes"] == ref["hashes"]:
        return 0, [*lines, f"seed doctor: MATCH: the same bits as the reference machine ({ref['cpu_model']}, "
                           f"{ref['recorded']}){seen}; runs here are expected to reproduce tables made there with this code "
                           f"bit for bit"]
    differ = ", ".join(name for name, digest in record["hashes"].items() if ref["hashes"].get(name) != digest)
    return 1, [*lines, f"seed doctor: DIFFERS ({differ}) from the reference machine ({ref['cpu_model']} under "
                       + ", ".join(f"{k}={v or '(native)'}" for k, v in ref["settings"].items()) + f"){seen}; "
                       "this machine's tables will not be bit-identical to the committed ones: judge them by "
                       "`seed run`'s statistical verdict"]


def append(path: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Add ``record`` to the results file at ``path`` (created when missing) with ``match``: whether its hashes
    equal its key's reference (itself when it is the first); returns the stored record."""
    data = json.loads(path.read_text()) if path.is_file() else {"machines": []}
    same_key = [r for r in data["machines"] if r.get("key") == record["key"]]
    stored = {**record, "match": not same_key or same_key[0]["hashes"] == record["hashes"]}
    data["machines"].append(stored)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return stored


def main(argv: list[str] | None = None) -> None:
    numerics.pin()  # before torch loads (this module imports none at its top)
    parser = argparse.ArgumentParser(description="Build the golden testbed and RL round; print the record (JSON).")
    parser.add_argument("--out", type=Path, required=True, help="an empty working directory")
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("seed_core").setLevel(logging.WARNING)
    start = time.perf_counter()
    hashes = build(args.out)
    print(json.dumps(machine_record(hashes, time.perf_counter() - start)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
