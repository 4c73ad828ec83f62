"""What MLflow 3 shows a training user (issue 41), on a real sqlite store: the experiment typed as model training,
the analysis prompts versioned in the prompt registry and named by each run that sends them, and each analyzing RL
round's sample of skills as a table. (The traces of Stage 1's calls: tests/faults/test_annotate_traces.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from seed_core import tracking
from seed_core.analyzer.annotate import trajectory_to_steps
from seed_core.analyzer.prompts import (ANALYSIS_PROMPT, RETRY_PROMPT, STEP_ANALYSIS_PROMPT, analysis_template,
                                        build_analysis_prompt, build_retry_prompt, registry_prompts, registry_tags,
                                        render, skill_guidance)
from seed_core.config import SeedConfig
from seed_core.runtime.io import read_records, write_records
from seed_core.loader import with_overrides
from seed_core.tracing import use_prompts
from seed_core.tracking import EXPERIMENT_KIND, TRAINING_KIND, open_run
from seed_core.types import AnnotationRecord
from tests.faults.helpers import make_collect, write_collect


@pytest.fixture(scope="module")
def store_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def client(store_uri: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri)
    yield mlflow.MlflowClient(store_uri)
    tracking._client.cache_clear()


def test_the_experiment_is_typed_model_training_so_the_ui_opens_on_its_runs(client: Any) -> None:
    with open_run(with_overrides(SeedConfig(), {"tracking.experiment": "kind-new"}), "r", log_config=False):
        pass
    assert TRAINING_KIND == "custom_model_development"
    assert client.get_experiment_by_name("kind-new").tags[EXPERIMENT_KIND] == TRAINING_KIND
    client.create_experiment("kind-old")  # a store from before: the next run types it
    client.set_experiment_tag(client.create_experiment("kind-chosen"), EXPERIMENT_KIND, "genai_development")
    for name in ("kind-old", "kind-chosen"):
        with open_run(with_overrides(SeedConfig(), {"tracking.experiment": name}), "r", log_config=False):
            pass
    assert client.get_experiment_by_name("kind-old").tags[EXPERIMENT_KIND] == TRAINING_KIND
    assert client.get_experiment_by_name("kind-chosen").tags[EXPERIMENT_KIND] == "genai_development"  # a user's choice


def test_prompts_are_registered_with_versions_and_each_run_names_the_version_it_used(client: Any) -> None:
    cfg = with_overrides(SeedConfig(), {"tracking.experiment": "prompts"})
    names = {}
    for run_name, prompts, tags in [
        ("first", registry_prompts(), registry_tags()),
        ("same", registry_prompts(), registry_tags()),  # unchanged: the same versions
        ("edited", {ANALYSIS_PROMPT: analysis_template() + "\nBe brief."}, registry_tags()),  # new wording
        ("guidance", registry_prompts(retry=False), {**registry_tags(), "skill_guidance.success": "Say why."}),
        ("steps", registry_prompts(step_skills=True, retry=False), registry_tags()),
    ]:
        with open_run(cfg, run_name, log_config=False) as run:
            used = use_prompts(run, prompts, tags)
        tags_of_run = client.get_run(run.run_id).data.tags
        assert {k.removeprefix("prompt."): v for k, v in tags_of_run.items() if k.startswith("prompt.")} == used
        names[run_name] = (run.run_id, used)
    assert names["first"][1] == names["same"][1] == {ANALYSIS_PROMPT: "1", RETRY_PROMPT: "1"}
    assert names["edited"][1] == {ANALYSIS_PROMPT: "2"} and names["guidance"][1] == {ANALYSIS_PROMPT: "3"}
    assert names["steps"][1] == {STEP_ANALYSIS_PROMPT: "1"}
    assert [v.version for v in client.search_prompt_versions(ANALYSIS_PROMPT)] == [3, 2, 1]
    linked = json.loads(client.get_run(names["first"][0]).data.tags["mlflow.linkedPrompts"])
    assert {(p["name"], p["version"]) for p in linked} == {(ANALYSIS_PROMPT, "1"), (RETRY_PROMPT, "1")}
    v1 = client.get_prompt_version(ANALYSIS_PROMPT, 1)
    assert v1.tags["prompt_version"] == "opid-v1" and v1.tags["skill_guidance.failure"] == skill_guidance(False)

    # the registered version is the wording sent: rendered (ours, or MLflow's own format) it is the prompt built
    tasks, records = make_collect(2)
    task_line, steps, success = trajectory_to_steps([r for r in records if r.traj_id == "traj-00"])
    values = dict(task_description=task_line or "push the box", skill_guidance=skill_guidance(success),
                  episode_success="success" if success else "failure", candidate_steps=", ".join(
                      str(s.index) for s in steps), trajectory="\n".join(
                      f"Step {s.index}\nObservation: {s.observation}\nResponse: {s.response}\n"
                      f"Return: {s.discounted_return:.6f}\n" for s in steps))
    sent = build_analysis_prompt(values["task_description"], steps, success)
    assert render(v1.template, **values).rstrip("\n") + "\n" == sent
    assert v1.format(**values).rstrip("\n") + "\n" == sent
    retry = client.get_prompt_version(RETRY_PROMPT, 1)
    assert render(retry.template, original_prompt=sent.rstrip("\n"), error="no JSON", previous_output_tail="x") \
        == build_retry_prompt(sent, "no JSON", "x")


def test_each_analyzing_round_logs_a_sample_of_its_skills_as_a_table(client: Any, tmp_path: Path) -> None:
    """A round's annotations (the oracle's, one made unparsable) -> ``analyzer_skills.json`` on the round's run: the
    skill text, parsed or not (and why), judged correct or not by Sokoban's judge."""
    from seed_core.stages.annotate import run_annotate
    from tasks.rl import SKILL_SAMPLE_ROWS, log_skill_sample

    cfg = with_overrides(SeedConfig(), {"tracking.experiment": "skills", "rl.algorithm": "seed"})
    write_collect(tmp_path / "collect", 6)
    run_annotate(cfg, tmp_path / "collect", tmp_path / "annotate")
    round_dir = tmp_path / "rl" / "round_000"
    round_dir.mkdir(parents=True)
    for name in ("trajectories.parquet", "tasks.json"):
        shutil.copy(tmp_path / "collect" / name, round_dir / name)
    notes = read_records(tmp_path / "annotate" / "annotations.parquet", AnnotationRecord)
    notes[1] = AnnotationRecord(**{**notes[1].__dict__, "parse_status": "failed", "episode_skill": "",
                                   "error": "no JSON object found in the analyzer answer"})
    from seed_core.envs import make_env
    from seed_core.envs.sokoban import solve
    from seed_core.data_gen.task_sets import read_tasks

    task = read_tasks(round_dir / "tasks.json")[next(r.task_id for r in make_collect(6)[1] if r.traj_id == "traj-02")]
    plan = ", ".join(solve(make_env(cfg.env).level(task)))  # a correct plan, stated: the judge accepts it
    notes[2] = AnnotationRecord(**{**notes[2].__dict__, "episode_skill": f"Workflow: play {plan}."})
    write_records(notes, round_dir / "annotations.parquet", AnnotationRecord)

    with open_run(cfg, "rl-seed-round-000", log_config=False) as run:
        assert log_skill_sample(cfg, round_dir, run) == 6 <= SKILL_SAMPLE_ROWS
        assert log_skill_sample(cfg, tmp_path / "rl" / "no-round", run) == 0  # no analyzer: no table
    table = client.load_table(client.get_run(run.run_id).info.experiment_id, "analyzer_skills.json",
                              run_ids=[run.run_id])
    rows = {row["traj_id"]: row for row in table.to_dict("records")}
    assert [rows[f"traj-0{i}"]["skill"] for i in range(6)] == [n.episode_skill for n in notes]
    assert [rows[f"traj-0{i}"]["parsed"] for i in range(6)] == [True, False, True, True, True, True]
    assert rows["traj-01"]["failure"] == "invalid_json" and rows["traj-01"]["correct"] is False
    assert [rows[f"traj-0{i}"]["correct"] for i in range(6)] == [False, False, True, False, False, False]
    assert (rows["traj-00"]["episode_success"], rows["traj-01"]["episode_success"]) == (True, False)
