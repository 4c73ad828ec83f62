"""What each stage reads is what it read before the lineage refactor (issue 40), or each difference is listed here
with its reason: per config (the default, the mechanism preset, two paper presets) and stage (``rl@<algorithm>`` per
algorithm), the params keys, the files of the code fingerprint and the dvc.yaml deps, against
``tests/unit/lineage_record.json`` (``python scripts/lineage_snapshot.py --write``, recorded before any file moved).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if str(Path(__file__).resolve().parents[2]) not in sys.path:  # `scripts` is a folder at the root, not a package:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # alone, this module found it only by another's path

from scripts import lineage_snapshot  # noqa: E402

_PACKAGES = {"lineage": ("code_closure", "stage_code", "stage_params", "side_tables", "resume"),
             "repro": ("numerics", "golden", "golden_build", "reference")}
MOVED: dict[str, str] = {
    **{f"seed_core/{m}.py": f"seed_core/{pkg}/{m}.py" for pkg, modules in _PACKAGES.items() for m in modules},
    "seed_core/sweep.py": "seed_core/sweep/cell.py", "seed_core/sweep_cells.py": "seed_core/sweep/cells.py",
    "seed_core/sweep_committed.py": "seed_core/sweep/committed.py", "seed_core/sweep_report.py": "seed_core/sweep/report.py",
    **{f"seed_core/{m}.py": f"seed_core/runtime/{m}.py" for m in ("io", "logs", "timing", "parent_watch", "endpoints")},
    "seed_core/models.py": "seed_core/modeling/models.py", "seed_core/model_builders.py": "seed_core/modeling/builders.py",
    "seed_core/testbed.py": "seed_core/modeling/testbed.py", "seed_core/contexts.py": "seed_core/skills/contexts.py",
    "seed_core/static_skills.py": "seed_core/skills/static.py", "seed_core/skill_insert.py": "seed_core/skills/insert.py",
    "seed_core/mechanism.py": "seed_core/analyzer/mechanism.py", "seed_core/preflight.py": "seed_core/runtime/services.py",
    "seed_core/generate_data.py": "seed_core/data_gen/generate.py", "seed_core/task_sets.py": "seed_core/data_gen/task_sets.py",
}
"""Old path -> new path of each file the refactor moved (a file keeps its place in a fingerprint under its new name)."""

SPLIT: dict[str, str] = {
    "seed_core/trainer/samples.py": "seed_core/trainer/rl_step.py",
    "seed_core/trainer/selective.py": "seed_core/trainer/logprobs.py",
    "seed_core/rollout/vllm_launch.py": "seed_core/rollout/vllm_engine.py",
    "seed_core/tracing.py": "seed_core/tracking.py",
    "seed_core/stages/weight_sync.py": "seed_core/stages/rl.py",
    "seed_core/envs/ezpoints_prompts.py": "seed_core/envs/ezpoints.py",
    "seed_core/runtime/vllm_flags.py": "seed_core/config.py",
    "seed_core/config_base.py": "seed_core/config.py",
    "seed_core/config_envs.py": "seed_core/config.py",
}
"""New file -> the file it was cut from (issue 40: no file over 450 lines): a part may appear where its origin was."""

DIFFERENCES: dict[tuple[str, str, str], str] = {
    **{("*", "code", f"+seed_core/{pkg}/__init__.py"): "the __init__ (a docstring) of the package a module moved into runs before it"
       for pkg in ("lineage", "repro", "sweep", "runtime", "modeling", "skills", "data_gen", "analyzer")},
    # issue 40: the rl stages reached the pre-flight module for held_out_split alone (now in data_gen/task_sets.py),
    # so editing a pre-flight threshold reran every rl row; the expert replay came with it
    ("*", "code", "-seed_core/analyzer/mechanism.py"): "the pre-flight thresholds are no input of the rl stages",
    ("*", "code", "-seed_core/rollout/expert.py"): "reached through the pre-flight module only",
    ("*", "code", "+seed_core/retrieval/methods.py"): "WebShop's search box (bm25) imports Hit, the result type of "
                                                     "every index, from methods.py, where it moved to end the "
                                                     "type-only circle bm25 <-> methods",
    ("*", "code", "+seed_core/lineage/inputs.py"): "stage_inputs, the one answer to what a stage reads: every stage "
                                                  "reached the resume module, which asks it for the rl stage's code",
}
"""(stage or ``*``, field, item with + / - for added / removed) -> why it differs from the record."""


def _expected(record: dict, stage: str, field: str) -> list[str]:
    return [MOVED.get(item, item) for item in record[stage][field]]


def differences(record: dict, now: dict) -> list[str]:
    """One line per unexplained difference: ``config stage field +item`` / ``-item``."""
    out = []
    for config, stages in now.items():
        assert set(stages) == set(record[config]), f"{config}: stages {set(stages) ^ set(record[config])}"
        for stage, fields in stages.items():
            for field, items in fields.items():
                expected = _expected(record[config], stage, field)
                expected += [i for i in items if SPLIT.get(i) in expected]
                changes = [f"+{i}" for i in items if i not in expected] + [f"-{i}" for i in expected if i not in items]
                if not changes and field == "params" and items != expected:
                    changes = ["order"]
                out += [f"{config} {stage} {field} {c}" for c in changes
                        if (stage, field, c) not in DIFFERENCES and ("*", field, c) not in DIFFERENCES]
    return out


def test_every_stage_reads_what_it_read_before_or_the_difference_is_explained() -> None:
    record = json.loads(lineage_snapshot.RECORD.read_text())
    unexplained = differences(record, lineage_snapshot.snapshot())
    assert not unexplained, "\n".join(unexplained[:40])


def test_the_comparison_sees_a_dropped_key_a_new_file_and_a_moved_one() -> None:
    record = {"c": {"s": {"params": ["a", "b"], "code": ["x.py"], "deps": []}}}
    assert differences(record, record) == []
    assert differences(record, {"c": {"s": {"params": ["a"], "code": ["x.py", "y.py"], "deps": []}}}) == [
        "c s params -b", "c s code +y.py"]
    assert differences(record, {"c": {"s": {"params": ["b", "a"], "code": ["x.py"], "deps": []}}}) == [
        "c s params order"]
    assert differences(record, {"c": {"s": {"params": ["a", "b"], "code": ["z/x.py"], "deps": []}}}) == [
        "c s code +z/x.py", "c s code -x.py"]
