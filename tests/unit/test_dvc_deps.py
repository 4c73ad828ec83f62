"""dvc.yaml code deps follow the import graph (issue 14): each stage depends on its code fingerprint
``data/code/<stage>.sha256`` (``rl@<algorithm>``: ``data/code/rl/<algorithm>.sha256``), which the ``code`` stage
writes from the package folders it depends on, and which lists every seed_core / flows / tasks module the stage can
import (at module level or inside a function, transitively from its ``python -m flows.<stage>`` entry point, and
through the name-table entries its config selects: issue 28) and nothing else: editing such a module changes the
fingerprint and so reruns the stage; editing another file does not. The scan: ``scripts/dvc_deps.py``."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import yaml

from seed_core.algorithms import ALGORITHMS
from tests.unit.test_params_consistency import ROOT, dvc_deps
STAGES = dvc_deps.stages()
PARAMS_CFG = dvc_deps.load_params()

def test_the_scanner_sees_function_level_and_relative_imports() -> None:
    graph = dvc_deps.direct_imports(ROOT / "tasks" / "rl.py")
    assert ROOT / "seed_core" / "stages" / "rl.py" in graph  # imported inside the task body
    assert ROOT / "seed_core" / "__init__.py" in graph
    everything = dvc_deps.reachable("flows.collect")
    assert ROOT / "seed_core" / "webshop" / "reward.py" in everything  # via the env table: every entry, unselected
    ezpoints = dvc_deps.reachable("flows.collect", {"ENVS": {"ezpoints"}})
    assert ROOT / "seed_core" / "envs" / "ezpoints.py" in ezpoints
    assert not {ROOT / "seed_core" / "envs" / "webshop.py", ROOT / "seed_core" / "webshop" / "reward.py"} & ezpoints


SPEC = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_each_stage_depends_on_its_fingerprint_and_params_file_and_on_no_code_file_directly(stage: str) -> None:
    _, deps, _ = STAGES[stage]
    assert dvc_deps.fingerprint_path(stage) in deps and dvc_deps.params_path(stage) in deps
    code = [d for d in deps if d.split("/")[0] in dvc_deps.PACKAGES]
    assert not code, f"dvc.yaml stage {stage!r} lists code files; its fingerprint covers them: {code}"


STAGE_ITEMS = [*(s for s in sorted(STAGES) if s != dvc_deps.PER_ALGORITHM), *(f"rl@{a}" for a in ALGORITHMS.names())]


@pytest.mark.parametrize("stage", STAGE_ITEMS)
def test_a_fingerprint_lists_exactly_the_files_the_stage_can_import_with_their_sha256(stage: str) -> None:
    name, _, algorithm = stage.partition("@")
    entry, _, _ = STAGES[name]
    select = dvc_deps.stage_select(name, PARAMS_CFG, algorithm or None)
    reachable = dvc_deps.reachable(entry, select)
    lines = [line.split("  ", 1) for line in dvc_deps.stage_fingerprint(name, PARAMS_CFG, algorithm or None).splitlines()]
    assert sorted(path for _, path in lines) == sorted(p.relative_to(ROOT).as_posix() for p in reachable)
    for digest, path in lines:
        assert digest == hashlib.sha256((ROOT / path).read_bytes()).hexdigest()
    assert ("seed_core/rollout/vllm_worker.py" in dict(reversed(pair) for pair in lines)) == \
        (ROOT / "seed_core/rollout/vllm_engine.py" in reachable)  # copied, not imported


def test_the_code_stage_depends_on_every_package_and_writes_every_fingerprint_and_params_file() -> None:
    code = SPEC[dvc_deps.CODE_STAGE]
    assert sorted(code["deps"]) == sorted(["scripts/dvc_deps.py", *dvc_deps.PACKAGES])
    assert code["cmd"] == "python scripts/dvc_deps.py --fingerprints data"
    outs = {next(iter(out)) if isinstance(out, dict) else out: out for out in code["outs"]}
    assert sorted(outs) == sorted([*(dvc_deps.fingerprint_path(stage) for stage in STAGES if stage != "rl"),
                                   *(dvc_deps.params_path(stage) for stage in STAGES if stage != "rl"),
                                   "data/code/rl", "data/params/rl"])  # per algorithm: data/{code,params}/rl/<a>.*
    assert all(isinstance(out, dict) and next(iter(out.values())) == {"cache": False, "persist": True}
               for out in outs.values())  # persist: a params typo stops the code stage before DVC removes outputs


def cached(path: Path) -> Path:
    """``path`` with the text "old", hard-linked as DVC's cache links an output; returns the link."""
    path.write_text("old\n")
    os.link(path, path.parent / "cached-object")
    return path.parent / "cached-object"


def test_writing_fingerprints_replaces_files_instead_of_editing_them(tmp_path: Path) -> None:
    """DVC may have hard-linked an older fingerprint into its cache: writing through the link would corrupt it."""
    old = tmp_path / "report.sha256"
    linked = cached(old)
    written = dvc_deps.write_fingerprints(tmp_path, PARAMS_CFG)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == sorted(
        [*(f"{stage}.sha256" for stage in STAGES if stage != "rl"), *(f"rl/{a}.sha256" for a in ALGORITHMS.names())])
    assert linked.read_text() == "old\n"
    assert old.read_text() == dvc_deps.stage_fingerprint("report", PARAMS_CFG)


def test_writing_params_files_replaces_them_and_a_missing_key_names_it(tmp_path: Path) -> None:
    old = tmp_path / "report.yaml"
    linked = cached(old)
    written = dvc_deps.write_params(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == sorted(
        [*(f"{stage}.yaml" for stage in STAGES if stage != "rl"), *(f"rl/{a}.yaml" for a in ALGORITHMS.names())])
    assert linked.read_text() == "old\n"
    assert yaml.safe_load(old.read_text())["rl.rounds"] == yaml.safe_load((ROOT / "params.yaml").read_text())["rl"]["rounds"]
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    del params["rl"]["rounds"]
    with pytest.raises(SystemExit, match="params.yaml has no key 'rl.rounds', which stage 'report' reads"):
        dvc_deps.params_text("report", params)


def test_params_files_read_params_yaml_as_dvc_does_so_dvc_exp_run_changes_none(tmp_path: Path) -> None:
    """``dvc exp run -S`` (``seed run -S``, ``seed sweep --methods``) rewrites params.yaml without quotes:
    ``mixed_precision: "no"`` becomes ``mixed_precision: no``. Both must give the same params files (YAML 1.2),
    or every stage that reads the key reruns."""
    text = (ROOT / "params.yaml").read_text()
    assert 'mixed_precision: "no"' in text
    unquoted = tmp_path / "params.yaml"
    unquoted.write_text(text.replace('mixed_precision: "no"', "mixed_precision: no"))
    for name, source in (("quoted", ROOT / "params.yaml"), ("unquoted", unquoted)):
        dvc_deps.write_params(tmp_path / name, source)
    files = sorted(p.relative_to(tmp_path / "quoted") for p in (tmp_path / "quoted").rglob("*.yaml"))
    assert files and all((tmp_path / "quoted" / f).read_text() == (tmp_path / "unquoted" / f).read_text()
                         for f in files)
    assert "model.mixed_precision: 'no'" in (tmp_path / "unquoted" / "sft.yaml").read_text()
