"""In a finished tiny DVC workspace, an edit to the rl stage's code or a changed static-skill library recomputes
the RL rounds (issue 26: the rounds survive between runs outside DVC's outputs, and used to be reused because the
resume key covered neither the code nor the data). Each ``dvc repro`` runs the stages as real processes."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tests.flows.test_dvc_repro import PROJECT_FILES, _run, commit_project, copy_project

CHECKPOINT = Path("data/rl/grpo/checkpoint/model.safetensors")


def _weights(root: Path) -> str:
    return hashlib.sha256((root / CHECKPOINT).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path, tiny_params, prefect_server: str,
              mlflow_uri: str) -> tuple[Path, dict[str, str]]:
    """A tiny project whose stages up to ``rl@grpo`` (from the base model) and ``sft`` have run once (1 round)."""
    root = tmp_path_factory.mktemp("stale-rounds")
    copy_project(root, PROJECT_FILES)
    tiny_params(root / "params.yaml", tiny_model_dir, "data",
                tracking={"experiment": "stale-rounds-test", "register_models": False})
    env = commit_project(root, prefect_server, mlflow_uri)
    _run(["dvc", "repro", "rl@grpo", "sft"], root, env)
    return root, env


def test_an_edit_to_the_round_code_recomputes_the_rounds(workspace: tuple[Path, dict[str, str]]) -> None:
    root, env = workspace
    before, marker = _weights(root), root / "round-marker"
    source = root / "seed_core" / "stages" / "rl.py"
    text = source.read_text()
    assert text.count("lr=cfg.rl.lr,") == 1 and text.count("    t_start = time.perf_counter()\n") == 1
    source.write_text(text.replace("lr=cfg.rl.lr,", "lr=cfg.rl.lr * 100,").replace(
        "    t_start = time.perf_counter()\n",
        f"    t_start = time.perf_counter()\n    open({str(marker)!r}, 'a').write(f'{{round_idx}}\\n')\n"))
    _run(["dvc", "repro", "rl@grpo"], root, env)
    assert marker.read_text() == "0\n", "the edited round code never ran: the old rounds were reused"
    assert _weights(root) != before, "the weights are the old code's"
    status = subprocess.run(["dvc", "status", "rl@grpo"], cwd=root, env=env, capture_output=True, text=True)
    assert "up to date" in status.stdout, status.stdout


def test_a_changed_static_skill_library_recomputes_the_rounds_of_the_algorithms_that_read_it(
        workspace: tuple[Path, dict[str, str]]) -> None:
    """``seed_static_library`` (the library is its teacher context) starts over; GRPO, which never reads the
    library, keeps its rounds although DVC reruns its stage (the library is a data dep of every rl stage)."""
    root, env = workspace
    marker = root / "round-marker"
    assert "round-marker" in (root / "seed_core" / "stages" / "rl.py").read_text(), \
        "needs the edit of test_an_edit_to_the_round_code_recomputes_the_rounds (run the module)"
    _run(["dvc", "repro", "--single-item", "rl@seed_static_library"], root, env)
    library = root / "data" / "annotate" / "static_skills"
    _run(["dvc", "unprotect", str(library)], root, env)
    files = sorted(p for p in library.rglob("*") if p.is_file())
    assert files, "the annotate stage wrote no static skill library"
    files[0].write_text(files[0].read_text() + "\n")
    marker.unlink(missing_ok=True)
    _run(["dvc", "repro", "--single-item", "rl@seed_static_library"], root, env)
    assert marker.read_text() == "0\n", "the rounds made from the old static skills were reused"
    marker.unlink()
    _run(["dvc", "repro", "--single-item", "rl@grpo"], root, env)
    assert not marker.exists(), "GRPO's rounds were recomputed though GRPO does not read the library"


def test_a_params_typo_stops_dvc_repro_before_any_output_is_removed(workspace: tuple[Path, dict[str, str]]) -> None:
    """The code stage validates params.yaml first and keeps its own outputs (``persist``) while it runs."""
    root, env = workspace
    params = root / "params.yaml"
    good = params.read_text()
    outputs = [root / "data" / "rl" / "grpo" / "metrics.json", root / CHECKPOINT,
               root / "data" / "code" / "rl" / "grpo.sha256", root / "data" / "sft" / "checkpoint" / "config.json"]
    assert all(p.is_file() for p in outputs)
    params.write_text(good.replace("  lr: 0.0001\n", "  lr: fast\n", 1))
    assert params.read_text() != good
    try:
        result = subprocess.run(["dvc", "repro", "rl@grpo"], cwd=root, env=env, capture_output=True, text=True)
    finally:
        params.write_text(good)
    assert result.returncode != 0
    assert "rl.lr" in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert [p for p in outputs if not p.is_file()] == []
