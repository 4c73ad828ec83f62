"""SIGKILL a stage mid-way (``python -m seed_core.stages.<stage>`` in a subprocess), rerun it, and compare the
final outputs with an uninterrupted run on the same inputs and seeds."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest
import torch
from safetensors.torch import load_file

from seed_core.config import SeedConfig, dump_resolved
from seed_core.runtime.io import read_records
from seed_core.loader import with_overrides
from seed_core.lineage.resume import RESUME_FILE, rl_fingerprint
from seed_core.stages.annotate import CACHE_FILE, run_annotate
from seed_core.stages.rl import round_dir, run_rl, run_rl_round
from seed_core.types import AnnotationRecord, StepRecord
from tests.faults import openai_server as fs
from tests.faults.helpers import marker, write_collect

ROOT = Path(__file__).resolve().parents[2]
VOLATILE = {"time/annotate_s", "annotate/cached", "annotate/sent", "annotate/mean_latency_s", "rl/tokens_per_s"}
"""Metrics that measure this run (wall time, cache hits), not its result."""


def start_stage(module: str, log: Path, *args: str | Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT,
                                env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})


def kill_when(proc: subprocess.Popen[bytes], ready: Callable[[], bool], log: Path, timeout_s: float = 90.0) -> None:
    """SIGKILL ``proc`` as soon as ``ready()`` holds; fail if it ends first or never gets there."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert proc.poll() is None, f"the stage ended before it could be killed:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the stage never reached the kill point:\n{log.read_text()[-3000:]}"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL


def complete_lines(path: Path) -> list[str]:
    data = path.read_bytes() if path.is_file() else b""
    return data[: data.rfind(b"\n") + 1].decode().splitlines()


def without(record: object, *fields: str) -> dict[str, object]:
    row = dataclasses.asdict(record)  # type: ignore[call-overload]
    return {k: v for k, v in row.items() if k not in fields}


def stable_metrics(path: Path) -> dict[str, object]:
    return {k: v for k, v in json.loads(path.read_text()).items() if k not in VOLATILE and not k.startswith("time/")}


def test_annotate_killed_midway_resends_only_the_missing_and_matches(
    tmp_path: Path, fault_server: Callable[..., fs.FaultServer], openai_cfg: SeedConfig,
) -> None:
    n = 12
    server = fault_server(latency_s=0.25)
    collect, reference, killed = tmp_path / "collect", tmp_path / "reference", tmp_path / "killed"
    write_collect(collect, n)
    cfg = with_overrides(openai_cfg, {"annotate.concurrency": 2, "annotate.timeout_s": 5.0})
    run_annotate(cfg, collect, reference)  # uninterrupted

    log = tmp_path / "killed.log"
    proc = start_stage("seed_core.stages.annotate", log, "--config", dump_resolved(cfg, tmp_path / "cfg.json"),
                       "--collect", collect, "--out", killed)
    kill_when(proc, lambda: len(complete_lines(killed / CACHE_FILE)) >= 4, log)
    cached = {json.loads(line)["record"]["traj_id"] for line in complete_lines(killed / CACHE_FILE)}
    assert 4 <= len(cached) < n and not (killed / "annotations.parquet").exists()

    before = len(server.chat_calls())
    metrics = run_annotate(cfg, collect, killed)
    resent = server.chat_calls()[before:]
    assert len(resent) == n - len(cached) == metrics["annotate/sent"]
    assert not [c for c in resent for tid in cached if marker(int(tid[-2:])) in c.prompt]

    ref_rows = read_records(reference / "annotations.parquet", AnnotationRecord)
    got_rows = read_records(killed / "annotations.parquet", AnnotationRecord)
    assert [without(r, "latency_s") for r in got_rows] == [without(r, "latency_s") for r in ref_rows]
    assert (killed / "sft_examples.jsonl").read_bytes() == (reference / "sft_examples.jsonl").read_bytes()
    assert stable_metrics(killed / "metrics.json") == stable_metrics(reference / "metrics.json")


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """One intra-op thread, as the subprocesses get (OMP_NUM_THREADS=1): on a busy 2-core machine two
    spinning threads make a tiny-model round ~7x slower, and both runs must use the same setting."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_rl_config(model_dir: Path) -> SeedConfig:
    """The smallest RL round: 1 task x 2 rollouts x 1 step x 4 tokens, GRPO, no reference model."""
    return with_overrides(SeedConfig(), {
        "model.path": str(model_dir), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 1,
        "rl.algorithm": "grpo", "rl.rounds": 2, "rl.tasks_per_round": 1, "rl.group_size": 2, "rl.kl_coef": 0.0,
        "rl.micro_batch_size": 4, "rl.mini_batch_size": 8, "generation.max_new_tokens": 4,
        "generation.max_prompt_tokens": 256,
    })


def test_rl_round_killed_midway_resumes_and_matches(tiny_model_dir: Path, tmp_path: Path,
                                                    one_torch_thread: None) -> None:
    cfg = tiny_rl_config(tiny_model_dir)
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    for out in (reference, killed):  # round 0 is finished (its checkpoint: the tiny model); round 1 is next
        shutil.copytree(tiny_model_dir, round_dir(out, 0) / "checkpoint")
        (round_dir(out, 0) / "metrics.json").write_text("{}")
        (round_dir(out, 0) / "DONE").write_text("ok\n")
        (out / RESUME_FILE).write_text(rl_fingerprint(cfg, tiny_model_dir))  # made from this config and init
    run_rl_round(cfg, 1, tiny_model_dir, reference)  # uninterrupted

    log = tmp_path / "killed.log"
    proc = start_stage("seed_core.stages.rl", log, "--config", dump_resolved(cfg, tmp_path / "cfg.json"),
                       "--init", tiny_model_dir, "--out", killed)
    kill_when(proc, lambda: b"rollout:" in log.read_bytes(), log)  # round 1 is playing its episodes
    assert not round_dir(killed, 1).exists()
    torn = killed / ".round_001.tmp" / "checkpoint"  # what a kill while writing the outputs leaves
    torn.mkdir(parents=True, exist_ok=True)
    (torn / "model.safetensors").write_bytes(b"\x00" * 100)

    run_rl(cfg, tiny_model_dir, killed)  # resumes after round 0, redoes round 1
    assert not list(killed.glob(".round_*")), "the killed attempt's temporary directory was left behind"
    ref_round, got_round = round_dir(reference, 1), round_dir(killed, 1)
    ref_steps = read_records(ref_round / "trajectories.parquet", StepRecord)
    got_steps = read_records(got_round / "trajectories.parquet", StepRecord)
    assert [without(r, "sampling_logprobs") for r in got_steps] == [without(r, "sampling_logprobs") for r in ref_steps]
    for got, ref in zip(got_steps, ref_steps):
        torch.testing.assert_close(torch.tensor(got.sampling_logprobs), torch.tensor(ref.sampling_logprobs),
                                   atol=1e-5, rtol=0)
    got_weights = load_file(got_round / "checkpoint" / "model.safetensors")
    ref_weights = load_file(ref_round / "checkpoint" / "model.safetensors")
    assert got_weights.keys() == ref_weights.keys()
    for name, tensor in ref_weights.items():
        torch.testing.assert_close(got_weights[name], tensor, atol=1e-6, rtol=1e-5, msg=name)
    assert stable_metrics(got_round / "metrics.json") == stable_metrics(ref_round / "metrics.json")
