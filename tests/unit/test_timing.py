"""seed_core.runtime.timing (per-process marks and exclusive spans) and how benchmarks/pipeline_overhead.py splits a
stage process's wall time with them."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from seed_core.runtime import timing

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv(timing.ENV, str(tmp_path))
    monkeypatch.setattr(timing, "_marks", {})
    monkeypatch.setattr(timing, "_spans", {})
    monkeypatch.setattr(timing, "_stack", [])
    monkeypatch.setattr(timing, "_registered", True)  # no atexit hook from the test process
    return tmp_path


def test_spans_are_exclusive_and_marks_keep_the_first_time(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 1.0, 4.0, 6.0])  # outer opens at 0, inner 1..4, outer closes at 6
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    with timing.span("mlflow"):
        with timing.span("engine"):
            pass
    assert timing._spans == {"mlflow": 3.0, "engine": 3.0}  # 0..1 + 4..6 outside, 1..4 inside
    timing.mark("imports_done")
    first = timing._marks["imports_done"]
    timing.mark("imports_done")
    assert timing._marks["imports_done"] == first


def test_a_process_writes_its_record_only_when_asked(tmp_path: Path) -> None:
    code = ("from seed_core.runtime import timing\ntiming.mark('imports_done')\n"
            "with timing.span('engine'):\n    sum(range(1000))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DVC_STAGE": "rl@seed"}
    off = subprocess.run([sys.executable, "-c", code], env={k: v for k, v in env.items() if k != timing.ENV},
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert off.returncode == 0, off.stderr
    assert not list(tmp_path.rglob("*.json"))
    on = subprocess.run([sys.executable, "-c", code], env={**env, timing.ENV: str(tmp_path / "t")}, cwd=tmp_path,
                        capture_output=True, text=True, timeout=120)
    assert on.returncode == 0, on.stderr
    (path,) = (tmp_path / "t").glob("*.json")
    record = json.loads(path.read_text())
    assert path.name.startswith("rl_seed-") and record["label"] == "rl@seed"
    assert record["process_start"] <= record["marks"]["imports_done"] <= record["exit"]
    assert record["spans_s"]["engine"] >= 0


def load_benchmark():
    spec = importlib.util.spec_from_file_location("pipeline_overhead", ROOT / "benchmarks" / "pipeline_overhead.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_split_of_a_stage_adds_up_to_its_wall_time() -> None:
    bench = load_benchmark()
    record = {"label": "sft", "process_start": 100.0, "exit": 160.0,
              "marks": {"imports_done": 104.0, "config_loaded": 105.5, "flow_body": 112.0, "stage_run_end": 157.0},
              "spans_s": {"mlflow": 3.0, "imports": 5.0, "engine": 30.0, "prefect": 0.5, "flow_body": 6.5}}
    split = bench.stage_split(record, previous_end=97.0)
    assert split == {"dvc_before_s": 3.0, "start_imports_s": 4.0, "config_s": 1.5, "prefect_s": 6.5 + 0.5 + 3.0,
                     "mlflow_s": 3.0,
                     "lazy_imports_s": 5.0, "engine_s": 30.0, "flow_other_s": 45.0 - 30.0 - 5.0 - 3.0 - 0.5,
                     "process_s": 60.0}
    parts = sum(v for k, v in split.items() if k not in ("process_s", "dvc_before_s"))
    assert parts == pytest.approx(split["process_s"])
    run = {"start": 90.0, "end": 170.0}
    top = {"label": "cli.py", "process_start": 90.0, "exit": 170.0, "marks": {"cli_run": 91.0, "dvc_start": 96.0,
                                                                             "dvc_end": 162.0}, "spans_s": {}}
    whole = bench.split([top, record], run)
    assert whole["engine_s"] == 30.0 and whole["overhead_share"] == pytest.approx(1 - 30 / 80)
    assert whole["split_s"]["dvc_before_s"] == 4.0 and whole["split_s"]["dvc_after_last_stage_s"] == 2.0
    assert whole["split_s"]["before_dvc_s"] == 6.0 and whole["split_s"]["after_dvc_s"] == 8.0
    assert sum(whole["split_s"].values()) == pytest.approx(whole["wall_s"])  # each second in one bucket
    assert whole["before_dvc_detail_s"] == {"process_start_to_cli_s": 1.0}


def test_a_no_op_run_is_all_before_dvc() -> None:
    bench = load_benchmark()
    top = {"label": "cli.py", "process_start": 10.0, "exit": 11.9, "marks": {"cli_run": 10.5}, "spans_s": {}}
    whole = bench.split([top], {"start": 9.9, "end": 12.0})
    assert whole["stages"] == [] and whole["engine_s"] == 0 and whole["split_s"]["before_dvc_s"] == 2.1
    assert sum(whole["split_s"].values()) == pytest.approx(whole["wall_s"])


def test_a_flow_without_a_stage_run_is_all_prefect_after_its_imports() -> None:
    record = {"label": "generate_alfworld", "process_start": 0.0, "exit": 10.0, "marks": {"imports_done": 4.0},
              "spans_s": {}}
    split = load_benchmark().stage_split(record, previous_end=0.0)
    assert split["prefect_s"] == 6.0 and split["flow_other_s"] == 0.0
