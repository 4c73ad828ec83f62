"""In a finished tiny DVC workspace, an edit to the rl stage's code or a changed static-skill library recomputes
the RL rounds (issue 26: the rounds survive between runs outside DVC's outputs, and used to be reused because the
resume key covered neither the code nor the data). Each ``dvc repro`` runs the stages as real processes.

Each test runs alone and in any order (issue 43 item 6): the module builds one finished workspace (``built``), and
every test works on its own copy of it (``workspace``), so no test sees another's edits or outputs. The round code
of the built workspace already writes each round it computes to ``round-marker`` (``MARKER_LINE``), and tracking is
off, so the tests share no MLflow database either."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tests.flows.test_dvc_repro import PROJECT_FILES, _run, clone_workspace, commit_project, copy_project

CHECKPOINT = Path("data/rl/grpo/checkpoint/model.safetensors")
MARKER = "round-marker"
"""The file, at the workspace's root, to which the round code of ``built`` appends each round index it computes."""
ROUND_START = "    t_start = time.perf_counter()\n"
MARKER_LINE = (f"    open(Path(__file__).resolve().parents[2] / {MARKER!r}, 'a').write(f'{{round_idx}}\\n')\n")
"""Written after ``ROUND_START`` in ``seed_core/stages/rl.py``: the path follows the copy the code runs in."""


def _weights(root: Path) -> str:
    return hashlib.sha256((root / CHECKPOINT).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path, tiny_params, prefect_server: str,
          mlflow_uri: str) -> tuple[Path, dict[str, str]]:
    """A tiny project whose stages up to ``rl@grpo`` (from the base model) and ``sft`` have run once (1 round),
    with the round marker in its rl code from the start, and its environment; the tests copy it (``workspace``)
    and never change it."""
    root = tmp_path_factory.mktemp("stale-rounds")
    copy_project(root, PROJECT_FILES)
    source = root / "seed_core" / "stages" / "rl.py"
    text = source.read_text()
    assert text.count(ROUND_START) == 1 and "from pathlib import Path" in text
    source.write_text(text.replace(ROUND_START, ROUND_START + MARKER_LINE))
    tiny_params(root / "params.yaml", tiny_model_dir, "data", tracking={"enabled": False})
    env = commit_project(root, prefect_server, mlflow_uri)
    _run(["dvc", "repro", "rl@grpo", "sft"], root, env)
    assert (root / MARKER).read_text() == "0\n", "the marked round code did not run"
    return root, env


@pytest.fixture
def workspace(built: tuple[Path, dict[str, str]], tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """This test's own copy of ``built`` (git, DVC cache and outputs; not ``.dvc/tmp``, DVC's locks and state
    databases, which it makes anew), without the marker, and the environment its stages run in."""
    template, env = built
    root = tmp_path / "project"
    env = clone_workspace(template, root, env)
    (root / MARKER).unlink()
    return root, env


def test_an_edit_to_the_round_code_recomputes_the_rounds(workspace: tuple[Path, dict[str, str]]) -> None:
    root, env = workspace
    before, marker = _weights(root), root / MARKER
    source = root / "seed_core" / "stages" / "rl.py"
    text = source.read_text()
    optimizer = "if p.requires_grad), cfg.rl)"  # the optimizer's config: the edit raises its learning rate 100x
    assert text.count(optimizer) == 1
    source.write_text(text.replace(optimizer, 'if p.requires_grad), cfg.rl.model_copy(update={"lr": cfg.rl.lr * 100}))'))
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
    marker = root / MARKER
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
