"""Durable writes (issue 14): parquet and checkpoints are fsynced before they are renamed into place, and a
checkpoint swap killed at any point leaves a complete checkpoint that the next load or save recovers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from seed_core.runtime import io
from seed_core.config import ModelConfig
from seed_core.runtime.io import aside_path, recover_dir, write_records
from seed_core.modeling.models import load_policy
from seed_core.trainer.checkpoint import is_checkpoint, save_checkpoint
from seed_core.types import AnnotationRecord


class Killed(BaseException):
    """Stands for SIGKILL at one point of the swap (BaseException: no cleanup handler catches it)."""


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def test_parquet_is_fsynced_before_the_rename_and_its_directory_after(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(io.os, "fsync", lambda fd: (events.append(("fsync", _fd_path(fd))), real_fsync(fd))[1])
    monkeypatch.setattr(io.os, "replace", lambda a, b: (events.append(("replace", str(b))), real_replace(a, b))[1])
    out = tmp_path / "a" / "annotations.parquet"
    write_records([], out, AnnotationRecord)
    tmp = str(out.with_name(f".{out.name}.tmp-{os.getpid()}"))
    assert events == [("fsync", tmp), ("replace", str(out)), ("fsync", str(out.parent))]


def _tiny_checkpoint(tiny_model_dir: Path, out: Path, tag: str) -> Path:
    policy = load_policy(ModelConfig(path=str(tiny_model_dir), device="cpu"))
    policy.tokenizer.model_max_length = len(tag)  # tells the two versions apart (tokenizer_config.json)
    return save_checkpoint(policy.model, policy.tokenizer, out)


def _version(ckpt: Path) -> int:
    import json

    return json.loads((ckpt / "tokenizer_config.json").read_text())["model_max_length"]


@pytest.mark.parametrize("kill_at", [1, 2, 3])
def test_a_swap_killed_at_each_step_leaves_a_loadable_checkpoint(kill_at: int, tiny_model_dir: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """kill_at 1: before the old one goes aside; 2: between aside and new-in; 3: before the aside is deleted."""
    ckpt = _tiny_checkpoint(tiny_model_dir, tmp_path / "checkpoint", "old")
    real_rename, real_rmtree = os.rename, io.shutil.rmtree
    steps = {"n": 0}

    def step(action, *args, **kwargs):
        steps["n"] += 1
        if steps["n"] == kill_at:
            raise Killed
        return action(*args, **kwargs)

    monkeypatch.setattr(io.os, "rename", lambda a, b: step(real_rename, a, b))
    monkeypatch.setattr(io.shutil, "rmtree", lambda p, **kw: step(real_rmtree, p, **kw)
                        if Path(p) == aside_path(ckpt) else real_rmtree(p, **kw))
    with pytest.raises(Killed):
        _tiny_checkpoint(tiny_model_dir, ckpt, "newer")
    monkeypatch.undo()
    assert is_checkpoint(ckpt) or is_checkpoint(aside_path(ckpt))  # never a moment with none
    expected = len("old") if kill_at < 3 else len("newer")  # the new one counts once renamed in
    policy = load_policy(ModelConfig(path=str(ckpt), device="cpu"))  # load_policy recovers first
    assert policy.tokenizer.model_max_length == expected == _version(ckpt)
    assert not aside_path(ckpt).exists()
    recover_dir(ckpt)  # the dead process's temp dir is gone too (it is ours here: remove it like a restart)
    _tiny_checkpoint(tiny_model_dir, ckpt, "newest")  # the next save works from the recovered state
    assert _version(ckpt) == len("newest") and sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_recover_deletes_temp_dirs_of_dead_processes_only(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoint"
    ckpt.mkdir()
    dead = tmp_path / ".checkpoint.tmp-999999999"  # no such pid
    alive = tmp_path / f".checkpoint.tmp-{os.getpid()}"
    dead.mkdir(), alive.mkdir()
    recover_dir(ckpt)
    assert not dead.exists() and alive.exists()
