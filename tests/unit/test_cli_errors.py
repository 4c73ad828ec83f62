"""Bad input to the ``seed`` command ends in one line (issue 31): every subcommand with an invalid argument exits 2
with one line naming the value, what is allowed and the fix, no traceback, and starts no server or stage; a run
whose model directory is missing says so before anything starts (in-process and as a real ``seed run`` of the
paper preset in a copy of the project); what else a run needs from outside is checked the same way
(``seed_app.inputs``); ``seed ui`` names the PID and port of what it finds, starts and stops; the testbed's
pretraining has a progress label of its own; scripts/setup.sh announces every slow step."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import typer
from typer.testing import CliRunner

from flows import servers
from seed_app import cli, cli_pipeline, inputs, workspace
from seed_core.config import SeedConfig
from seed_core.loader import with_overrides
from tests.flows.test_dvc_repro import copy_project
from tests.flows.test_services import HEALTH_SERVER, free_port  # a stand-in server that answers /health

ROOT = Path(__file__).resolve().parents[2]

BAD_ARGS: dict[str, list[tuple[list[str], tuple[str, ...]]]] = {
    # command -> (argv, what the one line must name: the value and the allowed values or the fix)
    "run": [(["run", "--preset", "presets/nope.yaml"], ("presets/nope.yaml", "smollm2-sokoban.yaml")),
            (["run", "--nmae", "x"], ("--nmae", "--name", "seed run --help")),
            (["run", "-S", "rl.opd_coeff=1"], ("opd_coeff", "opd_coef")),
            (["run", "--preset", "presets"], ("presets is a directory", "smollm2-sokoban.yaml")),  # issue 43
            (["run", "-S", "rl.rounds=1000000000"], ("rl.rounds = 1000000000", "less than or equal to 10000")),
            (["run", "-S", "rl.lr=.inf"], ("rl.lr = inf", "finite number"))],
    "sweep": [(["sweep", "--preset", "presets/nope.yaml"], ("presets/nope.yaml", "smollm2-sokoban.yaml")),
              (["sweep", "--seeds", "0"], ("--seeds '0'", "greater than or equal to 1", "seed sweep --help")),
              (["sweep", "--pool", "a/b"], ("'a/b'", "letters, digits")),
              (["sweep", "--seeds", "1000000000"], ("--seeds '1000000000'", "1000"))],
    "worker": [(["worker"], ("--pool", "seed worker --help")),
               (["worker", "--pool", "a b"], ("'a b'", "letters, digits")),
               (["worker", "--pool", "p", "--limit", "0"], ("--limit '0'", "greater than or equal to 1")),
               (["worker", "--pool", "p", "--threads", "100000"], ("--threads '100000'", "1024"))],
    "stage": [(["stage", "rl@sed"], ("'rl@sed'", "rl@seed", "prepare_model", "seed stage NAME")),
              (["stage"], ("NAME", "prepare_model", "seed stage --help"))],
    "init": [(["init", "extra"], ("(extra)", "takes no arguments", "seed init --help"))],
    "ui": [(["ui", "--prefect-port", "abc"], ("--prefect-port 'abc'", "valid integer", "seed ui --help")),
           (["ui", "--mlflow-port=0"], ("--mlflow-port '0'", "greater than or equal to 1")),
           (["ui", "--host", "no such host!"], ("--host 'no such host!'", "0.0.0.0")),
           (["ui", "--host", "203.0.113.5"], ("--host '203.0.113.5'", "not an address of this machine"))],
    "serve": [(["serve", "extra"], ("(extra)", "takes no arguments"))],
    "preflight": [(["preflight", "--algorithm", "nope"], ("'nope'", "seed_static")),
                  (["preflight", "--heldout", "1"], ("--heldout", ">= 2", "got 1")),
                  (["preflight", "--tasks", "100000"], ("--tasks '100000'", "4096"))],
    "doctor": [(["doctor", "--results", "nope.json"], ("--results nope.json does not exist", "--record")),
               (["doctor", "extra"], ("(extra)", "takes no arguments"))],
    "table": [(["table", "extra"], ("(extra)", "takes no arguments"))],
    "": [(["rnu"], ("'rnu'", "run, sweep, worker, stage", "seed --help"))],
}


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any server start or subprocess (dvc) of the command fails the test; the busy check passes and holding the
    workspace is only recorded (another seed command in this checkout must not change the answer). Returns the
    commands that held the workspace."""
    held: list[str] = []

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"nothing may start on bad input: {args[:1]}")

    @contextlib.contextmanager
    def hold(*args: object, **kwargs: object) -> Iterator[Path]:
        held.append(" ".join(sys.argv))
        yield ROOT

    monkeypatch.setattr(servers, "spawn", refuse)
    monkeypatch.setattr(workspace, "hold", hold)
    monkeypatch.setattr(workspace, "check", lambda *a, **k: None)
    monkeypatch.setattr(cli_pipeline.subprocess, "run", refuse)
    return held


def one_line_exit_2(args: list[str]) -> str:
    result = CliRunner().invoke(cli.app, args)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, (args, result.exit_code, result.output, result.exception)
    assert len(lines) == 1 and "Traceback" not in result.output, (args, result.output)
    return lines[0]


def test_every_subcommand_has_a_bad_argument_case() -> None:
    commands = typer.main.get_command(cli.app).commands  # type: ignore[attr-defined]
    assert set(commands) == set(BAD_ARGS) - {""}, "add the new command's bad arguments to BAD_ARGS"


@pytest.mark.parametrize("args, named", [case for cases in BAD_ARGS.values() for case in cases],
                         ids=lambda value: " ".join(value) if isinstance(value, list) else "")
def test_a_bad_argument_is_one_line_exit_2_and_starts_nothing(args: list[str], named: tuple[str, ...],
                                                             nothing_starts: list[str]) -> None:
    line = one_line_exit_2(args)
    assert not nothing_starts, "a bad argument is refused before the workspace is held"
    assert line.startswith("seed"), line
    for part in named:
        assert part in line, (part, line)


def test_a_missing_model_directory_stops_the_run_before_anything_starts(tmp_path: Path, nothing_starts: list[str],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELS_ROOT", str(tmp_path / "models"))
    preset = tmp_path / "gpu.yaml"
    preset.write_text("model:\n  path: Missing-Model-3B\n")
    for command in ("run", "sweep"):
        line = one_line_exit_2([command, "--preset", str(preset)])
        assert f"model directory {tmp_path / 'models' / 'Missing-Model-3B'} does not exist" in line, line
        assert "$MODELS_ROOT" in line and "-S model.path=" in line and "testbed" in line


def test_seed_run_of_a_gpu_preset_without_its_model_is_one_line_at_once(tmp_path: Path) -> None:
    """The issue's first GPU command, as a real process in a copy of the project with an empty $MODELS_ROOT: one
    line naming the directory and the fix, exit 2, no server PID file, no workspace lock holder, in seconds."""
    root = tmp_path / "project"
    project_files = ("seed_core", "tasks", "flows", "seed_app", "params.yaml", "presets/alfworld-qwen2.5-3b.yaml")
    copy_project(root, project_files)
    (tmp_path / "models").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "ALFWORLD_DATA")}
    env |= {"MODELS_ROOT": str(tmp_path / "models"), "PYTHONPATH": str(root)}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "seed_app.cli", "run", "--preset", "presets/alfworld-qwen2.5-3b.yaml"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - start
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    assert f"model directory {tmp_path / 'models' / 'Qwen2.5-3B-Instruct'} does not exist" in lines[0]
    assert "preset presets/alfworld-qwen2.5-3b.yaml" in lines[0] and "$MODELS_ROOT" in lines[0]
    assert not list((root / ".tmp").rglob("*.pid")) and not (root / workspace.HOLDER_FILE).exists()
    assert seconds < 30, f"took {seconds:.1f} s"  # measured 3-6 s on the 2 loaded cores


def test_seed_refuses_to_run_another_checkout_than_the_current_directorys(tmp_path: Path) -> None:
    """An editable install maps ``seed`` to its own checkout: run from inside a clone, it must refuse (exit 2, one
    line naming both checkouts and the fix) instead of running, and overwriting, the other workspace; the clone's
    own code (``PYTHONPATH=<clone> python -m seed_app.cli``) and a directory outside any checkout are served."""
    clone = tmp_path / "clone"
    copy_project(clone, ("seed_core", "seed_app", "params.yaml"))
    (clone / "sub").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI")}

    def table(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", "import sys; from seed_app.cli import app; sys.argv[0] = 'seed'; "
                               "app()", "table"], cwd=cwd, env={**env, "PYTHONPATH": str(pythonpath)},
                              capture_output=True, text=True, timeout=120)

    refused = table(clone / "sub", ROOT)
    lines = [line for line in (refused.stdout + refused.stderr).splitlines() if line.strip()]
    assert refused.returncode == 2 and len(lines) == 1, (refused.stdout, refused.stderr)
    assert f"runs the project at {ROOT}" in lines[0] and f"inside the checkout {clone}" in lines[0], lines[0]
    assert f"PYTHONPATH={clone} python -m seed_app.cli" in lines[0], lines[0]
    assert "# Success rate" not in refused.stdout, "nothing of the other checkout ran"
    own = table(clone / "sub", clone)
    assert "runs the project at" not in own.stderr, own.stderr
    outside = table(tmp_path, ROOT)
    assert "runs the project at" not in outside.stderr and outside.returncode == 0, outside.stderr


# --- what a run needs from outside (seed_app.inputs) --------------------------------------------------------


def _cfg(**overrides: object) -> SeedConfig:
    return with_overrides(SeedConfig(), dict(overrides))


def test_buildable_models_are_prepare_models_builders() -> None:
    text = (ROOT / "seed_core" / "stages" / "prepare_model.py").read_text()
    assert set(inputs.BUILDABLE_MODELS) == set(re.findall(r'BUILDERS\.register\("([^"]+)"\)', text))


def test_model_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELS_ROOT", str(tmp_path))
    inputs.check_model(_cfg(**{"model.path": "testbed"}))  # built by prepare_model: nothing to find
    (tmp_path / "mine" / "config.json").parent.mkdir()
    with pytest.raises(inputs.InputError, match="no config.json"):
        inputs.check_model(_cfg(**{"model.path": "mine"}))
    (tmp_path / "mine" / "config.json").write_text("{}")
    inputs.check_model(_cfg(**{"model.path": "mine"}))
    inputs.check_model(_cfg(**{"model.path": str(tmp_path / "mine")}))


def test_alfworld_data_data_dirs_and_endpoints_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    alfworld = _cfg(**{"env.name": "alfworld", "eval.splits": ["valid_seen"]})
    with pytest.raises(inputs.InputError, match="ALFWORLD_DATA is not set"):
        inputs.check_alfworld(alfworld)
    (tmp_path / "json_2.1.1" / "valid_seen").mkdir(parents=True)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    inputs.check_alfworld(alfworld)
    missing = str(tmp_path / "nowhere")
    with pytest.raises(inputs.InputError, match=f"env.search_qa.data_dir {missing} does not exist"):
        inputs.check_data_dirs(_cfg(**{"env.name": "search_qa", "env.search_qa.data_dir": missing}))
    with pytest.raises(inputs.InputError, match="products.json does not exist"):
        inputs.check_data_dirs(_cfg(**{"env.name": "webshop", "env.webshop.data_dir": missing}))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there
    with pytest.raises(inputs.InputError, match=f"127.0.0.1:{port}"):
        inputs.check_endpoints(_cfg(**{"env.name": "search_qa", "env.search_qa.retriever_url":
                                       f"http://127.0.0.1:{port}/retrieve", "env.search_qa.timeout_s": 2.0}))
    inputs.check_run(_cfg())  # the embedded default needs nothing from outside


# --- seed ui names PIDs and ports -------------------------------------------------------------------------------



@pytest.fixture
def ui_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PID and URL files in tmp_path; default ports that nobody uses."""
    monkeypatch.setattr(servers, "ui_dir", lambda: tmp_path)
    monkeypatch.setattr(servers, "DEFAULT_PORTS", {"prefect": free_port(), "mlflow": free_port()})
    return tmp_path


@pytest.fixture
def running_ui(ui_dir: Path) -> Iterator[dict[str, tuple[int, int]]]:
    """Stand-ins for both of `seed ui`'s servers, recorded as `seed ui` records them: name -> (PID, port)."""
    procs, out = [], {}
    for name in ("prefect", "mlflow"):
        port = free_port()
        procs.append(subprocess.Popen([sys.executable, "-c", HEALTH_SERVER, str(port)], start_new_session=True))
        (ui_dir / f"{name}.pid").write_text(str(procs[-1].pid))
        servers.record_url(name, f"http://127.0.0.1:{port}")
        out[name] = (procs[-1].pid, port)
    deadline = time.monotonic() + 20
    while not all(servers.healthy(f"http://127.0.0.1:{port}/health") for _, port in out.values()):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    yield out
    for proc in procs:
        proc.kill()
        proc.wait(10)


def test_seed_ui_names_the_pid_and_port_of_running_servers_and_stops_them(running_ui: dict[str, tuple[int, int]],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers, "spawn", lambda *a, **k: pytest.fail("no server may start: both are up"))
    (prefect_pid, prefect_port), (mlflow_pid, mlflow_port) = running_ui["prefect"], running_ui["mlflow"]
    again = CliRunner().invoke(cli.app, ["ui", "--prefect-port", str(prefect_port), "--mlflow-port", str(mlflow_port)])
    assert again.exit_code == 0, again.output
    assert f"prefect: http://127.0.0.1:{prefect_port}  (already running, PID {prefect_pid}, port {prefect_port};" \
        in again.output
    assert f"mlflow: http://127.0.0.1:{mlflow_port}  (already running, PID {mlflow_pid}, port {mlflow_port};" \
        in again.output
    stop = CliRunner().invoke(cli.app, ["ui", "--stop"])
    assert stop.exit_code == 0 and stop.output.splitlines() == [
        f"prefect: stopped PID {prefect_pid}, port {prefect_port}", f"mlflow: stopped PID {mlflow_pid}, port {mlflow_port}"]
    second = CliRunner().invoke(cli.app, ["ui", "--stop"])
    assert second.exit_code == 0 and "None" not in second.output
    assert second.output.splitlines() == [f"{name}: not running (no .tmp/ui/{name}.pid), nothing to stop"
                                          for name in ("prefect", "mlflow")]


# --- progress: the testbed's own label, setup.sh's steps -----------------------------------------------------


def test_every_slow_setup_step_is_announced() -> None:
    """Each install or store creation in scripts/setup.sh comes after a progress line (``step "..."``) of its own."""
    announced, slow = False, 0
    for line in (ROOT / "scripts" / "setup.sh").read_text().splitlines():
        line = line.strip()
        if line.startswith('step "'):
            announced = True
        elif re.search(r"pip install|apt-get install|bin/seed init", line) and not line.startswith(("#", "echo", '"')):
            assert announced, f"no progress line before: {line}"
            announced, slow = False, slow + 1
    assert slow >= 5
