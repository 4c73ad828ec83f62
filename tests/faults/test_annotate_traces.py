"""Stage 1's analyzer calls as MLflow traces (issue 41), against the fault server and a real sqlite MLflow store:
one trace per request, linked to the stage's run, with its HTTP attempts (the SDK's retries), token usage, latency
and failures, the analysis prompts' registered versions named by the run, and the API key in no trace, span or
other byte of the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from seed_core import tracking
from seed_core.analyzer.prompts import ANALYSIS_PROMPT, RETRY_PROMPT, analysis_template, retry_template
from seed_core.config import SeedConfig
from seed_core.runtime.io import read_records
from seed_core.loader import with_overrides
from seed_core.stages.annotate import run_annotate
from seed_core.types import AnnotationRecord
from tests.faults import openai_server as fs
from tests.faults.helpers import make_collect, marker, write_collect

SECRET = "sk-test-SECRET-9d3b71c0e4"
N = 6
FAILS, RATE_LIMITED, MALFORMED_ONCE, KEY_IN_PROMPT = 0, 1, 2, 3
"""Trajectory 0: every call a 500 that echoes the key (the SDK retries, then it fails); 1: a 429 first, then an
answer; 2: a malformed answer first (the re-ask is a request of its own); 3: an observation that holds the key, so
its prompt does; the others answer at once."""


def write_collect_with_key(out: Path) -> None:
    from dataclasses import replace

    from seed_core.runtime.io import write_records
    from seed_core.data_gen.task_sets import write_tasks
    from seed_core.types import StepRecord

    tasks, records = make_collect(N)
    records = [replace(r, observation=f"{r.observation} (the server said: {SECRET})")
               if r.traj_id == f"traj-{KEY_IN_PROMPT:02d}" else r for r in records]
    write_records(records, out / "trajectories.parquet", StepRecord)
    write_tasks(tasks, out / "tasks.json")


def plan(call: fs.Call) -> fs.Reply:
    if marker(FAILS) in call.prompt:
        return fs.server_error(500, headers={"retry-after-ms": "1"}, message=f"upstream refused key {SECRET}")
    if marker(RATE_LIMITED) in call.prompt and call.repeat == 0:
        return fs.rate_limit("0.01")
    if marker(MALFORMED_ONCE) in call.prompt and "could not be used" not in call.prompt:
        return fs.malformed_answer()
    return fs.OK


class TracedRun:
    def __init__(self, root: Path, uri: str) -> None:
        import mlflow

        cfg = with_overrides(SeedConfig(), {
            "annotate.client": "openai", "annotate.model": "fake-model", "annotate.timeout_s": 2.0,
            "annotate.max_retries": 3, "annotate.concurrency": 3, "annotate.parse_attempts": 2,
            "tracking.experiment": "traces"})
        write_collect_with_key(root / "collect")
        with tracking.open_run(cfg, "annotate", prefix="annotate") as tracker:
            self.metrics = run_annotate(cfg, root / "collect", root / "annotate", tracker=tracker)
        self.run_id, self.client = tracker.run_id, mlflow.MlflowClient(uri)
        self.run = self.client.get_run(self.run_id)
        self.records = {r.traj_id: r for r in read_records(root / "annotate" / "annotations.parquet", AnnotationRecord)}
        self.traces = self.client.search_traces(locations=[self.run.info.experiment_id], max_results=1000)

    def of(self, i: int) -> list[Any]:
        """The traces of trajectory ``i``, oldest first."""
        return sorted((t for t in self.traces if t.info.tags.get("traj_id") == f"traj-{i:02d}"),
                      key=lambda t: t.info.request_time)


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TracedRun]:
    root = tmp_path_factory.mktemp("traced")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    with fs.FaultServer(plan) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        mp.setenv("OPENAI_BASE_URL", server.base_url)
        mp.setenv("OPENAI_API_KEY", SECRET)
        run = TracedRun(root, uri)
        run.root, run.server = root, server
        yield run
    tracking._client.cache_clear()


def test_each_request_is_one_trace_of_the_stage_run_with_its_token_counts(traced: TracedRun) -> None:
    records = traced.records
    assert records[f"traj-{MALFORMED_ONCE:02d}"].attempts == 2 and records[f"traj-{FAILS:02d}"].attempts == 1
    assert len(traced.traces) == sum(r.attempts for r in records.values()) == N + 1  # one per request sent
    assert all(t.info.request_metadata["mlflow.sourceRun"] == traced.run_id for t in traced.traces)
    ok = [t for t in traced.traces if t.info.state.value == "OK"]
    assert len(ok) == N and all(t.info.token_usage == {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}
                                for t in ok)  # the server's usage of one answer
    assert sum(t.info.token_usage["input_tokens"] for t in traced.traces if t.info.token_usage) \
        == traced.metrics["annotate/prompt_tokens"]
    first, reask = traced.of(MALFORMED_ONCE)
    assert "could not be used" not in json.dumps(first.data.spans[0].inputs)
    assert "could not be used" in json.dumps(reask.data.spans[0].inputs)  # the retry prompt, its own trace
    root = ok[0].data.spans[0]
    assert root.span_type == "CHAT_MODEL" and root.inputs["model"] == "fake-model"
    assert root.attributes["latency_s"] > 0 and ok[0].info.execution_duration >= 0


def test_retries_and_failures_show_as_attempts_with_their_status(traced: TracedRun) -> None:
    (limited,) = traced.of(RATE_LIMITED)
    root, *attempts = limited.data.spans
    assert [s.attributes["http.status_code"] for s in attempts] == [429, 200]  # the SDK's retry after the 429
    assert attempts[0].attributes["retry_after"] == "0.01" and root.attributes["retries"] == 1
    assert limited.info.state.value == "OK"

    (failed,) = traced.of(FAILS)
    root, *attempts = failed.data.spans
    assert failed.info.state.value == "ERROR" and root.status.status_code.value == "ERROR"
    assert [s.attributes["http.status_code"] for s in attempts] == [500] * 4  # max_retries 3: four sends
    assert root.attributes["http_requests"] == 4 and root.attributes["retries"] == 3
    error = next(e for e in root.events if e.name == "exception").attributes["exception.message"]
    assert error.startswith("InternalServerError") and "upstream refused key ***" in error
    assert error == traced.records[f"traj-{FAILS:02d}"].error  # the stage's own record of the failure


def test_the_run_names_the_registered_prompt_versions_it_sent(traced: TracedRun) -> None:
    tags = traced.run.data.tags
    assert (tags[f"prompt.{ANALYSIS_PROMPT}"], tags[f"prompt.{RETRY_PROMPT}"]) == ("1", "1")
    assert {(p["name"], p["version"]) for p in json.loads(tags["mlflow.linkedPrompts"])} == \
        {(ANALYSIS_PROMPT, "1"), (RETRY_PROMPT, "1")}
    assert traced.client.get_prompt_version(ANALYSIS_PROMPT, 1).template == analysis_template()
    assert traced.client.get_prompt_version(RETRY_PROMPT, 1).template == retry_template()


def test_no_trace_span_or_byte_of_the_store_holds_the_api_key(traced: TracedRun) -> None:
    assert traced.server.chat_calls()[0].headers["authorization"] == f"Bearer {SECRET}"  # the key was used
    assert any(SECRET in c.prompt for c in traced.server.chat_calls())  # and trajectory 3's prompt held it
    dumps = {t.info.trace_id: t.to_json() for t in traced.traces}
    assert len(dumps) == N + 1 and [trace_id for trace_id, text in dumps.items() if SECRET in text] == []
    (echoed,), (in_prompt,) = traced.of(FAILS), traced.of(KEY_IN_PROMPT)
    assert "upstream refused key ***" in dumps[echoed.info.trace_id]  # the server's echo, scrubbed
    assert "(the server said: ***)" in in_prompt.data.spans[0].inputs["messages"][0]["content"]
    store = [traced.root / "mlflow.db", *(traced.root / "mlartifacts").rglob("*")]
    assert [str(p) for p in store if p.is_file() and SECRET.encode() in p.read_bytes()] == []  # spans, metadata


def test_without_an_mlflow_run_nothing_is_traced(tmp_path: Path, fault_server: Callable[..., Any],
                                                 openai_cfg: SeedConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'never.db'}")
    fault_server()
    write_collect(tmp_path / "collect", 2)
    metrics = run_annotate(openai_cfg, tmp_path / "collect", tmp_path / "annotate")
    assert metrics["annotate/ok"] == 2 and not (tmp_path / "never.db").exists()
