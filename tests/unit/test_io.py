import pyarrow.parquet as pq
import pytest

from seed_core.runtime.io import DataFileError, read_frame, read_records, write_records
from seed_core.types import EvalRecord, StepRecord


def _step(i: int, score: float | None = None) -> StepRecord:
    return StepRecord(env="sokoban", split="train", task_id="t", task_type="sokoban", seed=1, group_id="g",
                      traj_id="g/0", step=i, observation="o", prompt="p", response="r", response_ids=[1, 2],
                      sampling_logprobs=[-0.5, -0.25], action="up", format_valid=True, reward=-0.1, done=False,
                      episode_return=9.0, success=True, episode_length=2, policy_version="v", score=score)


def _eval(task_id: str, score: float | None) -> EvalRecord:
    return EvalRecord(method="grpo", env="webshop", split="test", task_id=task_id, task_type="beauty", seed=0,
                      success=score == 1.0, episode_return=0.0, length=3, skill_prompt=False, checkpoint="c",
                      score=score)


def test_roundtrip_keeps_types(tmp_path):
    path = write_records([_step(0), _step(1)], tmp_path / "a.parquet", StepRecord)
    back = read_records(path, StepRecord)
    assert back == [_step(0), _step(1)]
    assert read_records(write_records([], tmp_path / "e.parquet", EvalRecord), EvalRecord) == []


def test_corrupt_or_missing_file_names_the_file(tmp_path):
    bad = tmp_path / "t.parquet"
    write_records([_step(0)], bad, StepRecord)
    bad.write_bytes(bad.read_bytes()[:50])  # truncated
    with pytest.raises(DataFileError, match="t.parquet is not a readable parquet file"):
        read_records(bad, StepRecord)
    with pytest.raises(DataFileError, match="missing.parquet does not exist"):
        read_records(tmp_path / "missing.parquet", StepRecord)
    write_records([_step(0)], tmp_path / "s.parquet", StepRecord)
    with pytest.raises(DataFileError, match="lacks columns"):
        read_records(tmp_path / "s.parquet", EvalRecord)


def test_atomic_write_leaves_no_temp_files(tmp_path):
    write_records([_step(0)], tmp_path / "x.parquet", StepRecord)
    assert [p.name for p in tmp_path.iterdir()] == ["x.parquet"]


def test_score_roundtrips_and_none_means_no_score(tmp_path):
    path = write_records([_eval("a", 0.75), _eval("b", None)], tmp_path / "e.parquet", EvalRecord)
    assert [r.score for r in read_records(path, EvalRecord)] == [0.75, None]
    frame = read_frame(path, EvalRecord)
    assert frame["score"].iloc[0] == 0.75 and frame["score"].isna().iloc[1]  # pandas: None -> NaN


def test_old_file_without_score_reads_as_no_score(tmp_path):
    """Files written before ``score`` existed still read (score None = not recorded, never a made-up 0 or 1);
    a missing column without a default still fails with DataFileError naming it."""
    new = write_records([_eval("a", 0.5), _eval("b", 1.0)], tmp_path / "new.parquet", EvalRecord)
    old = tmp_path / "old.parquet"
    pq.write_table(pq.read_table(new).drop(["score"]), old)
    back = read_records(old, EvalRecord)
    assert [(r.task_id, r.score) for r in back] == [("a", None), ("b", None)] and back[1].success
    steps = tmp_path / "steps.parquet"
    pq.write_table(pq.read_table(write_records([_step(0, 0.25)], steps, StepRecord)).drop(["score"]), steps)
    assert read_records(steps, StepRecord) == [_step(0)]
    pq.write_table(pq.read_table(new).drop(["score", "length"]), old)
    with pytest.raises(DataFileError, match=r"old.parquet lacks columns \['length'\] of EvalRecord"):
        read_records(old, EvalRecord)
