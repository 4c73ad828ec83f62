"""RL writes checkpoints only where they are read (issue 14/15): resume points every ``rl.save_every`` rounds
and the last round; other rounds hand the model on in memory, with the same result as going through disk; a
restart redoes the finished rounds after the newest resume point."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from seed_core.stages.rl import RoundCarry, is_resume_point, round_dir, run_rl, run_rl_round
from seed_core.stages import rl as scale  # the rl stage's save_policy (bound where it is called)
from seed_core.loader import with_overrides
from tests.faults.test_rl_resume import tiny_rl_config


@pytest.fixture(autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_resume_points_are_every_nth_round_and_the_last(tiny_model_dir: Path) -> None:
    cfg = with_overrides(tiny_rl_config(tiny_model_dir, rounds=5), {"rl.save_every": 2})
    assert [i for i in range(5) if is_resume_point(cfg, i)] == [1, 3, 4]
    assert [i for i in range(5) if is_resume_point(with_overrides(cfg, {"rl.save_every": 0}), i)] == [4]


def test_only_resume_points_write_checkpoints_and_only_the_newest_is_kept(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    written: list[tuple[str, bool]] = []
    real = scale.save_policy

    def recording(accelerator, model, tokenizer, out_dir, optimizer=None, **kw):
        written.append((Path(out_dir).parent.name, optimizer is not None))
        return real(accelerator, model, tokenizer, out_dir, optimizer, **kw)

    monkeypatch.setattr(scale, "save_policy", recording)
    cfg = with_overrides(tiny_rl_config(tiny_model_dir, rounds=3), {"rl.save_every": 2})
    run_rl(cfg, tiny_model_dir, tmp_path / "rl")
    assert written == [(".round_001.tmp", True), (".round_002.tmp", True)]  # round 0: nothing written
    kept = sorted(p.relative_to(tmp_path / "rl").as_posix() for p in (tmp_path / "rl").glob("round_*/*")
                  if p.is_dir())
    assert kept == ["round_002/checkpoint"]  # round 1's resume point went once round 2's existed
    assert (round_dir(tmp_path / "rl", 2) / "checkpoint" / "optimizer.pt").is_file()


def test_handing_the_model_on_in_memory_gives_the_same_weights_as_going_through_disk(
    tiny_model_dir: Path, tmp_path: Path,
) -> None:
    cfg = tiny_rl_config(tiny_model_dir, rounds=2)
    run_rl(cfg, tiny_model_dir, tmp_path / "memory")  # round 0 -> round 1 in memory (save_every 10)
    for i in range(2):  # each round on its own: a resume point on disk, reloaded by the next
        run_rl_round(cfg, i, tiny_model_dir, tmp_path / "disk")
    got = load_file(tmp_path / "memory" / "checkpoint" / "model.safetensors")
    ref = load_file(round_dir(tmp_path / "disk", 1) / "checkpoint" / "model.safetensors")
    assert got.keys() == ref.keys() and any(not torch.equal(got[k], load_file(
        tiny_model_dir / "model.safetensors")[k]) for k in got)
    for name, tensor in ref.items():
        torch.testing.assert_close(got[name], tensor, atol=1e-6, rtol=1e-5, msg=name)


def test_a_restart_redoes_the_rounds_after_the_newest_resume_point(tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = tiny_rl_config(tiny_model_dir, rounds=2)
    out = tmp_path / "rl"
    run_rl_round(cfg, 0, tiny_model_dir, out, carry=RoundCarry())  # then the process dies
    assert (round_dir(out, 0) / "DONE").is_file() and not (round_dir(out, 0) / "checkpoint").exists()
    with pytest.raises(RuntimeError, match=r"round_000 finished without a checkpoint \(not a resume point: "
                                           r"rl.save_every = 10\); run the rounds with `python -m seed_core.stages.rl`"):
        run_rl_round(cfg, 1, tiny_model_dir, out)  # `--round 1` cannot continue from memory it does not have
    stamp = (round_dir(out, 0) / "DONE").stat().st_mtime_ns
    assert run_rl(cfg, tiny_model_dir, out)["algorithm_rounds"] == 2.0
    assert (round_dir(out, 0) / "DONE").stat().st_mtime_ns != stamp  # redone: its end state was never written
    assert (out / "checkpoint" / "model.safetensors").is_file()


def test_the_flow_task_hands_rounds_on_in_memory_and_finalize_frees_the_model(tiny_model_dir: Path,
                                                                              tmp_path: Path) -> None:
    """tasks.rl.rl_round (one Prefect task per round; ``.fn`` runs it without orchestration) keeps one carry
    per output directory and fingerprint, so the pipeline writes no per-round checkpoints either."""
    from seed_core.lineage.resume import rl_fingerprint
    from seed_core.tracking import NullTracker
    from tasks import rl as rl_tasks

    cfg, out = tiny_rl_config(tiny_model_dir, rounds=2), tmp_path / "rl"
    key = rl_fingerprint(cfg, tiny_model_dir)
    for i in range(2):
        rl_tasks.rl_round.fn(cfg, i, tiny_model_dir, out, NullTracker(), key)
    assert not (round_dir(out, 0) / "checkpoint").exists() and (round_dir(out, 1) / "checkpoint").is_dir()
    assert any(k.startswith(str(out.resolve())) for k in rl_tasks._CARRIES)
    rl_tasks.rl_finalize.fn(cfg, out)
    assert not any(k.startswith(str(out.resolve())) for k in rl_tasks._CARRIES)
    assert (out / "checkpoint" / "model.safetensors").is_file()
