"""The failures users meet end in one line naming the cause and the fix, and lose nothing (issue 26, item 8): a full
disk during a checkpoint write (the temp folder removed, the previous checkpoint intact), a read-only output
directory, unloadable weights (a crafted pickle runs nothing), the endpoint in ``<project>/.env``, and the
annotation's fail-fast stop counting the requests it really sent."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest
import torch

from seed_core import config
from seed_core.runtime import endpoints
from seed_core.config import ModelConfig, SeedConfig
from seed_core.runtime.io import DiskFullError, OutputNotWritableError, write_json, write_records
from seed_core.loader import stage_errors, with_overrides
from seed_core.modeling.models import CorruptModelError, load_policy
from seed_core.trainer.checkpoint import save_checkpoint
from seed_core.types import StepRecord
from tests.faults import openai_server as fs
from tests.faults.helpers import make_collect, write_collect

ROOT = Path(__file__).resolve().parents[2]
Serve = Callable[..., fs.FaultServer]


def _mount(*args: str) -> bool:
    return os.geteuid() == 0 and subprocess.run(["mount", *args], capture_output=True).returncode == 0


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A real small file system at ``path`` (root only; skips elsewhere: the mocked tests still run)."""
    path.mkdir(parents=True, exist_ok=True)
    if not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)):
        pytest.skip("mounting a tmpfs needs root with CAP_SYS_ADMIN")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` read-only for this process: a read-only bind mount as root (root ignores permission bits),
    else mode 0o555."""
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
        return
    if not _mount("--bind", str(path), str(path)):
        pytest.skip("a read-only bind mount needs CAP_SYS_ADMIN")
    try:
        if not _mount("-o", "remount,ro,bind", str(path)):
            pytest.skip("a read-only bind mount needs CAP_SYS_ADMIN")
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


def _assert_one_line(message: str, *parts: str) -> None:
    assert "\n" not in message and "Traceback" not in message, message
    for part in parts:
        assert part in message, (part, message)


def _policy_and_optimizer(model_dir: Path):
    policy = load_policy(ModelConfig(path=str(model_dir), device="cpu"))
    optimizer = torch.optim.AdamW(policy.model.parameters())
    for p in policy.model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()  # moments exist: the optimizer state is twice the weights
    return policy, optimizer


def _short_write(real: Callable[..., None]) -> Callable[..., None]:
    """torch.save as it fails on a full disk: part of the file written, then the zip writer's short-write error."""
    def save(obj, f, *args, **kwargs) -> None:
        Path(f).write_bytes(b"PK\x03\x04" + b"\0" * 4096)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 6063872 vs 6063764")

    return save


@pytest.mark.parametrize("disk", ["tmpfs", "mocked_short_write"])
def test_a_full_disk_during_a_checkpoint_write_says_so_and_keeps_the_previous_checkpoint(
    disk: str, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy, optimizer = _policy_and_optimizer(tiny_model_dir)
    with contextlib.ExitStack() as stack:
        root = stack.enter_context(tmpfs(tmp_path / "disk", "8m")) if disk == "tmpfs" else tmp_path
        out = root / "ckpt"
        save_checkpoint(policy.model, policy.tokenizer, out)  # ~4.4 MB fits; with the optimizer state it does not
        before = {f.name: f.read_bytes() for f in out.iterdir()}
        if disk != "tmpfs":
            monkeypatch.setattr(torch, "save", _short_write(torch.save))
        with pytest.raises(DiskFullError) as err:
            save_checkpoint(policy.model, policy.tokenizer, out, optimizer)
        message = str(err.value)
        _assert_one_line(message, f"while writing {out} (needed ~", " MB, free ", " MB); free space there or set "
                         "project.data_dir ($MODELS_ROOT for a model directory) to a directory on a disk with room")
        assert message.startswith(f"no space left on {root if disk == 'tmpfs' else '/'}")
        assert sorted(p.name for p in root.iterdir()) == ["ckpt"]  # the temp folder is gone
        assert {f.name: f.read_bytes() for f in out.iterdir()} == before  # the previous checkpoint is intact


def test_a_full_disk_met_by_any_write_is_one_line_on_the_cli(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stop, stage_errors("rl"):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "round_003"))
    _assert_one_line(str(stop.value), f"seed rl: no space left on ", f"while writing {tmp_path / 'round_003'} ",
                     "project.data_dir")


def test_a_full_disk_during_a_parquet_write_leaves_no_temp_file(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    def full(table, where, *args, **kwargs) -> None:
        Path(where).write_bytes(b"PAR1")
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pq, "write_table", full)
    with pytest.raises(DiskFullError, match=r"^no space left on .* while writing .*trajectories.parquet \(needed"):
        write_records(make_collect(2)[1], tmp_path / "trajectories.parquet", StepRecord)
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_output_directory_is_one_line_naming_it(tiny_model_dir: Path, tmp_path: Path) -> None:
    policy = load_policy(ModelConfig(path=str(tiny_model_dir), device="cpu"))
    out = tmp_path / "data"
    out.mkdir()
    with read_only(out):
        with pytest.raises(OutputNotWritableError) as err:
            write_json(out / "collect" / "metrics.json", {"x": 1.0})
        with pytest.raises(OutputNotWritableError) as ckpt_err:
            save_checkpoint(policy.model, policy.tokenizer, out / "checkpoint")
    _assert_one_line(str(err.value), f"cannot write {out / 'collect' / 'metrics.json'}: {out} is ")
    _assert_one_line(str(ckpt_err.value), f"cannot write {out / 'checkpoint'}: {out} is ")
    for message in (str(err.value), str(ckpt_err.value)):
        assert "read-only file system; remount it read-write" in message or "not writable by this user" in message
        assert message.endswith("or set project.data_dir ($MODELS_ROOT for a model directory) to a writable "
                                "directory")
    assert os.listdir(out) == []


def test_the_stage_cli_says_a_read_only_output_directory_in_one_line(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``python -m seed_core.stages.collect`` with its output in a read-only directory: one line, exit 1."""
    from tests.flows.conftest import write_tiny_params

    params = write_tiny_params(tmp_path / "params.yaml", tiny_model_dir, str(tmp_path / "data"))
    (tmp_path / "data").mkdir()
    with read_only(tmp_path / "data"):
        done = subprocess.run([sys.executable, "-m", "seed_core.stages.collect", "--config", str(params), "--model",
                               str(tiny_model_dir), "--out", str(tmp_path / "data" / "collect")], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-3000:]
    last = done.stderr[done.stderr.rindex("seed collect: "):].strip()  # after the progress bars
    data = tmp_path / "data"
    _assert_one_line(last, f"seed collect: cannot write {data / 'collect'}/", f": {data} is ", "project.data_dir")
    assert "Traceback" not in done.stderr


class _Payload:
    """A pickle that would run a command when loaded without ``weights_only``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _bin_checkpoint(tiny_model_dir: Path, where: Path, weights: Callable[[Path], None]) -> Path:
    ckpt = Path(shutil.copytree(tiny_model_dir, where))
    (ckpt / "model.safetensors").unlink()
    weights(ckpt / "pytorch_model.bin")
    return ckpt


def _truncated_safetensors(tiny_model_dir: Path, where: Path) -> Path:
    ckpt = Path(shutil.copytree(tiny_model_dir, where))
    data = (ckpt / "model.safetensors").read_bytes()
    (ckpt / "model.safetensors").write_bytes(data[: len(data) // 2])
    return ckpt


@pytest.mark.parametrize("damage", ["malicious_pickle", "legacy_malicious_pickle", "truncated_bin",
                                    "truncated_safetensors"])
def test_unloadable_weights_are_one_line_naming_the_file_and_run_nothing(
    damage: str, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from seed_core.stages.collect import main

    marker = tmp_path / "ran"
    ckpt = tmp_path / "ckpt"
    if damage == "malicious_pickle":  # torch.save's zip format, a payload inside
        _bin_checkpoint(tiny_model_dir, ckpt, lambda f: torch.save({"model.embed_tokens.weight": _Payload(marker)}, f))
    elif damage == "legacy_malicious_pickle":  # a bare pickle, the oldest .bin format
        _bin_checkpoint(tiny_model_dir, ckpt, lambda f: f.write_bytes(pickle.dumps({"w": _Payload(marker)})))
    elif damage == "truncated_bin":
        def truncated(f: Path) -> None:
            torch.save({"w": torch.zeros(1000)}, f)
            f.write_bytes(f.read_bytes()[:300])
        _bin_checkpoint(tiny_model_dir, ckpt, truncated)
    else:
        _truncated_safetensors(tiny_model_dir, ckpt)
    weights = next(f for f in ckpt.iterdir() if f.suffix in (".bin", ".safetensors"))
    with pytest.raises(CorruptModelError) as err:
        load_policy(ModelConfig(path=str(ckpt), device="cpu"))
    _assert_one_line(str(err.value), f"{weights} ", f"`dvc checkout {ckpt}`", "rerun the stage that wrote it")
    if "pickle" in damage:
        assert "holds more than tensors, so it was not loaded and nothing in it ran" in str(err.value)
        assert "never load it with weights_only=False" in str(err.value)
    monkeypatch.setattr("sys.argv", ["collect", "--config", str(ROOT / "params.yaml"), "--model", str(ckpt),
                                     "--out", str(tmp_path / "collect")])
    with pytest.raises(SystemExit) as stop:
        main()
    _assert_one_line(str(stop.value), f"seed collect: {weights} ")
    assert not marker.exists() and not (tmp_path / "collect").exists()


# --- the endpoint in <project>/.env -----------------------------------------------------------------------------


@pytest.fixture
def env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``<project>/.env`` pointed at a temporary file (not yet read); the endpoint variables unset, and restored
    after the test."""
    path = tmp_path / ".env"
    monkeypatch.setattr(endpoints, "ENV_FILE", str(path))  # project_root() / an absolute path = that path
    monkeypatch.setattr(endpoints, "_ENV_FILE_READ", [])
    for name in config.ENDPOINT_VARS:
        monkeypatch.setenv(name, "")  # recorded, so what the file sets is undone at teardown
        monkeypatch.delenv(name)
    return path


def test_dot_env_sets_only_unset_endpoint_variables_and_never_logs_values(
    env_file: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    env_file.write_text("OPENAI_BASE_URL=http://127.0.0.1:9/v1\nOPENAI_API_KEY='sk-from-file'\n"
                        "MODELS_ROOT=/from/file\nLD_PRELOAD=/tmp/evil.so\nSEED_SECRET_THING=hunter2\n")
    monkeypatch.setenv("MODELS_ROOT", "/from/environment")
    with caplog.at_level(logging.WARNING, logger="seed_core.runtime.endpoints"):
        assert config.endpoint_env("OPENAI_BASE_URL") == "http://127.0.0.1:9/v1"
    assert config.endpoint_env("OPENAI_API_KEY") == "sk-from-file"
    assert config.endpoint_env("MODELS_ROOT") == "/from/environment"  # the environment wins
    assert "LD_PRELOAD" not in os.environ and "SEED_SECRET_THING" not in os.environ  # only endpoint variables
    assert "ignored LD_PRELOAD, SEED_SECRET_THING" in caplog.text
    assert "sk-from-file" not in caplog.text and "hunter2" not in caplog.text and "evil" not in caplog.text
    env_file.write_text("OPENAI_BASE_URL=http://changed/v1\n")
    assert config.endpoint_env("OPENAI_BASE_URL") == "http://127.0.0.1:9/v1"  # read once, at the start


def test_the_annotator_finds_its_endpoint_in_dot_env(env_file: Path, tmp_path: Path) -> None:
    from seed_core.stages.annotate import run_annotate

    with fs.FaultServer() as server:
        env_file.write_text(f"OPENAI_BASE_URL={server.base_url}\nOPENAI_API_KEY=sk-test\n")
        write_collect(tmp_path / "collect", 2)
        cfg = with_overrides(SeedConfig(), {"annotate.client": "openai", "annotate.model": "fake-model"})
        metrics = run_annotate(cfg, tmp_path / "collect", tmp_path / "annotate")
        assert metrics["annotate/ok"] == 2 and len(server.chat_calls()) == 2


def test_without_an_endpoint_the_annotator_names_the_dot_env_file_it_read(env_file: Path, tmp_path: Path) -> None:
    from seed_core.analyzer.clients import AnalyzerSetupError
    from seed_core.stages.annotate import run_annotate

    write_collect(tmp_path / "collect", 2)
    cfg = with_overrides(SeedConfig(), {"annotate.client": "openai"})
    with pytest.raises(AnalyzerSetupError) as err:
        run_annotate(cfg, tmp_path / "collect", tmp_path / "annotate")
    _assert_one_line(str(err.value), f"OPENAI_API_KEY in the environment or in {env_file}, ")


# --- the fail-fast stop counts what it sent ---------------------------------------------------------------------


def test_the_fail_fast_stop_counts_every_request_sent(tmp_path: Path, fault_server: Serve,
                                                      openai_cfg: SeedConfig) -> None:
    """The defaults (8 threads, stop after 8): the threads have sent more than 8 by the time 8 have failed."""
    from seed_core.stages.annotate import AnnotationQualityError, run_annotate

    server = fault_server(fs.always(fs.error(404, "The model `fake-model` does not exist")), latency_s=0.05)
    write_collect(tmp_path / "collect", 40)
    cfg = with_overrides(openai_cfg, {"annotate.concurrency": 8, "annotate.fail_fast_after": 8})
    with pytest.raises(AnnotationQualityError) as err:
        run_annotate(cfg, tmp_path / "collect", tmp_path / "annotate")
    sent = len(server.chat_calls())
    assert 8 <= sent < 40  # 16 in the run (8 threads: 8 more left before the stop was seen)
    _assert_one_line(str(err.value), "stopped early: the first 8 trajectories ",
                     f"; {sent} requests were sent in all, for {sent} of the 40 trajectories (the other {40 - sent} "
                     "were not sent)")
