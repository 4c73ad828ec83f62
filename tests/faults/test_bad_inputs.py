"""Corrupted or truncated stage inputs stop with an error that names the file, before any work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest

from seed_core.config import ModelConfig, SeedConfig
from seed_core.runtime.io import DataFileError
from seed_core.loader import with_overrides
from seed_core.modeling.models import CorruptModelError, load_policy
from seed_core.stages.annotate import run_annotate
from tests.faults import openai_server as fs
from tests.faults.helpers import write_collect


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _garble(path: Path) -> None:
    path.write_bytes(b"PAR1 this is not what it seems" * 10)


def _drop_a_task(path: Path) -> None:
    path.write_text(json.dumps(json.loads(path.read_text())[1:]))


@pytest.mark.parametrize(("name", "damage", "says"), [
    ("trajectories.parquet", _truncate, "is not a readable parquet file"),
    ("trajectories.parquet", _garble, "is not a readable parquet file"),
    ("tasks.json", _truncate, "is not valid JSON"),
    ("tasks.json", _drop_a_task, "lacks 1 task(s) that trajectories.parquet refers to"),
])
def test_damaged_collect_outputs_name_the_file_and_send_nothing(
    name: str, damage: Callable[[Path], None], says: str, tmp_path: Path,
    fault_server: Callable[..., fs.FaultServer], openai_cfg: SeedConfig,
) -> None:
    server = fault_server()
    write_collect(tmp_path / "collect", 4)
    damage(tmp_path / "collect" / name)
    with pytest.raises(DataFileError) as err:
        run_annotate(openai_cfg, tmp_path / "collect", tmp_path / "annotate")
    assert str(tmp_path / "collect" / name) in str(err.value) and says in str(err.value)
    assert server.chat_calls() == [] and not (tmp_path / "annotate").exists()


def test_a_truncated_checkpoint_names_the_weights_file(tiny_model_dir: Path, tmp_path: Path) -> None:
    broken = Path(shutil.copytree(tiny_model_dir, tmp_path / "ckpt"))
    _truncate(broken / "model.safetensors", keep=0.9)
    with pytest.raises(CorruptModelError) as err:
        load_policy(ModelConfig(path=str(broken), device="cpu"))
    message = str(err.value)
    assert message.startswith(f"{broken / 'model.safetensors'} is truncated: ")
    assert "rerun the stage that wrote it" in message
    _garble(broken / "model.safetensors")
    with pytest.raises(CorruptModelError, match="model.safetensors is not a readable safetensors file"):
        load_policy(ModelConfig(path=str(broken), device="cpu"))


def test_a_truncated_resume_checkpoint_stops_the_rl_round(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A finished round whose checkpoint was damaged afterwards: the next round names the file."""
    from seed_core.stages.rl import run_rl_round
    from seed_core.lineage.resume import RESUME_FILE, rl_fingerprint

    done = tmp_path / "rl" / "round_000"
    shutil.copytree(tiny_model_dir, done / "checkpoint")
    (done / "DONE").write_text("ok\n")
    _truncate(done / "checkpoint" / "model.safetensors")
    cfg = with_overrides(SeedConfig(), {"model.path": str(tiny_model_dir), "model.device": "cpu"})
    (tmp_path / "rl" / RESUME_FILE).write_text(rl_fingerprint(cfg, tiny_model_dir))  # made from this config
    with pytest.raises(CorruptModelError, match=str(done / "checkpoint" / "model.safetensors")):
        run_rl_round(cfg, 1, tiny_model_dir, tmp_path / "rl")
    assert not (tmp_path / "rl" / "round_001").exists()
