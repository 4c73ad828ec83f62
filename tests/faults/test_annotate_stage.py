"""Stage 1 (``run_annotate``) against the fault server: 20% injected faults, failures recorded and kept out
of distillation, resume from the cache, fail-fast setup errors, and no secret in any output."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Callable, Iterator

import pytest

from seed_core.analyzer.annotate import skills_by_traj
from seed_core.analyzer.clients import AnalyzerSetupError
from seed_core.config import ConfigError, SeedConfig, flatten
from seed_core.skills.contexts import TEACHER_CONTEXTS, Encoders, hindsight_skills
from seed_core.runtime.io import read_records
from seed_core.loader import with_overrides
from seed_core.stages.annotate import CACHE_FILE, run_annotate
from seed_core.trainer.samples import build_samples
from seed_core.types import AnnotationRecord
from tests.faults import openai_server as fs
from tests.faults.helpers import RecordingTracker, closed_port_url, marker, write_collect

N = 24
NO_ANSWER, UNPARSABLE = "traj-03", "traj-07"
"""Doomed trajectories: every call for the first fails with a 500, every answer for the second is malformed."""
Serve = Callable[..., fs.FaultServer]


def faulty_plan(rate: float = 0.2, seed: int = 1) -> fs.Plan:
    doomed_500 = fs.server_error(500, headers={"retry-after-ms": "1"})
    randomly = fs.random_faults(rate, seed, fs.default_faults(hang_s=1.0))

    def plan(call: fs.Call) -> fs.Reply:
        if marker(3) in call.prompt:
            return doomed_500
        if marker(7) in call.prompt:
            return fs.malformed_answer()
        return randomly(call)

    return plan


class FaultyRun:
    """One Stage-1 run on N trajectories with 20% random faults (shared by the tests of this module). What the run
    wrote is read here, right after it: a test of the module reruns the stage into the same directory, and the
    tests run in any order (pytest-randomly)."""

    def __init__(self, root: Path, server: fs.FaultServer, cfg: SeedConfig) -> None:
        self.collect, self.out, self.server, self.cfg = root / "collect", root / "annotate", server, cfg
        self.steps = write_collect(self.collect, N)
        self.tracker = RecordingTracker()
        self.metrics = run_annotate(cfg, self.collect, self.out, tracker=self.tracker)
        self.records = read_records(self.out / "annotations.parquet", AnnotationRecord)
        self.calls_after_run = len(server.chat_calls())
        self.saved_metrics = json.loads((self.out / "metrics.json").read_text())
        self.sft_lines = (self.out / "sft_examples.jsonl").read_text().splitlines()


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyRun]:
    cfg = with_overrides(SeedConfig(), {
        "annotate.client": "openai", "annotate.model": "fake-model", "annotate.timeout_s": 0.5,
        "annotate.max_retries": 3, "annotate.concurrency": 4, "annotate.parse_attempts": 2})
    with fs.FaultServer(faulty_plan()) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_BASE_URL", server.base_url)
        mp.setenv("OPENAI_API_KEY", "sk-test")
        yield FaultyRun(tmp_path_factory.mktemp("faulty"), server, cfg)


def test_every_trajectory_ends_annotated_or_failed_with_its_reason(faulty_run: FaultyRun) -> None:
    run, records = faulty_run, {r.traj_id: r for r in faulty_run.records}
    random_part = [c.kind for c in run.server.chat_calls()[:run.calls_after_run]
                   if marker(3) not in c.prompt and marker(7) not in c.prompt]
    faulted = [kind for kind in random_part if kind != "ok"]
    assert 0.15 <= len(faulted) / len(random_part) <= 0.3 and len(set(faulted)) >= 5  # the 20% plan really bit
    assert [r.traj_id for r in run.records] == [f"traj-{i:02d}" for i in range(N)]
    assert {tid for tid, r in records.items() if not r.ok} == {NO_ANSWER, UNPARSABLE}
    assert records[NO_ANSWER].error.startswith("InternalServerError") and records[NO_ANSWER].raw_output == ""
    assert records[UNPARSABLE].error.startswith("no JSON object found") and records[UNPARSABLE].attempts == 2
    assert all(r.error == "" and r.episode_skill.startswith("Skill ") for r in records.values() if r.ok)

    saved = run.saved_metrics
    expected = {"annotate/trajectories": N, "annotate/ok": N - 2, "annotate/failed": 2,
                "annotate/failed_no_answer": 1, "annotate/failed_unparsable": 1, "annotate/sent": N,
                "annotate/cached": 0, "sft_data/kept": N - 2, "sft_data/dropped": 2, "annotate/sft_examples": N - 2}
    assert {k: saved[k] for k in expected} == expected
    assert saved["failure_reasons"] == {"InternalServerError": 1, "no JSON object found in the analyzer answer": 1}
    logged = run.tracker.metrics()  # what MLflow receives
    assert {k: logged[k] for k in expected} == expected
    lines = run.sft_lines
    assert len(lines) == N - 2 and saved["sft_data/max_target_chars"] == max(len(json.loads(x)["target"])
                                                                               for x in lines)


def test_a_failed_trajectory_gets_no_distillation_signal(faulty_run: FaultyRun) -> None:
    skills = skills_by_traj(faulty_run.records)
    assert set(skills) == {f"traj-{i:02d}" for i in range(N)} - {NO_ANSWER, UNPARSABLE}
    fake = Encoders(chat=lambda text: [ord(c) % 251 for c in text[-32:]], template=lambda text: text,
                    raw=lambda text: [ord(c) % 251 for c in text[-32:]])
    samples = build_samples(faulty_run.steps, fake, 0.1, TEACHER_CONTEXTS.get("hindsight_after_task_line"),
                            hindsight_skills(faulty_run.records))
    by_traj: dict[str, list[bool]] = {}
    for step, teacher in zip(faulty_run.steps, samples.teacher_prompt_ids):
        by_traj.setdefault(step.traj_id, []).append(teacher is not None)
    assert by_traj[NO_ANSWER] == by_traj[UNPARSABLE] == [False, False]
    assert all(by_traj[tid] == [True, True] for tid in skills)
    assert samples.teacher_mask.sum().item() == 2 * (N - 2)


def test_a_rerun_resends_only_the_failed_trajectories(faulty_run: FaultyRun) -> None:
    run = faulty_run
    cached = [json.loads(line)["record"]["traj_id"] for line in (run.out / CACHE_FILE).read_text().splitlines()]
    assert sorted(cached) == sorted(f"traj-{i:02d}" for i in range(N) if f"traj-{i:02d}" not in (NO_ANSWER, UNPARSABLE))
    run.server.plan = fs.always(fs.OK)  # the endpoint recovered
    metrics = run_annotate(run.cfg, run.collect, run.out)
    resent = run.server.chat_calls()[run.calls_after_run:]
    assert len(resent) == 2 and {marker(3) in c.prompt for c in resent} == {marker(7) in c.prompt for c in resent} \
        == {True, False}  # one call each: the one that got no answer, the one whose answer did not parse
    assert (metrics["annotate/sent"], metrics["annotate/cached"], metrics["annotate/ok"]) == (2, N - 2, N)
    again = {r.traj_id: r for r in read_records(run.out / "annotations.parquet", AnnotationRecord)}
    assert again[NO_ANSWER].ok and again[UNPARSABLE].ok  # an unparsable answer is not final: asked again
    assert [again[r.traj_id] for r in run.records if r.traj_id not in (NO_ANSWER, UNPARSABLE)] == \
        [r for r in run.records if r.traj_id not in (NO_ANSWER, UNPARSABLE)]


# --- fail fast, before any work --------------------------------------------------------------------


def _assert_no_work(out: Path, server: fs.FaultServer | None = None) -> None:
    assert not out.exists() or not any(out.iterdir()), f"outputs were written: {list(out.iterdir())}"
    assert server is None or server.chat_calls() == []


@pytest.mark.parametrize(("setup", "says"), [
    ("no_endpoint", "set OPENAI_BASE_URL"),
    ("unreachable", "cannot reach the analyzer endpoint"),
    ("rejected_key", "set OPENAI_API_KEY to a valid key"),
])
def test_stage1_stops_before_any_work_when_the_endpoint_is_unusable(
    setup: str, says: str, tmp_path: Path, fault_server: Serve, openai_cfg: SeedConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_collect(tmp_path / "collect", 2)
    server = fault_server(api_key="sk-test-SECRET-xyz")
    if setup == "no_endpoint":
        monkeypatch.delenv("OPENAI_BASE_URL")
        monkeypatch.delenv("OPENAI_API_KEY")
    elif setup == "unreachable":
        monkeypatch.setenv("OPENAI_BASE_URL", closed_port_url())
    else:
        server.models = fs.error(401, "Incorrect API key provided: sk-test-SECRET-xyz")
    with pytest.raises(AnalyzerSetupError, match=says) as err:
        run_annotate(openai_cfg, tmp_path / "collect", tmp_path / "annotate")
    assert "SECRET" not in str(err.value)
    _assert_no_work(tmp_path / "annotate", server)


def test_the_cli_turns_setup_errors_into_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  openai_cfg: SeedConfig) -> None:
    from seed_core.stages.annotate import main
    from seed_core.config import dump_resolved

    write_collect(tmp_path / "collect", 2)
    config = dump_resolved(openai_cfg, tmp_path / "cfg.json")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr("sys.argv", ["annotate", "--config", str(config), "--collect", str(tmp_path / "collect"),
                                     "--out", str(tmp_path / "annotate")])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert str(exit_info.value).startswith("seed annotate: annotate.client = 'openai' needs an endpoint: set ")


def test_the_oracle_annotator_needs_no_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    write_collect(tmp_path / "collect", 4)
    metrics = run_annotate(SeedConfig(), tmp_path / "collect", tmp_path / "annotate")
    assert (metrics["annotate/ok"], metrics["annotate/sent"]) == (4, 4)


def test_a_stale_prompt_version_is_a_config_error(tmp_path: Path) -> None:
    write_collect(tmp_path / "collect", 2)
    with pytest.raises(ConfigError, match="set annotate.prompt_version: opid-v1"):
        run_annotate(with_overrides(SeedConfig(), {"annotate.prompt_version": "opid-v0"}), tmp_path / "collect",
                     tmp_path / "annotate")


# --- secrets ---------------------------------------------------------------------------------------

SECRET = "sk-test-SECRET-4f9c2e7d1a"


def test_the_api_key_reaches_no_output_record_log_or_error(
    tmp_path: Path, fault_server: Serve, openai_cfg: SeedConfig, caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The key is used (the server sees it) but echoed back in error bodies; none of it may leak."""
    echo = fs.server_error(500, headers={"retry-after-ms": "1"}, message=f"upstream refused key {SECRET}")
    rejected = fs.error(400, f"Incorrect API key provided: {SECRET}")
    server = fault_server(lambda call: echo if marker(0) in call.prompt else
                          rejected if marker(1) in call.prompt else fs.OK, api_key=SECRET)
    write_collect(tmp_path / "collect", 4)
    tracker = RecordingTracker()
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "annotate"
    metrics = run_annotate(openai_cfg, tmp_path / "collect", out, tracker=tracker)
    tracker.log_params(flatten(openai_cfg))
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        tracker.log_artifact(path)

    assert server.chat_calls()[0].headers["authorization"] == f"Bearer {SECRET}"
    assert metrics["annotate/failed"] == 2
    errors = [r.error for r in read_records(out / "annotations.parquet", AnnotationRecord) if not r.ok]
    assert len(errors) == 2 and all("***" in e for e in errors)
    captured = capfd.readouterr()
    files = {str(p.relative_to(out)): p.read_bytes().decode("latin-1") for p in out.rglob("*") if p.is_file()}
    assert {"annotations.parquet", "sft_examples.jsonl", "metrics.json", "resolved_config.json", CACHE_FILE} <= set(files)
    haystacks = {"tracker": repr(tracker.records), "logs": caplog.text, "stdout": captured.out,
                 "stderr": captured.err, "records": repr(read_records(out / "annotations.parquet", AnnotationRecord)),
                 **files}
    assert [name for name, text in haystacks.items() if SECRET in text] == []
