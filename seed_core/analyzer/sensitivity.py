"""Does a skill in context move the policy? The Stage-1 skill-sensitivity measure (a control included).

For every step of the collected trajectories that has an annotated skill, the expert's response y* in
that state is scored under three prompts: the ordinary prompt x, x with the episode's own skill s
inserted, and x with a mismatched skill s' (the skill of another task's trajectory):

    delta_matched    = mean over tokens of  log pi(y*_t | x + s,  y*_<t) - log pi(y*_t | x, y*_<t)
    delta_mismatched = mean over tokens of  log pi(y*_t | x + s', y*_<t) - log pi(y*_t | x, y*_<t)

If delta_matched is not clearly above delta_mismatched, the skill's *content* does not reach the actions
and SEED's distillation term can only act as a generic regulariser: SEED then equals GRPO by construction.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from seed_core.trainer.logprobs import score_in_chunks
from seed_core.types import StepRecord, Task


def expert_responses(env: Any, steps: Sequence[StepRecord], task: Task) -> list[str]:
    """The expert's well-formed response in every state the trajectory ``steps`` visited (replayed)."""
    env.reset(task)
    out = []
    for r in steps:
        out.append(env.format_response(env.expert_action()))
        if r.done:
            break
        env.step(r.action)
    return out


def mismatched(skills: dict[str, str], task_of: dict[str, str]) -> dict[str, str]:
    """traj_id -> the skill of the next trajectory (in order) that belongs to another task, if any."""
    ids = list(skills)
    out = {}
    for k, tid in enumerate(ids):
        other = next((o for o in ids[k + 1:] + ids[:k] if task_of[o] != task_of[tid]), None)
        if other is not None:
            out[tid] = skills[other]
    return out


def skill_sensitivity(
    model: torch.nn.Module,
    pad_id: int,
    encode: Callable[[str], list[int]],
    tokenize: Callable[[str], list[int]],
    env: Any,
    trajectories: dict[str, list[StepRecord]],
    tasks: dict[str, Task],
    skills: dict[str, str],
    insert_skill: Callable[[str, str], str],
    micro_batch_size: int = 8,
) -> dict[str, float]:
    """``skill/delta_matched``, ``skill/delta_mismatched`` (nats per token, see module docstring) and
    ``skill/examples`` (steps scored). No step with a skill and a mismatched control -> ``{}``."""
    task_of = {tid: steps[0].task_id for tid, steps in trajectories.items()}
    other = mismatched({t: s for t, s in skills.items() if t in task_of}, task_of)
    plain, matched, control, responses = [], [], [], []
    for tid, wrong in other.items():
        steps = trajectories[tid]
        for r, y in zip(steps, expert_responses(env, steps, tasks[steps[0].task_id])):
            ids = tokenize(y)
            plain.append(encode(r.prompt))
            matched.append(encode(insert_skill(r.prompt, skills[tid])))
            control.append(encode(insert_skill(r.prompt, wrong)))
            responses.append(ids)
    if not responses:
        return {}
    was_training = model.training
    model.eval()
    with torch.no_grad():
        scores = [score_in_chunks(model, prompts, responses, pad_id, micro_batch_size)
                  for prompts in (plain, matched, control)]
    model.train(was_training)
    tokens = float(sum(len(r) for r in responses))
    base, with_skill, with_other = (sum(float(row.sum()) for row in rows) for rows in scores)
    return {"skill/delta_matched": (with_skill - base) / tokens,
            "skill/delta_mismatched": (with_other - base) / tokens,
            "skill/examples": float(len(responses))}
