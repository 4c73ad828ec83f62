"""Sweep cells that many processes may run (``seed_core.sweep.cells``): the key, at most one computation per key,
atomic publication, the event log; and the pool's lost-worker rule (``flows.pool.lost_reason``)."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from seed_core.config import SeedConfig
from seed_core.loader import with_overrides
from seed_core.sweep.cells import cell_dir, cell_key, finished_cell, read_events, run_cell_once


def fake_runner(calls: list[int] | None = None, sleep_s: float = 0.0):
    def run(cfg: SeedConfig, base: Path, out: Path, methods: list[str], tracker: Any) -> dict[str, Any]:
        if calls is not None:
            calls.append(cfg.project.seed)
        out.mkdir(parents=True, exist_ok=True)
        (out / "part.txt").write_text("x")
        time.sleep(sleep_s)
        results = {"seed": cfg.project.seed, "methods": methods, "success": {m: 0.5 for m in methods}}
        (out / "results.json").write_text(json.dumps(results))
        return results
    return run


def test_the_key_follows_the_results_not_where_they_are_logged() -> None:
    cfg = SeedConfig()
    key = cell_key(cfg, "abc.dir")
    assert key == cell_key(with_overrides(cfg, {"tracking.experiment": "other", "project.data_dir": "/x"}), "abc.dir")
    assert key == cell_key(with_overrides(cfg, {"sweep.seeds": [0, 1, 2, 3]}), "abc.dir")
    for changed in ({"project.seed": 7}, {"rl.lr": cfg.rl.lr * 2}, {"sweep.methods": ["vanilla"]}):
        assert cell_key(with_overrides(cfg, changed), "abc.dir") != key, changed
    assert cell_key(cfg, "other.dir") != key  # another base model


def test_a_cell_runs_once_per_key_and_is_published_whole(tmp_path: Path) -> None:
    cfg, calls = with_overrides(SeedConfig(), {"project.seed": 3}), []
    results, outcome = run_cell_once(cfg, tmp_path / "base", tmp_path, "k1", runner=fake_runner(calls), worker="w")
    assert outcome == "completed" and results["config_hash"] == "k1"
    assert finished_cell(cell_dir(tmp_path, 3), "k1") == results and finished_cell(cell_dir(tmp_path, 3), "k2") is None
    assert (cell_dir(tmp_path, 3) / "part.txt").is_file() and not list(tmp_path.glob(".seed_3.tmp-*"))
    assert run_cell_once(cfg, tmp_path / "base", tmp_path, "k1", runner=fake_runner(calls))[1] == "reused"
    assert calls == [3]
    assert run_cell_once(cfg, tmp_path / "base", tmp_path, "k2", runner=fake_runner(calls))[1] == "completed"
    assert calls == [3, 3]  # another config: computed again, replacing the old cell
    events = [(e["event"], e["config_hash"]) for e in read_events(tmp_path)]
    assert events == [("started", "k1"), ("completed", "k1"), ("reused", "k1"), ("started", "k2"),
                      ("completed", "k2")]
    assert read_events(tmp_path)[0]["worker"] == "w" and read_events(tmp_path)[0]["torch_threads"] >= 1


def _run_in_process(cells: str) -> None:
    cfg = with_overrides(SeedConfig(), {"project.seed": 0})
    run_cell_once(cfg, Path(cells) / "base", Path(cells), "k", runner=fake_runner(sleep_s=1.0))


def test_two_processes_on_one_cell_compute_it_once(tmp_path: Path) -> None:
    procs = [multiprocessing.get_context("fork").Process(target=_run_in_process, args=(str(tmp_path),))
             for _ in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert sorted(e["event"] for e in read_events(tmp_path)) == ["completed", "reused", "started"]


def test_a_killed_try_leaves_no_cell_and_its_files_go_with_the_next(tmp_path: Path) -> None:
    cfg = with_overrides(SeedConfig(), {"project.seed": 1})

    def killed(*args: Any) -> dict[str, Any]:
        fake_runner()(*args)
        raise KeyboardInterrupt  # as if killed after its stages
    with pytest.raises(KeyboardInterrupt):
        run_cell_once(cfg, tmp_path, tmp_path, "k", runner=killed)
    assert not cell_dir(tmp_path, 1).exists() and finished_cell(cell_dir(tmp_path, 1), "k") is None
    stale = tmp_path / ".seed_1.tmp-999999"  # a dead process's try
    (tmp_path / f".seed_1.tmp-{os.getpid()}").rename(stale)
    run_cell_once(cfg, tmp_path, tmp_path, "k", runner=fake_runner())
    assert not stale.exists() and finished_cell(cell_dir(tmp_path, 1), "k") is not None


def test_a_run_is_lost_only_when_its_workers_heartbeats_stopped() -> None:
    from flows.pool import lost_reason

    now = datetime.now(timezone.utc)
    run = SimpleNamespace(labels={"prefect.worker.name": "w"})
    worker = SimpleNamespace(heartbeat_interval_seconds=2, last_heartbeat_time=now - timedelta(seconds=10))
    assert lost_reason(run, {"w": worker}, now) is None  # 3 x 2 s + 5 s of grace not yet over
    worker.last_heartbeat_time = now - timedelta(seconds=12)
    assert "worker 'w' lost: no heartbeat for 12 s" in lost_reason(run, {"w": worker}, now)
    assert lost_reason(SimpleNamespace(labels={}), {"w": worker}, now) is None  # not taken yet: it waits


def test_the_cell_key_includes_the_code_it_runs(tmp_path):
    """An edit to code a cell can import is another key (a committed result made by other code is never reused);
    the fingerprint is that of ``seed_core.lineage.code_closure`` over the entry module."""
    from seed_core.config import SeedConfig
    from seed_core.sweep.cells import cell_key, code_fingerprint

    cfg = SeedConfig()
    assert cell_key(cfg, "m.dir", code="a" * 16) != cell_key(cfg, "m.dir", code="b" * 16)
    assert cell_key(cfg, "m.dir", code="a" * 16) != cell_key(cfg, "m.dir")
    fp = code_fingerprint()
    assert len(fp) == 16 and fp == code_fingerprint() and fp != code_fingerprint("seed_core.runtime.io")
