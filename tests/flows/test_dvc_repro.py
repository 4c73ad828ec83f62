"""``seed run`` (dvc repro under an MLflow parent run) on a tiny copy of the project, then a second
``dvc repro`` that must do nothing. Each stage is its own process, as in real use (slow: ~2 min)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PROJECT_FILES = ("seed_core", "tasks", "flows", "seed_app", "scripts/dvc_deps.py", "dvc.yaml", ".dvcignore",
                 ".dvc/config", ".dvc/.gitignore", ".gitignore", "pyproject.toml",
                 "data/panels")  # the committed evaluation panels (seed_core.data_gen.task_sets)


@pytest.fixture(scope="module")
def project(repro_project: tuple[Path, dict[str, str]]) -> tuple[Path, dict[str, str]]:
    """The session's tiny project copy (``tests/flows/conftest.py``; the browser test reuses its run)."""
    return repro_project


def copy_project(root: Path, names: tuple[str, ...]) -> None:
    """Copy the project's ``names`` (files or folders) under ``root``."""
    for name in names:
        src, dst = ROOT / name, root / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)


def clone_workspace(src: Path, dst: Path, env: dict[str, str]) -> dict[str, str]:
    """Copy the finished workspace ``src`` (git, DVC cache, outputs and the rounds kept beside them) to ``dst``,
    less ``.dvc/tmp`` (DVC's locks and state databases, made anew); the environment its stages run in. A test that
    changes a workspace a module built works on such a copy, so it passes alone and in any order (issue 43)."""
    shutil.copytree(src, dst, symlinks=True, ignore=lambda folder, names: ["tmp"] if Path(folder).name == ".dvc"
                    else [])
    return {**env, "DVC_SITE_CACHE_DIR": str(dst / ".dvc" / "tmp" / "site-cache")}


def commit_project(root: Path, prefect_server: str, mlflow_uri: str) -> dict[str, str]:
    """``git init`` + commit ``root``; returns the environment its DVC stages run in."""
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "MLFLOW_TRACKING_URI": mlflow_uri,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1",
           "DVC_SITE_CACHE_DIR": str(root / ".dvc" / "tmp" / "site-cache"), "OMP_NUM_THREADS": "2",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "tiny"]):
        subprocess.run(cmd, cwd=root, env=env, check=True)
    return env


def _run(cmd: list[str], root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


@pytest.fixture(scope="module")
def first_run(repro_run: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    return repro_run


def test_seed_run_reproduces_every_stage_and_prints_the_table(project, first_run) -> None:
    root, _ = project
    assert "| Method |" in first_run.stdout and "| SEED-static |" in first_run.stdout  # the paper's labels
    assert "| SEED* |" in first_run.stdout  # rl.algorithm = seed: SEED also evaluated with the static skills
    lock = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    assert {"prepare_model", "collect", "annotate", "sft", "rl@seed", "evaluate@vanilla", "evaluate@seed_star",
            "report"} <= set(lock)
    assert (root / "reports" / "curve_success.png").is_file()
    starts = {name: {d["path"] for d in lock[name]["deps"]} & {"data/models/base", "data/sft/checkpoint"}
              for name in lock if name.startswith("rl@")}
    assert starts["rl@grpo"] == starts["rl@seed_no_sft"] == {"data/models/base"}  # the paper's baseline block
    assert starts["rl@seed"] == starts["rl@seed_no_opd"] == {"data/sft/checkpoint"}  # Algorithm.init = sft
    assert "### Ablations (paper Table 2)" in (root / "reports" / "table.md").read_text()


def test_second_dvc_repro_is_a_no_op(project, first_run) -> None:
    root, env = project
    again = _run(["dvc", "repro"], root, env)
    assert "Data and pipelines are up to date." in again.stdout
    assert "Running stage" not in again.stdout
    status = _run(["dvc", "status"], root, env)
    assert "up to date" in status.stdout


def test_stage_processes_attach_to_the_parent_run(project, first_run, mlflow_uri: str) -> None:
    import mlflow

    from flows.common import eval_methods, rl_algorithms
    from seed_core.loader import load_config

    client = mlflow.MlflowClient(mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("dvc-repro-test").experiment_id], max_results=1000)
    parents = sorted((r for r in runs if r.info.run_name == "pipeline" and r.data.tags.get("dvc.command") == "dvc repro"),
                     key=lambda r: r.info.start_time)
    parent = parents[0]  # the session's first `seed run` (the browser test reruns it: a parent without children)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    cfg = load_config(project[0] / "params.yaml")
    # prepare, collect, annotate, sft, one per RL row (6), one per evaluated method (9, seed_star too), report
    assert len(children) == 5 + len(rl_algorithms(cfg)) + len(eval_methods(cfg)) == 20
    sft = next(r for r in children if r.info.run_name == "sft")
    assert sft.data.tags["dvc_stage"] == "sft"
    assert sft.data.tags["dvc.dep.data/models/base"].endswith(".dir")  # input hash from dvc.lock
    assert "seed/eval/success_rate" in parent.data.metrics


def test_a_no_op_seed_run_starts_nothing_and_prints_the_table(project, first_run, mlflow_uri: str) -> None:
    """Nothing stale: `seed run` checks `dvc status` first and exits before any Prefect server or MLflow run
    (its wall time is measured by benchmarks/pipeline_overhead.py, `noop_s`)."""
    import mlflow

    root, env = project
    client = mlflow.MlflowClient(mlflow_uri)
    experiment = client.get_experiment_by_name("dvc-repro-test").experiment_id
    before = [r.info.run_id for r in client.search_runs([experiment], max_results=1000)]
    again = _run([sys.executable, "-m", "seed_app.cli", "run"], root, env)
    assert "every stage is up to date" in again.stdout and "| SEED-static |" in again.stdout
    assert "Running stage" not in again.stdout + again.stderr
    after = [r.info.run_id for r in client.search_runs([experiment], max_results=1000)]
    assert after == before  # no run recorded (the browser test's rerun, before or after, records its own)
    params = (root / "params.yaml").read_text()
    assert "opd_coef: 0.01" in params
    (root / "params.yaml").write_text(params.replace("opd_coef: 0.01", "opd_coef: 0.02"))
    try:
        assert not cli_up_to_date(root)  # a changed param: the full run goes ahead (not run here: minutes)
    finally:
        (root / "params.yaml").write_text(params)
    assert cli_up_to_date(root)


def cli_up_to_date(root: Path) -> bool:
    return subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from seed_app.cli import "
                           "up_to_date; sys.exit(0 if up_to_date(Path(sys.argv[1])) else 1)", str(root)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300).returncode == 0
