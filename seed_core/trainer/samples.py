"""The step samples of one RL iteration (``RLSamples``): built from step records with their teacher prompts
(``build_samples``) and gathered across ranks (``gather_samples``); ``seed_core.trainer.rl_step`` updates on them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from seed_core.losses import step_scores
from seed_core.skills.contexts import StepSkills, check_teacher_rows
from seed_core.trainer.distributed import Collective
from seed_core.trainer.mechanism import decision_span


@dataclass
class RLSamples:
    """Tokenised step samples of one iteration (index i = one environment step)."""

    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    teacher_prompt_ids: list[list[int] | None]
    """Skill-augmented prompt, None when the trajectory has no valid skill."""
    group_ids: list[str]
    scores: torch.Tensor  # (N,) episode return minus the invalid-format penalty
    success: torch.Tensor | None = None
    """(N,) bool: the step's episode was won (splits the teacher-gap monitor by outcome); None = unknown."""
    sampling_logprobs: list[list[float]] | None = None
    """The engine's log-prob of each sampled response token (``StepRecord.sampling_logprobs``); None = unknown."""
    decision_spans: list[tuple[int, int]] | None = None
    """[a, b) response positions of each step's action (``mechanism.decision_span``); None = unknown."""

    def __len__(self) -> int:
        return len(self.prompt_ids)

    @property
    def teacher_mask(self) -> torch.Tensor:  # (N,)
        return torch.tensor([p is not None for p in self.teacher_prompt_ids], dtype=torch.float32)


def gather_samples(samples: RLSamples, comm: Collective) -> RLSamples:
    """Every rank's samples concatenated in rank order (the same global batch on every rank)."""
    parts = comm.gather_lists([samples])
    if len(parts) == 1:
        return parts[0]
    return RLSamples(
        prompt_ids=[p for s in parts for p in s.prompt_ids],
        response_ids=[r for s in parts for r in s.response_ids],
        teacher_prompt_ids=[t for s in parts for t in s.teacher_prompt_ids],
        group_ids=[g for s in parts for g in s.group_ids],
        scores=torch.cat([s.scores for s in parts]),
        success=None if any(s.success is None for s in parts) else torch.cat([s.success for s in parts]),
        sampling_logprobs=None if any(s.sampling_logprobs is None for s in parts)
        else [lp for s in parts for lp in s.sampling_logprobs],
        decision_spans=None if any(s.decision_spans is None for s in parts)
        else [d for s in parts for d in s.decision_spans],
    )


def build_samples(
    records: Sequence[Any],
    encoders: Any,
    penalty: float,
    context: Any = None,
    skills_of: Any = None,
) -> RLSamples:
    """Tokenise step records. ``encoders``: ``seed_core.skills.contexts.Encoders`` (chat template + left cut);
    ``context``: a ``TeacherContext`` (None = no teacher) building each step's teacher prompt from
    ``skills_of(record)``; a step without a skill gets ``teacher_prompt_ids = None`` (no teacher signal). Each
    teacher prompt passes ``check_teacher_rows`` (same response boundary, skill present; a cut is warned about)."""
    decode = getattr(encoders, "decode", None)  # the action's tokens (decision_spans) need the tokenizer's decode
    usable = [r for r in records if len(r.response_ids) > 0]
    returns = torch.tensor([r.episode_return for r in usable], dtype=torch.float32)
    valid = torch.tensor([r.format_valid for r in usable], dtype=torch.bool)
    prompts = [encoders.chat(r.prompt) for r in usable]
    teachers = [context.build(r.prompt, skills_of(r) if skills_of is not None else StepSkills(), encoders)
                if context is not None else None for r in usable]
    teacher_prompts = check_teacher_rows([f"trajectory {r.traj_id} step {r.step}" for r in usable], prompts,
                                         teachers, encoders)
    return RLSamples(
        prompt_ids=prompts,
        response_ids=[list(r.response_ids) for r in usable],
        teacher_prompt_ids=teacher_prompts,
        group_ids=[r.group_id for r in usable],
        scores=step_scores(returns, valid, penalty) if usable else torch.zeros(0),
        success=torch.tensor([bool(r.success) for r in usable], dtype=torch.bool),
        sampling_logprobs=[[float(x) for x in r.sampling_logprobs] for r in usable],
        decision_spans=[decision_span(r.response_ids, r.action, decode) for r in usable] if decode else None,
    )
