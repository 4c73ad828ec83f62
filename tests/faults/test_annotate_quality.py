"""Stage 1 fails loudly (issue 14): an endpoint that rejects every call, too few annotations, empty inputs;
unparsable answers are asked again on a rerun; another endpoint is another cache key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from seed_core.config import SeedConfig, dump_resolved
from seed_core.runtime.io import DataFileError, write_records
from seed_core.loader import with_overrides
from seed_core.stages.annotate import CACHE_FILE, AnnotationQualityError, main, run_annotate
from seed_core.types import StepRecord
from tests.faults import openai_server as fs
from tests.faults.helpers import marker, write_collect

Serve = Callable[..., fs.FaultServer]


@pytest.mark.parametrize(("reply", "reason"), [
    (fs.error(404, "The model `fake-model` does not exist or the path is wrong"), "NotFoundError x4"),
    (fs.error(401, "Incorrect API key provided"), "AuthenticationError x4"),  # /models accepted, chat refused
])
def test_an_endpoint_that_rejects_every_call_fails_the_stage_naming_the_cause(
    reply: fs.Reply, reason: str, tmp_path: Path, fault_server: Serve, openai_cfg: SeedConfig,
) -> None:
    server = fault_server(fs.always(reply))
    write_collect(tmp_path / "collect", 4)
    out = tmp_path / "annotate"
    with pytest.raises(AnnotationQualityError) as err:
        run_annotate(openai_cfg, tmp_path / "collect", out)
    text = str(err.value)
    assert text.startswith("only 0 of 4 trajectories were annotated (0%), below annotate.min_ok_fraction = 0.5")
    assert reason in text and f"the calls to the endpoint {server.base_url}" in text and "OPENAI_BASE_URL" in text
    assert not (out / "sft_examples.jsonl").exists() and not (out / "resolved_config.json").exists()
    assert json.loads((out / "metrics.json").read_text())["annotate/ok"] == 0  # the diagnosis is kept


def test_the_cli_exits_non_zero_with_one_line(tmp_path: Path, fault_server: Serve, openai_cfg: SeedConfig,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fault_server(fs.always(fs.error(404, "not found")))
    write_collect(tmp_path / "collect", 2)
    config = dump_resolved(openai_cfg, tmp_path / "cfg.json")
    monkeypatch.setattr("sys.argv", ["annotate", "--config", str(config), "--collect", str(tmp_path / "collect"),
                                     "--out", str(tmp_path / "annotate")])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert str(exit_info.value).startswith("seed annotate: only 0 of 2 trajectories were annotated")


def test_the_threshold_is_the_configured_fraction(tmp_path: Path, fault_server: Serve,
                                                  openai_cfg: SeedConfig) -> None:
    """3 of 4 trajectories get malformed answers: 25% passes at 0.25 and fails at 0.5 (naming the parser)."""
    fault_server(lambda call: fs.OK if marker(0) in call.prompt else fs.malformed_answer())
    write_collect(tmp_path / "collect", 4)
    metrics = run_annotate(with_overrides(openai_cfg, {"annotate.min_ok_fraction": 0.25}), tmp_path / "collect",
                           tmp_path / "a")
    assert metrics["annotate/ok"] == 1 and (tmp_path / "a" / "sft_examples.jsonl").is_file()
    with pytest.raises(AnnotationQualityError, match=r"only 1 of 4 .*no JSON object found in the analyzer answer x3.*did not parse"):
        run_annotate(openai_cfg, tmp_path / "collect", tmp_path / "b")


def test_an_empty_trajectories_file_is_an_error_before_any_call(tmp_path: Path, fault_server: Serve,
                                                                openai_cfg: SeedConfig) -> None:
    server = fault_server()
    write_collect(tmp_path / "collect", 2)
    write_records([], tmp_path / "collect" / "trajectories.parquet", StepRecord)
    with pytest.raises(DataFileError, match=r"trajectories.parquet has 0 rows: the collect stage produced no"):
        run_annotate(openai_cfg, tmp_path / "collect", tmp_path / "annotate")
    assert server.chat_calls() == []


def test_unparsable_answers_are_asked_again_once_the_endpoint_is_fixed(tmp_path: Path, fault_server: Serve,
                                                                       openai_cfg: SeedConfig) -> None:
    cfg = with_overrides(openai_cfg, {"annotate.min_ok_fraction": 0.0})
    server = fault_server(lambda call: fs.malformed_answer() if marker(1) in call.prompt else fs.OK)
    write_collect(tmp_path / "collect", 4)
    first = run_annotate(cfg, tmp_path / "collect", tmp_path / "annotate")
    assert (first["annotate/ok"], first["annotate/failed_unparsable"]) == (3, 1)
    cached = (tmp_path / "annotate" / CACHE_FILE).read_text()
    assert marker(1) not in cached and cached.count("\n") == 3
    server.plan = fs.always(fs.OK)
    before = len(server.chat_calls())
    again = run_annotate(cfg, tmp_path / "collect", tmp_path / "annotate")
    assert (again["annotate/sent"], again["annotate/ok"]) == (1, 4)
    assert [marker(1) in c.prompt for c in server.chat_calls()[before:]] == [True]


def test_the_cache_key_includes_the_endpoint(tmp_path: Path, fault_server: Serve, openai_cfg: SeedConfig) -> None:
    first = fault_server()
    write_collect(tmp_path / "collect", 3)
    assert run_annotate(openai_cfg, tmp_path / "collect", tmp_path / "annotate")["annotate/sent"] == 3
    assert run_annotate(openai_cfg, tmp_path / "collect", tmp_path / "annotate")["annotate/sent"] == 0
    second = fault_server()  # same model name, another server
    assert second.base_url != first.base_url
    assert run_annotate(openai_cfg, tmp_path / "collect", tmp_path / "annotate")["annotate/sent"] == 3
    assert len(second.chat_calls()) == 3


def test_the_prefect_task_does_not_retry_what_a_retry_cannot_fix() -> None:
    from prefect.states import Failed

    from seed_core.analyzer.clients import AnalyzerSetupError
    from tasks.annotate import worth_retrying

    assert not worth_retrying(None, None, Failed(data=AnnotationQualityError("only 0 of 4")))
    assert not worth_retrying(None, None, Failed(data=DataFileError("0 rows")))
    assert not worth_retrying(None, None, Failed(data=AnalyzerSetupError("no endpoint")))
    assert worth_retrying(None, None, Failed(data=ConnectionError("flaky")))


def test_the_first_n_identical_failures_stop_the_stage_before_the_rest_is_sent(
    tmp_path: Path, fault_server: Serve, openai_cfg: SeedConfig,
) -> None:
    server = fault_server(fs.always(fs.error(404, "The model `fake-model` does not exist")))
    write_collect(tmp_path / "collect", 20)
    out = tmp_path / "annotate"
    (out).mkdir()
    (out / "sft_examples.jsonl").write_text("stale\n")  # a previous run's output must not look current
    cfg = with_overrides(openai_cfg, {"annotate.fail_fast_after": 4, "annotate.concurrency": 1})
    with pytest.raises(AnnotationQualityError) as err:
        run_annotate(cfg, tmp_path / "collect", out)
    assert str(err.value).startswith(
        f"stopped early: the first 4 trajectories sent to the endpoint {server.base_url} (model 'fake-model') all "
        "failed the same way, NotFoundError (e.g. 'NotFoundError: Error code: 404")
    sent = len(server.chat_calls())  # 4 finished, at most one more already in flight on the one worker
    assert f"; {sent} requests were sent in all, for {sent} of the 20 trajectories (the other {20 - sent} were not " \
        "sent)" in str(err.value) and "annotate.fail_fast_after: 0" in str(err.value)
    assert sent <= 5 and not (out / "sft_examples.jsonl").exists()


@pytest.mark.parametrize("plan", [
    pytest.param(lambda call: fs.OK if marker(2) in call.prompt else fs.error(404, "nope"), id="one-succeeds"),
    pytest.param(lambda call: fs.error(401 if marker(1) in call.prompt else 404, "nope"), id="two-causes"),
])
def test_no_early_stop_unless_all_the_first_n_fail_the_same_way(plan, tmp_path: Path, fault_server: Serve,
                                                                 openai_cfg: SeedConfig) -> None:
    server = fault_server(plan)
    write_collect(tmp_path / "collect", 8)
    cfg = with_overrides(openai_cfg, {"annotate.fail_fast_after": 4, "annotate.concurrency": 1})
    with pytest.raises(AnnotationQualityError, match=r"^only [01] of 8 trajectories were annotated"):
        run_annotate(cfg, tmp_path / "collect", tmp_path / "annotate")
    assert len(server.chat_calls()) == 8  # every trajectory was tried; min_ok_fraction judged the result
