"""seed_core.tracking: the MLflow store location, secret redaction, DVC lineage tags, runs and the registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.common import dvc_lock_hashes
from seed_core import tracking
from seed_core.config import SeedConfig, project_root
from seed_core.loader import with_overrides
from seed_core.repro.numerics import mlflow_params as numerics_params
from seed_core.tracking import NullTracker, artifact_location, open_run, redact, tracking_uri


def test_default_store_is_an_absolute_sqlite_file_in_the_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri() == f"sqlite:///{project_root() / 'mlflow.db'}"
    assert tracking_uri().startswith("sqlite:////")  # four slashes: absolute, not cwd-relative (pitfall 12)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert tracking_uri() == "http://127.0.0.1:5000"


def test_artifacts_live_beside_a_sqlite_store() -> None:
    assert artifact_location("sqlite:////x/y/mlflow.db") == "file:///x/y/mlartifacts"
    assert artifact_location("http://127.0.0.1:5000") is None


def test_redact_hides_secret_values_and_stringifies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
    out = redact({"a": 1, "b": [1, 2], "url": "http://h?key=sk-test-123", "ok": "gpt-4o-mini"})
    assert out == {"a": "1", "b": "[1, 2]", "url": "***", "ok": "gpt-4o-mini"}


def test_dvc_lock_hashes_tag_inputs_recorded_as_upstream_outputs(tmp_path: Path) -> None:
    (tmp_path / "dvc.lock").write_text(
        "schema: '2.0'\nstages:\n  sft:\n    cmd: x\n    outs:\n    - path: data/sft/checkpoint\n"
        "      hash: md5\n      md5: abc.dir\n")
    tags = dvc_lock_hashes([tmp_path / "data/sft/checkpoint", tmp_path / "data/other"], root=tmp_path)
    assert tags == {"dvc.dep.data/sft/checkpoint": "abc.dir"}
    assert dvc_lock_hashes([tmp_path / "x"], root=tmp_path / "no-lock-here") == {}


def test_disabled_tracking_yields_a_null_tracker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'never.db'}")
    cfg = with_overrides(SeedConfig(), {"tracking.enabled": False})
    with open_run(cfg, "stage") as tracker:
        assert isinstance(tracker, NullTracker)
    assert not (tmp_path / "never.db").exists()


def test_runs_params_metrics_status_and_registered_checkpoint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    cfg = with_overrides(SeedConfig(), {"annotate.model": "sk-secret-model", "tracking.experiment": "unit"})
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    with open_run(cfg, "parent") as parent:
        with open_run(cfg, "sft", parent_run_id=parent.run_id, prefix="sft", tags={"stage": "sft"}) as child:
            child.log_metrics({"loss": 2.0}, step=0)
            child.log_metrics({"loss": 1.0, "rl/x": 3.0, "skipped": True}, step=1)
            version = child.register_checkpoint(ckpt, "seed-unit", flavor="files")
    with pytest.raises(RuntimeError), open_run(cfg, "broken"):
        raise RuntimeError("stage failed")

    client = mlflow.MlflowClient(uri)
    run = client.get_run(child.run_id)
    assert run.data.tags["mlflow.parentRunId"] == parent.run_id
    assert run.data.params["rl.opd_coef"] == str(cfg.rl.opd_coef)
    assert run.data.params["annotate.model"] == "***"  # contains the API key's value
    assert run.data.params["numerics.MKL_CBWR"] == numerics_params()["numerics.MKL_CBWR"]  # what the run ran under
    assert {"numerics.ATEN_CPU_CAPABILITY", "numerics.cpu_model", "numerics.cpu_capability"} <= set(run.data.params)
    assert [m.value for m in client.get_metric_history(child.run_id, "sft/loss")] == [2.0, 1.0]
    assert "rl/x" in run.data.metrics and "sft/skipped" not in run.data.metrics
    assert run.info.status == "FINISHED"
    broken = client.search_runs([run.info.experiment_id], "attributes.run_name = 'broken'")[0]
    assert broken.info.status == "FAILED"
    assert version == "1"
    local = mlflow.artifacts.download_artifacts("models:/seed-unit/1", dst_path=str(tmp_path / "dl"), tracking_uri=uri)
    assert (Path(local) / "config.json").is_file()
    tracking._client.cache_clear()


@pytest.fixture(scope="module")
def store_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One sqlite store for the tests below (creating one costs seconds); each uses its own experiment."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def store(store_uri: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri)
    yield store_uri
    tracking._client.cache_clear()


def test_stage_runs_get_system_metrics_even_when_shorter_than_the_interval(store: str) -> None:
    import mlflow

    cfg = with_overrides(SeedConfig(), {"tracking.experiment": "sysmetrics"})
    with open_run(cfg, "stage", log_config=False, system_metrics=True) as stage:
        pass
    with open_run(cfg, "round", log_config=False) as plain:
        pass
    client = mlflow.MlflowClient(store)
    metrics = client.get_run(stage.run_id).data.metrics
    assert {"system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"} <= set(metrics)
    assert 0 < metrics["system/system_memory_usage_megabytes"]
    assert not any(k.startswith("system/") for k in client.get_run(plain.run_id).data.metrics)


def test_dvc_inputs_become_mlflow_datasets_with_the_dvc_md5(store: str, tmp_path: Path) -> None:
    import mlflow

    cfg = with_overrides(SeedConfig(), {"tracking.experiment": "inputs"})
    md5s = {"data/sft/checkpoint": "0123456789abcdef0123456789abcdef.dir", "data/collect/x.parquet": "f" * 32}
    with open_run(cfg, "a", log_config=False) as first:
        first.log_data_inputs(md5s, root=tmp_path)
    with open_run(cfg, "b", log_config=False) as second:
        second.log_data_inputs({"data/collect/x.parquet": "f" * 32}, root=tmp_path)
    client = mlflow.MlflowClient(store)
    inputs = client.get_run(first.run_id).inputs.dataset_inputs
    got = {d.dataset.name: (d.dataset.digest, {t.key: t.value for t in d.tags}) for d in inputs}
    assert got == {rel: (md5, {"mlflow.data.context": "input", "dvc.md5": md5}) for rel, md5 in md5s.items()}
    assert all(d.dataset.source_type == "local" for d in inputs)
    assert any(str(tmp_path / "data/collect/x.parquet") in d.dataset.source for d in inputs)
    shared = client.get_run(second.run_id).inputs.dataset_inputs[0].dataset
    assert (shared.name, shared.digest) == ("data/collect/x.parquet", "f" * 32)


def test_registered_checkpoints_get_tags_newest_and_best_aliases(store: str, tmp_path: Path) -> None:
    import mlflow

    cfg = with_overrides(SeedConfig(), {"tracking.experiment": "registry"})
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    tags = {"algorithm": "seed", "env": "sokoban", "seed": 3}
    name = "seed-sokoban-seed"

    def train_and_eval(success: float, md5: str) -> tuple[str, str | None]:
        with open_run(cfg, "rl", log_config=False) as rl:
            version = rl.register_checkpoint(ckpt, name, tags, flavor="files")
        with open_run(cfg, "eval", log_config=False) as ev:
            return version, ev.record_evaluation(name, {"eval/success_rate": success}, md5)

    client = mlflow.MlflowClient(store)
    assert train_and_eval(0.5, "a" * 32) == ("1", "1")
    assert train_and_eval(0.25, "b" * 32) == ("2", "2")  # worse: best stays on version 1
    assert str(client.get_model_version_by_alias(name, "newest").version) == "2"
    assert str(client.get_model_version_by_alias(name, "best-success_rate").version) == "1"
    assert train_and_eval(0.75, "c" * 32) == ("3", "3")
    assert str(client.get_model_version_by_alias(name, "best-success_rate").version) == "3"
    v3 = client.get_model_version(name, "3")
    assert {k: v3.tags[k] for k in ("algorithm", "env", "seed", "eval/success_rate", "dvc.md5")} == {
        "algorithm": "seed", "env": "sokoban", "seed": "3", "eval/success_rate": "0.75", "dvc.md5": "c" * 32}
    assert client.get_registered_model(name).tags["algorithm"] == "seed"
    # an evaluation of another checkpoint (its RL stage restored from DVC's cache) does not touch newest
    with open_run(cfg, "eval", log_config=False) as ev:
        assert ev.record_evaluation(name, {"eval/success_rate": 1.0}, "a" * 32) is None
        assert ev.record_evaluation("seed-sokoban-unknown", {"eval/success_rate": 1.0}, None) is None
    assert str(client.get_model_version_by_alias(name, "best-success_rate").version) == "3"
    local = mlflow.artifacts.download_artifacts(f"models:/{name}@newest", dst_path=str(tmp_path / "dl"),
                                                tracking_uri=store)
    assert (Path(local) / "config.json").is_file()


def test_a_registered_checkpoint_loads_with_the_transformers_flavor(store: str, tiny_model_dir: Path) -> None:
    """``mlflow.transformers.load_model`` on the registry alias gives a text-generation pipeline whose model
    is the checkpoint's (same weights), and ``model/`` inside it is a plain HF dir."""
    import mlflow
    import mlflow.transformers
    import torch
    from transformers import AutoModelForCausalLM

    cfg = with_overrides(SeedConfig(), {"tracking.experiment": "flavor"})
    with open_run(cfg, "sft", log_config=False) as sft:
        version = sft.register_checkpoint(tiny_model_dir, "seed-flavor-test", {"algorithm": "sft"})
    pipe = mlflow.transformers.load_model("models:/seed-flavor-test@newest")
    assert type(pipe).__name__ == "TextGenerationPipeline"
    original = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    loaded = pipe.model.state_dict()
    assert original.keys() == loaded.keys() and all(torch.equal(original[k], loaded[k]) for k in original)
    assert pipe("hello", max_new_tokens=2, do_sample=False)[0]["generated_text"].startswith("hello")
    local = Path(mlflow.artifacts.download_artifacts(f"models:/seed-flavor-test/{version}", tracking_uri=store))
    assert (local / "MLmodel").is_file() and (local / "model" / "config.json").is_file()
    with pytest.raises(ValueError, match="model flavor 'onnx'"), open_run(cfg, "x", log_config=False) as other:
        other.register_checkpoint(tiny_model_dir, "seed-flavor-test", flavor="onnx")


def test_a_registered_checkpoint_shares_its_bytes_with_the_run_artifacts(store: str, tmp_path: Path) -> None:
    """No copy: the artifact files are hard links to the checkpoint's files, and they keep the registered
    content when the workspace output is replaced (DVC unlinks outputs and writes new files)."""
    import mlflow

    cfg = with_overrides(SeedConfig(), {"tracking.experiment": "unit-linked"})
    ckpt = tmp_path / "ckpt"
    (ckpt / "sub").mkdir(parents=True)
    (ckpt / "model.safetensors").write_bytes(b"weights-v1")
    (ckpt / "sub" / "tokenizer.json").write_text("{}")
    with open_run(cfg, "sft") as run:
        version = run.register_checkpoint(ckpt, "seed-linked", flavor="files")
    artifacts = Path(mlflow.artifacts.download_artifacts(f"runs:/{run.run_id}/checkpoint", tracking_uri=store))
    stored = Path(mlflow.MlflowClient(store).get_run(run.run_id).info.artifact_uri.removeprefix("file://"))
    linked = stored / "checkpoint" / "model.safetensors"
    assert linked.stat().st_ino == (ckpt / "model.safetensors").stat().st_ino  # the same bytes, not a copy
    assert (stored / "checkpoint" / "sub" / "tokenizer.json").is_file() and (artifacts / "sub").is_dir()
    (ckpt / "model.safetensors").unlink()  # a rerun of the stage replaces the output
    (ckpt / "model.safetensors").write_bytes(b"weights-v2")
    got = mlflow.artifacts.download_artifacts(f"models:/seed-linked/{version}", dst_path=str(tmp_path / "dl"),
                                              tracking_uri=store)
    assert (Path(got) / "model.safetensors").read_bytes() == b"weights-v1"


def test_linking_falls_back_to_a_copy_off_a_local_store(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "a.bin").write_bytes(b"x")
    assert not tracking.link_artifacts(ckpt, "s3://bucket/run/artifacts", "checkpoint")
    (tmp_path / "store").write_text("a file where the artifact directory should go")
    assert not tracking.link_artifacts(ckpt, (tmp_path / "store").as_uri(), "checkpoint")  # the link fails
    assert tracking.link_artifacts(ckpt, (tmp_path / "ok").as_uri(), "checkpoint")
    assert (tmp_path / "ok" / "checkpoint" / "a.bin").stat().st_nlink == 2


@pytest.mark.parametrize("name", ["SEED_UI_PASSWORD", "PREFECT_API_AUTH_STRING", "MLFLOW_TRACKING_PASSWORD"])
def test_redact_hides_the_ui_password_in_each_of_its_variables(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``seed ui --auth``'s password reaches the clients through these variables: none may reach MLflow params."""
    monkeypatch.setenv(name, "seed:pw-1234567890ab")
    assert redact({"auth": "seed:pw-1234567890ab", "ok": 3}) == {"auth": "***", "ok": "3"}
