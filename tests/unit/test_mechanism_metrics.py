"""The SEED mechanism monitors against hand-computed values: the teacher-student gap split by outcome, pooled
exactly over micro-batches, and the skill statistics."""

from __future__ import annotations

import pytest
import torch

from seed_core.analyzer.parse import skill_metrics
from seed_core.analyzer.sensitivity import mismatched
from seed_core.trainer.mechanism import gap_sums_by_outcome, teacher_gap_by_outcome


def test_gap_sums_split_rows_by_outcome_and_respect_the_mask():
    teacher = torch.tensor([[-1.0, -2.0, -9.0], [-0.5, -0.5, -0.5], [-3.0, -1.0, -1.0]])
    student = torch.tensor([[-2.0, -2.5, 0.0], [-1.5, -1.0, -0.5], [-1.0, -1.0, -1.0]])
    active = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])  # row 0 padded, row 2 short
    success = torch.tensor([True, False, True])
    out = gap_sums_by_outcome(teacher, student, active, success)
    # success rows 0 and 2: (1.0 + 0.5) + (-2.0) over 3 tokens; failure row 1: 1.0 + 0.5 + 0.0 over 3 tokens
    assert out == pytest.approx({"gap_sum/success": -0.5, "gap_tokens/success": 3.0,
                                 "gap_sum/failure": 1.5, "gap_tokens/failure": 3.0})


def test_pooled_gap_is_the_exact_token_mean_over_micro_batches():
    # two micro-batches averaged by the trainer (sum / 2): the ratio of the pooled means is the token-mean
    first = {"gap_sum/success": 3.0, "gap_tokens/success": 2.0, "gap_sum/failure": 0.0, "gap_tokens/failure": 0.0}
    second = {"gap_sum/success": 1.0, "gap_tokens/success": 6.0, "gap_sum/failure": -2.0, "gap_tokens/failure": 4.0}
    pooled = {f"rl/{k}": (first[k] + second[k]) / 2 for k in first}
    out = teacher_gap_by_outcome(pooled)
    assert out["rl/teacher_gap_success"] == pytest.approx(4.0 / 8.0)  # not the mean of 1.5 and 1/6
    assert out["rl/teacher_gap_failure"] == pytest.approx(-0.5)
    assert not any(k.startswith("rl/gap_") for k in pooled), "the raw sums are consumed"
    assert teacher_gap_by_outcome({"rl/gap_sum/success": 0.0, "rl/gap_tokens/success": 0.0,
                                   "rl/gap_sum/failure": 0.0, "rl/gap_tokens/failure": 0.0})[
        "rl/teacher_gap_success"] == 0.0


def test_skill_metrics_count_words_and_distinct_texts():
    out = skill_metrics(["use 2+10", "use 2+10", "avoid = early now"], "analysis")
    assert out == {"analysis/skill_words_mean": pytest.approx(8 / 3), "analysis/distinct_skills": 2.0,
                   "analysis/placeholder_share": 0.0}
    assert skill_metrics([], "annotate") == {"annotate/skill_words_mean": 0.0, "annotate/distinct_skills": 0.0,
                                             "annotate/placeholder_share": 0.0}


def test_the_control_skill_comes_from_another_task():
    skills = {"a/0": "sa0", "a/1": "sa1", "b/0": "sb0"}
    task_of = {"a/0": "a", "a/1": "a", "b/0": "b"}
    assert mismatched(skills, task_of) == {"a/0": "sb0", "a/1": "sb0", "b/0": "sa0"}
    assert mismatched({"a/0": "x"}, {"a/0": "a"}) == {}  # no other task: no control
