"""dvc.yaml deps follow the import graph (issue 14): every seed_core / flows / tasks module a stage can import,
at module level or inside a function, transitively from its ``python -m flows.<stage>`` entry point, is
covered by one of that stage's deps (so editing it marks the stage changed), and every code dep is such a
module (so editing another file does not). The scan: ``scripts/dvc_deps.py``."""

from __future__ import annotations

import importlib.util

import pytest

from tests.unit.test_params_consistency import ROOT

_spec = importlib.util.spec_from_file_location("dvc_deps", ROOT / "scripts" / "dvc_deps.py")
dvc_deps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dvc_deps)
STAGES = dvc_deps.stages()

def test_the_scanner_sees_function_level_and_relative_imports() -> None:
    graph = dvc_deps.direct_imports(ROOT / "tasks" / "rl.py")
    assert ROOT / "seed_core" / "stages" / "rl.py" in graph  # imported inside the task body
    assert ROOT / "seed_core" / "__init__.py" in graph
    everything = dvc_deps.reachable("flows.collect")
    assert ROOT / "seed_core" / "webshop" / "reward.py" in everything  # via the env registry


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_every_module_a_stage_can_import_is_a_dep_of_it(stage: str) -> None:
    entry, deps, _ = STAGES[stage]
    missing = sorted(p.relative_to(ROOT).as_posix() for p in dvc_deps.reachable(entry) if not dvc_deps.covered(p, deps))
    assert not missing, f"dvc.yaml stage {stage!r} imports these files but does not depend on them: {missing}"


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_every_code_dep_of_a_stage_is_imported_by_it(stage: str) -> None:
    """The other way: a code dep the stage cannot import would rerun it for nothing."""
    entry, deps, _ = STAGES[stage]
    files = dvc_deps.reachable(entry)
    code = [d for d in deps if d.split("/")[0] in dvc_deps.PACKAGES]
    unused = [d for d in code if not any(dvc_deps.covered(f, [d]) for f in files)]
    assert not unused, f"dvc.yaml stage {stage!r} depends on code it never imports: {unused}"
