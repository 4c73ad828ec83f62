"""Helpers of the fault tests: synthetic collect outputs (no model needed) and a recording tracker."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from seed_core.config import SeedConfig
from seed_core.types import StepRecord, Task


def closed_port_url() -> str:
    """An endpoint URL on a loopback port that nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def marker(i: int) -> str:
    """A tag in every response of trajectory ``i``, so a server plan can single out its analysis prompt."""
    return f"#traj-{i:02d}#"


def make_collect(n_trajectories: int) -> tuple[list[Task], list[StepRecord]]:
    """``n_trajectories`` Sokoban trajectories of 2 steps, without a model (even ones succeed)."""
    from seed_core.envs import make_env

    tasks = make_env(SeedConfig().env).make_tasks("train", max(1, n_trajectories // 2), seed=7)
    records = []
    for i in range(n_trajectories):
        task = tasks[i % len(tasks)]
        for k in range(2):
            records.append(StepRecord(
                env="sokoban", split="train", task_id=task.task_id, task_type=task.task_type, seed=task.seed,
                group_id=f"g{i % len(tasks)}", traj_id=f"traj-{i:02d}", step=k, observation=f"grid {i}.{k}",
                prompt=f"Sokoban step {k} of episode {i}", response=f"<action>up</action> {marker(i)}",
                response_ids=[5, 6, 7], sampling_logprobs=[-0.5, -0.25, -1.0], action="up", format_valid=True,
                reward=float(k == 1 and i % 2 == 0), done=k == 1, episode_return=float(i % 2 == 0),
                success=i % 2 == 0, episode_length=2, policy_version="base"))
    return tasks, records


def write_collect(out_dir: Path, n_trajectories: int) -> list[StepRecord]:
    """``make_collect`` written as the collect stage does (trajectories.parquet + tasks.json)."""
    from seed_core.runtime.io import write_records
    from seed_core.data_gen.task_sets import write_tasks

    tasks, records = make_collect(n_trajectories)
    write_records(records, out_dir / "trajectories.parquet", StepRecord)
    write_tasks(tasks, out_dir / "tasks.json")
    return records


class RecordingTracker:
    """A Tracker that keeps everything it is given (artifacts by content) for inspection."""

    run_id: str | None = "recording"

    def __init__(self) -> None:
        self.records: list[tuple[str, Any]] = []

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.records.append(("metrics", (step, dict(metrics))))

    def log_params(self, params: dict[str, Any]) -> None:
        self.records.append(("params", dict(params)))

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self.records.append(("artifact", Path(path).read_bytes()))

    def set_tags(self, tags: dict[str, Any]) -> None:
        self.records.append(("tags", dict(tags)))

    def metrics(self) -> dict[str, float]:
        merged: dict[str, float] = {}
        for kind, value in self.records:
            if kind == "metrics":
                merged.update(value[1])
        return merged
