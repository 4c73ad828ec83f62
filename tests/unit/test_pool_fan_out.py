"""The pool's fan-out (``flows.pool.fan_out``) against a scripted Prefect: every cell submitted once, a failed or
lost try submitted again (a lost one marked crashed first), a cell out of retries named in the error."""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any, Iterator
from uuid import uuid4

import pytest

from flows.pool import Cell, fan_out


def state(kind: str) -> Any:
    from prefect.states import Completed, Failed, Running

    return {"completed": Completed(), "failed": Failed(message="boom"), "running": Running()}[kind]


class Scripted:
    """run_deployment and a sync client whose flow runs go through ``script[seed]``: one list of states per try,
    each state shown for one poll (the last one stays)."""

    def __init__(self, script: dict[int, list[list[str]]], worker_silent_s: float = 0.0) -> None:
        self.script, self.tries, self.crashed = script, {}, []
        heartbeat = datetime.now(timezone.utc) - timedelta(seconds=worker_silent_s)
        self.worker = SimpleNamespace(name="w", heartbeat_interval_seconds=2, last_heartbeat_time=heartbeat)
        self.runs: dict[Any, dict[str, Any]] = {}

    def run_deployment(self, name: str, parameters: dict[str, Any], **kwargs: Any) -> Any:
        seed = parameters["seed"]
        attempt = self.tries[seed] = self.tries.get(seed, -1) + 1
        run_id = uuid4()
        self.runs[run_id] = {"states": iter(self.script[seed][attempt]), "now": None}
        return SimpleNamespace(id=run_id)

    def read_flow_runs(self, flow_run_filter: Any, limit: int) -> list[Any]:
        out = []
        for run_id in flow_run_filter.id.any_:
            run = self.runs[run_id]
            run["now"] = next(run["states"], run["now"])
            out.append(SimpleNamespace(id=run_id, state=state(run["now"]), labels={"prefect.worker.name": "w"}))
        return out

    def read_workers_for_work_pool(self, pool: str) -> list[Any]:
        return [self.worker]

    def set_flow_run_state(self, run_id: Any, new_state: Any, force: bool) -> None:
        self.crashed.append(new_state.message)

    @contextlib.contextmanager
    def client(self, sync_client: bool) -> Iterator["Scripted"]:
        yield self


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch):
    def install(script: dict[int, list[list[str]]], **kwargs: Any) -> Scripted:
        fake = Scripted(script, **kwargs)
        import flows.pool

        monkeypatch.setattr(flows.pool, "run_deployment", fake.run_deployment)  # where fan_out looks them up
        monkeypatch.setattr(flows.pool, "get_client", fake.client)
        return fake
    return install


def cells(*seeds: int) -> list[Cell]:
    return [Cell(seed, {"seed": seed}) for seed in seeds]


def test_a_failed_try_is_submitted_again_and_the_cell_completes(scripted) -> None:
    fake = scripted({0: [["running", "completed"]], 1: [["running", "failed"], ["completed"]]})
    said: list[str] = []
    done = fan_out("d/p", "p", cells(0, 1), retries=2, poll_s=0, say=said.append)
    assert fake.tries == {0: 0, 1: 1} and all(c.final is not None for c in done)
    assert [len(c.runs) for c in done] == [1, 2]
    assert said == ["seed sweep: cell seed 1, try 0: failed: boom; submitting it again"]


def test_a_try_whose_worker_went_silent_is_marked_crashed_and_submitted_again(scripted) -> None:
    fake = scripted({0: [["running"], ["running"], ["running"]]}, worker_silent_s=60)
    with pytest.raises(RuntimeError, match=r"failed after 2 retries: seed 0 \(worker 'w' lost: no heartbeat"):
        fan_out("d/p", "p", cells(0), retries=2, poll_s=0, say=lambda line: None)
    assert fake.tries == {0: 2} and len(fake.crashed) == 3  # every lost try marked crashed on the server


def test_a_cell_still_running_on_a_live_worker_is_waited_for(scripted) -> None:
    fake = scripted({0: [["running"] * 5 + ["completed"]]}, worker_silent_s=1)
    fan_out("d/p", "p", cells(0), retries=0, poll_s=0, say=lambda line: None)
    assert fake.tries == {0: 0} and not fake.crashed


def test_flow_runs_are_read_in_pages(monkeypatch: pytest.MonkeyPatch, scripted) -> None:
    import flows.pool

    monkeypatch.setattr(flows.pool, "PAGE", 2)
    fake = scripted({s: [["completed"]] for s in range(5)})
    assert all(c.final is not None for c in fan_out("d/p", "p", cells(*range(5)), retries=0, poll_s=0))
    assert set(fake.tries) == set(range(5)) and not fake.crashed
