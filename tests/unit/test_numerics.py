"""The CPU numerics pinned in stage processes (issue 28 item 1, ``seed_core.repro.numerics``): set before torch loads
unless the user set them (the user wins and is recorded), inherited by child processes as pinned, in effect in
torch, and recorded in resolved_config.json (which still loads as a config) and the MLflow params."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from seed_core.repro import numerics
from seed_core.config import SeedConfig
from seed_core.loader import load_config, with_overrides
from seed_core.repro.numerics import MARKER_VAR, PINNED, effective, mlflow_params, pin, record, source, write_resolved

ROOT = Path(__file__).resolve().parents[2]


def test_pin_sets_what_the_user_did_not_and_a_child_still_reads_it_as_pinned() -> None:
    env = {"MKL_CBWR": "COMPATIBLE"}  # the user's choice
    chosen = pin(env)
    assert chosen == {n: p.value for n, p in PINNED.items() if n != "MKL_CBWR"}
    assert env["MKL_CBWR"] == "COMPATIBLE" and env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert source("MKL_CBWR", env) == "user" and source("ATEN_CPU_CAPABILITY", env) == "pinned"
    child = dict(env)  # a child process inherits the variables and the marker
    assert pin(child) == {} and child == env and source("ATEN_CPU_CAPABILITY", child) == "pinned"
    child["ATEN_CPU_CAPABILITY"] = "avx512"  # set by hand in between: the user's
    assert source("ATEN_CPU_CAPABILITY", child) == "user"
    assert source("ONEDNN_MAX_CPU_ISA", {}) == "unpinned"
    assert effective({"MKL_CBWR": ""}) == {**{n: p.value for n, p in PINNED.items()}, "MKL_CBWR": ""}
    native = {"SEED_NUMERICS": "native", "MKL_CBWR": "AVX2"}  # pin nothing; what the user set still counts
    assert pin(native) == {} and effective(native) == {**{n: "" for n in PINNED}, "MKL_CBWR": "AVX2"}


def test_pin_does_nothing_once_torch_is_loaded() -> None:
    import torch  # noqa: F401  (conftest loaded it already)

    before = dict(os.environ)
    assert pin() == {} and dict(os.environ) == before


def _fresh(code: str, **env: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in (*PINNED, MARKER_VAR)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**clean, **env}, capture_output=True,
                          text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


READ = ("import json, torch; from seed_core.repro.numerics import record; r = record(); "
        "print(json.dumps({'capability': r['cpu_capability'], **r['sources'], 'mkl': r['settings']['MKL_CBWR']}))")


def test_a_stage_process_runs_torch_under_the_pinned_numerics_unless_the_user_chose() -> None:
    for package in ("flows", "seed_core.stages", "seed_app"):  # the stages, the engine entry points, `seed`
        got = _fresh(f"import {package}; {READ}")
        assert got == {"capability": "AVX2", "ATEN_CPU_CAPABILITY": "pinned", "MKL_CBWR": "pinned",
                       "ONEDNN_MAX_CPU_ISA": "pinned", "mkl": "AVX2"}, (package, got)
    got = _fresh(f"import flows; {READ}", ATEN_CPU_CAPABILITY="default")
    assert got["capability"] == "DEFAULT" and got["ATEN_CPU_CAPABILITY"] == "user" and got["MKL_CBWR"] == "pinned"
    assert _fresh(READ)["ATEN_CPU_CAPABILITY"] == "unpinned"  # no stage package imported: nothing pinned


def test_resolved_config_records_the_numerics_and_still_loads(tmp_path: Path) -> None:
    cfg = with_overrides(SeedConfig(), {"rl.lr": 0.5})
    path = write_resolved(cfg, tmp_path / "resolved_config.json")
    data = json.loads(path.read_text())
    assert data[numerics.RECORD_KEY] == json.loads(json.dumps(record()))
    assert set(data[numerics.RECORD_KEY]["settings"]) == set(PINNED) and "cpu_model" in data[numerics.RECORD_KEY]
    assert load_config(path) == cfg  # the record is dropped, not taken for a setting
    params = mlflow_params({"settings": {"MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": ""},
                            "sources": {"MKL_CBWR": "pinned", "ONEDNN_MAX_CPU_ISA": "user"},
                            "cpu_model": "X", "isa": ["avx2", "fma"], "torch_threads": 2})
    assert params == {"numerics.MKL_CBWR": "AVX2 (pinned)", "numerics.ONEDNN_MAX_CPU_ISA": "- (user)",
                      "numerics.cpu_model": "X", "numerics.torch_threads": "2", "numerics.isa": "avx2 fma"}
