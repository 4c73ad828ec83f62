"""What each stage reads, as the lineage code computes it: per config and stage, the params keys (its
``data/params`` file), the files of its code fingerprint (``data/code``) and its dvc.yaml deps.

    python scripts/lineage_snapshot.py --write     # record tests/unit/lineage_record.json (before a refactor)

``tests/unit/test_lineage_record.py`` recomputes the snapshot and compares it with the record, through the list of
files that moved and the list of differences with their reasons, so a refactor of the lineage code (issue 40) is
shown to change nothing else. Only names are recorded, not hashes: an edited file keeps its place in a fingerprint.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts import dvc_deps  # noqa: E402

RECORD = ROOT / "tests" / "unit" / "lineage_record.json"
CONFIGS = ("params.yaml", "presets/testbed-mechanism.yaml", "presets/alfworld-qwen2.5-3b.yaml",
           "presets/webshop-qwen2.5-7b.yaml")
"""The default, the mechanism preset and two paper presets (issue 40's recording test)."""


def snapshot() -> dict[str, Any]:
    """config -> stage (``rl@<algorithm>`` per algorithm) -> {"params": keys, "code": files, "deps": dvc.yaml deps},
    the keys and files as ``seed_core.lineage.inputs.stage_inputs`` answers."""
    from seed_core.algorithms import ALGORITHMS
    from seed_core.lineage.inputs import stage_inputs
    from seed_core.lineage.stage_code import for_algorithm

    stages = dvc_deps.stages()
    out: dict[str, Any] = {}
    for name in CONFIGS:
        cfg = dvc_deps.load_params(ROOT / name)
        per_stage: dict[str, Any] = {}
        for stage, (_, deps, _) in stages.items():
            algorithms = ALGORITHMS.names() if stage == dvc_deps.PER_ALGORITHM else [None]
            for algorithm in algorithms:
                inputs = stage_inputs(stage, for_algorithm(cfg, algorithm) if algorithm else cfg, ROOT)
                per_stage[f"{stage}@{algorithm}" if algorithm else stage] = {
                    "params": list(inputs.keys), "code": [f.relative_to(ROOT).as_posix() for f in inputs.files],
                    "deps": sorted(deps)}
        out[name] = per_stage
    return out


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        print(json.dumps(snapshot(), indent=1))
    else:
        RECORD.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")
        print(f"wrote {RECORD.relative_to(ROOT)}")
