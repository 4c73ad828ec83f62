"""The served deployment (`seed serve`'s seed-pipeline/ui) runs nothing for a request that could name a program, a
path outside the project or a host (issue 26 item 4): the flow refuses it in one line before run_pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from seed_app import dvc_run
from seed_core.config import project_root


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """What reached ``run_pipeline`` (the first thing that writes params.yaml, takes the workspace or starts a
    server): the flow's calls are recorded instead of run."""
    calls: list[tuple[Any, ...]] = []

    def record(preset: Path | None, overrides: dict[str, Any], name: str | None, **kwargs: Any) -> dvc_run.PipelineRun:
        calls.append((preset, overrides, name))
        return dvc_run.PipelineRun({"ok": 1.0})

    monkeypatch.setattr(dvc_run, "run_pipeline", record)
    return calls


@pytest.mark.parametrize(("preset", "overrides", "named"), [
    ("params.yaml", {"generation.vllm.python": "/tmp/evil.sh"}, "'generation.vllm.python' is not served"),
    ("params.yaml", {"rl.lr": 1e-4, "model.path": "/etc"}, "'model.path' is not served"),
    ("params.yaml", {"rl.static_skills_dir": "/home"}, "'rl.static_skills_dir' holds free text"),
    ("params.yaml", {"env.search_qa.retriever_url": "http://evil:1"}, "'env.search_qa.retriever_url' holds free text"),
    ("params.yaml", {"project.accelerate_config": "x.yaml"}, "'project.accelerate_config' is not served"),
    ("params.yaml", {"rl.no_such_key": 1}, "'rl.no_such_key' is not a params.yaml key"),
    ("/etc/passwd", {}, "preset '/etc/passwd' is not a params file under"),
    ("presets/../../outside.yaml", {}, "preset 'presets/../../outside.yaml' is not a params file under"),
    ("dvc.yaml", {}, "preset 'dvc.yaml' is not a params file under"),
])
def test_a_request_that_could_name_a_program_a_path_or_a_host_is_refused_before_anything_runs(
        started: list[tuple[Any, ...]], preset: str, overrides: dict[str, Any], named: str) -> None:
    params = (project_root() / "params.yaml").read_bytes()
    with pytest.raises(dvc_run.ServedRequestError) as err:
        dvc_run.seed_pipeline(preset=preset, overrides=overrides)  # a real flow run on the session's test server
    message = str(err.value)
    assert "\n" not in message and named in message, message
    assert "a served run may set project.seed, rl.*" in message or "presets" in message
    assert started == [] and (project_root() / "params.yaml").read_bytes() == params


def test_a_preset_symlinked_out_of_presets_is_refused(tmp_path: Path, started: list[tuple[Any, ...]]) -> None:
    link = project_root() / "presets" / "zz-test-link.yaml"
    (tmp_path / "outside.yaml").write_text("model: {path: /tmp/evil}\n")
    link.symlink_to(tmp_path / "outside.yaml")
    try:
        with pytest.raises(dvc_run.ServedRequestError, match="zz-test-link.yaml' is not a params file under"):
            dvc_run.check_served_request("presets/zz-test-link.yaml", {}, "")
    finally:
        link.unlink()
    assert started == []


def test_numbers_and_choices_of_the_allowed_sections_and_project_presets_are_served(
        started: list[tuple[Any, ...]]) -> None:
    overrides = {"rl.opd_coef": 0.02, "rl.algorithm": "grpo", "sft.epochs": 1, "eval.with_skills": True,
                 "env.ezpoints.prompt": "paper", "env.sokoban.dim_room": [5, 5], "generation.temperature": 0.7,
                 "project.seed": 3, "collect.num_tasks": 4}
    assert dvc_run.seed_pipeline.fn(preset="presets/smollm2-sokoban.yaml", overrides=overrides,
                                    experiment_name="opd-0.02") == {"ok": 1.0}
    assert started == [(project_root() / "presets" / "smollm2-sokoban.yaml", overrides, "opd-0.02")]
    assert dvc_run.seed_pipeline.fn() == {"ok": 1.0} and started[-1] == (None, {}, None)
    with pytest.raises(dvc_run.ServedRequestError, match="experiment_name '-n x' is not a plain name"):
        dvc_run.seed_pipeline.fn(experiment_name="-n x")


def test_every_served_key_is_a_number_a_boolean_or_a_choice() -> None:
    """The table's rule, over the whole schema: no served key takes free text."""
    from seed_core.config import SeedConfig, flatten

    served = []
    for key in flatten(SeedConfig()):
        try:
            dvc_run.check_served_request("params.yaml", {key: None}, "")
        except dvc_run.ServedRequestError:
            continue
        served.append(key)
    assert "rl.lr" in served and "env.name" in served and "generation.top_p" in served
    for key in served:
        assert not key.startswith(("generation.vllm.", "model.", "annotate.", "tracking.")), key
        assert not key.endswith(("_dir", "_url", "python", "checkpoint", "path", "splits")), key


@pytest.mark.parametrize(("overrides", "named"), [
    ({"rl.rounds": 10**9}, "rl.rounds = 1000000000: Input should be less than or equal to 10000"),
    ({"rl.lr": 2e5}, "rl.lr = 200000.0: Input should be less than or equal to 1"),
    ({"rl.lr": "1" * 200_000}, "override 'rl.lr' has a value 200,002 characters long (at most 1,000)"),
    ({"collect.group_size": 0}, "collect.group_size = 0: Input should be greater than or equal to 1"),
])
def test_a_served_number_a_run_could_not_finish_with_is_refused_before_anything_runs(
        started: list[tuple[Any, ...]], overrides: dict[str, Any], named: str) -> None:
    """Issue 43: the served deployment took ``rl.rounds`` 10^9 and an ``rl.lr`` of 200,000 digits (inf, then an
    argument list too long for ``dvc exp run``), so one request held the only served slot."""
    params = (project_root() / "params.yaml").read_bytes()
    with pytest.raises(dvc_run.ServedRequestError) as err:
        dvc_run.seed_pipeline(overrides=overrides)  # a real flow run on the session's test server
    message = str(err.value)
    assert "\n" not in message and message.startswith("seed-pipeline/ui: ") and named in message, message
    assert started == [] and (project_root() / "params.yaml").read_bytes() == params
