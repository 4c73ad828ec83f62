"""An unexpected exception in any ``seed`` command ends in one line and a log (issue 43 item 3): exactly one line on
stderr naming the exception, its message and our innermost file:line, the full traceback in the log file the line
names, exit code 1. Before, ``SeedGroup`` caught ``click_errors.Abort``, which typer 0.29's vendored click lacks,
so every unforeseen error printed two tracebacks (137-170 lines) ending in an unrelated AttributeError.

Each registered command of the real app is made to raise from inside (the function it calls early is replaced by
one that raises) and run through typer's vendored click in-process; ``seed preflight`` on a checkpoint without
weights, the issue's reproduction, runs as a real ``seed`` process."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import typer
from typer.testing import CliRunner

from seed_app import cli, crash

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().relative_to(ROOT).as_posix()

RAISE_IN: dict[str, tuple[list[str], str, str]] = {
    # command -> (its arguments, the module and function it calls early, replaced here by one that raises)
    "run": ([], "seed_app.workspace", "check"),
    "sweep": (["--seeds", "2"], "seed_app.workspace", "check"),
    "worker": (["--pool", "p"], "seed_app.pool", "start_worker"),
    "stage": (["prepare_model"], "seed_app.workspace", "check"),
    "init": ([], "seed_app.services", "init_stores"),
    "ui": ([], "seed_app.services", "server_commands"),
    "serve": ([], "flows.servers", "healthy"),
    "preflight": ([], "seed_core.analyzer.mechanism", "check_preflight_args"),
    "doctor": ([], "seed_app.cli_doctor", "run_golden"),
    "table": ([], "seed_app.cli_pipeline", "project_root"),
}


class Unforeseen(Exception):
    """An exception no command handles (``init`` and ``doctor`` handle RuntimeError as a failed start or build)."""


def raiser(command: str) -> tuple[Callable[..., Any], int]:
    """A function that raises ``Unforeseen`` with a two-line message, and the line of its ``raise``."""
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise Unforeseen(f"boom in {command}\nsecond line")
    return boom, boom.__code__.co_firstlineno + 1


LINE = re.compile(r"^seed (?P<cmd>\w+): unexpected (?P<type>\w+): (?P<msg>.*) \(at (?P<at>\S+:\d+) in \S+\); "
                  r"traceback in (?P<log>\S+)$")


def one_line_and_log(stderr: str, state: Path) -> tuple[re.Match[str], str]:
    """The single stderr line parsed, and the log it names (which must lie under ``state``)."""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    match = LINE.match(lines[0])
    assert match, lines[0]
    log = Path(match["log"])
    assert log.is_file() and log.is_relative_to(state), (log, state)
    return match, log.read_text()


def test_every_subcommand_has_an_unexpected_error_case() -> None:
    commands = typer.main.get_command(cli.app).commands  # type: ignore[attr-defined]
    assert set(commands) == set(RAISE_IN), "add the new command to RAISE_IN"


@pytest.mark.parametrize("command", list(RAISE_IN))
def test_an_unexpected_error_is_one_line_and_a_log(command: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    args, module, function = RAISE_IN[command]
    boom, line = raiser(command)
    monkeypatch.setattr(importlib.import_module(module), function, boom)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    result = CliRunner().invoke(cli.app, [command, *args])
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    match, log = one_line_and_log(result.stderr, tmp_path / "state" / "seed" / "errors")
    assert (match["cmd"], match["type"], match["msg"]) == (command, "Unforeseen", f"boom in {command}; second line")
    assert match["at"] == f"{HERE}:{line}", match["at"]
    assert f"command: seed {' '.join([command, *args])}" in log
    assert "Traceback (most recent call last)" in log and f"Unforeseen: boom in {command}\nsecond line" in log
    assert f'File "{ROOT / HERE}", line {line}, in boom' in log


def test_the_log_falls_back_to_the_temp_dir_and_the_place_is_ours(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A state dir that cannot be written (here a file in its place: root writes anywhere) sends the log to the
    temp dir; a frame in a library is not "ours", the innermost frame of our files is named instead."""
    (tmp_path / "state").write_text("not a folder")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(crash.tempfile, "tempdir", str(tmp_path / "tmp"))
    try:
        shutil.copyfile(tmp_path / "missing", tmp_path / "copy")  # raises inside the standard library
    except OSError as err:
        line = crash.report(err, ["table"], "table")
    assert line.startswith("seed table: unexpected FileNotFoundError: [Errno 2] No such file or directory: ")
    assert f"(at {HERE}:" in line and f"; traceback in {crash.fallback_dir()}" in line
    assert crash.fallback_dir().is_relative_to(tmp_path / "tmp") and len(list(crash.fallback_dir().iterdir())) == 1
    assert not crash.is_ours(str(ROOT / ".venv" / "lib" / "x.py")) and not crash.is_ours(shutil.__file__)


def test_old_logs_are_pruned(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"seed-table-{i}.log").write_text("x")
        os.utime(tmp_path / f"seed-table-{i}.log", (i, i))
    crash.prune(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seed-table-3.log", "seed-table-4.log"]


def test_an_abort_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """typer's Abort (what click raised for Ctrl-D at a prompt) is "aborted", exit 1: the clause that failed."""
    def abort(*args: Any, **kwargs: Any) -> None:
        raise typer.Abort()

    monkeypatch.setattr(importlib.import_module("seed_app.cli_pipeline"), "project_root", abort)
    result = CliRunner().invoke(cli.app, ["table"])
    assert (result.exit_code, result.stderr) == (1, "seed: aborted\n"), (result.output, result.exception)


def test_preflight_on_a_checkpoint_without_weights_is_one_line(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The issue's reproduction, as a real ``seed`` process: config.json and the tokenizer, no weights. It printed
    137 lines (two tracebacks) before; now one line naming the OSError and our file:line, and the log."""
    checkpoint = tmp_path / "no-weights"
    shutil.copytree(tiny_model_dir, checkpoint, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "OMP_NUM_THREADS": "1"}
    seed = Path(sys.executable).parent / "seed"
    done = subprocess.run([str(seed), "preflight", "--checkpoint", str(checkpoint), "--heldout", "2", "--tasks", "1"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, (done.stdout, done.stderr)
    match, log = one_line_and_log(done.stderr, tmp_path / "state" / "seed" / "errors")
    assert match["type"] == "OSError" and "model.safetensors" in match["msg"], match[0]
    assert match["at"].startswith("seed_core/"), match[0]
    assert "Traceback (most recent call last)" in log and f"--checkpoint {checkpoint}" in log
