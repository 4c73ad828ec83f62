"""The ``anchored`` governance's extra optimizer step on the round's analysis tokens (``seed_core.losses.anchor``).

Before the RL update, ``trajectory_gains`` scores each trajectory's teacher-scored steps under pi_old with and
without the skill (g_i of the loss). After it, ``anchor_update`` takes one optimizer step on
L = c_sg L_sg + c_kl L_kl over every analysis of the round with a non-empty answer, in micro-batches whose losses
are weighted by their share of the answers (and of the answer tokens for L_kl), so the step is the whole batch's.
SEED runs its skill-generation loss the same way, after the PPO step (``dp_actor.py`` ``update_policy``).

The answer's tokens are its text re-tokenized (``AnnotationRecord`` keeps the text, not the ids the analyzer
sampled); on a tokenizer whose encode(decode(ids)) != ids the anchored tokens can differ from the sampled ones by
a merge at a boundary. This moves which tokens carry the LM loss, not its target text.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from seed_core.losses.anchor import anchor_loss, skill_gen_reward
from seed_core.modeling.models import encode_prompt
from seed_core.trainer.logprobs import pack_sequences, response_logprobs, score_in_chunks


def trajectory_gains(model: torch.nn.Module, samples: Any, traj_ids: Sequence[str], pad_id: int,
                     micro_batch_size: int) -> dict[str, float]:
    """traj_id -> g: the mean over its samples' response tokens that have a teacher prompt of
    log pi(y | teacher prompt) - log pi(y | prompt) (no grad, the current = pre-update weights)."""
    rows = [i for i, t in enumerate(samples.teacher_prompt_ids) if t is not None]
    if not rows:
        return {}
    with torch.no_grad():
        teacher = score_in_chunks(model, [samples.teacher_prompt_ids[i] for i in rows],
                                  [samples.response_ids[i] for i in rows], pad_id, micro_batch_size)
        student = score_in_chunks(model, [samples.prompt_ids[i] for i in rows],
                                  [samples.response_ids[i] for i in rows], pad_id, micro_batch_size)
    sums: dict[str, list[float]] = {}
    for i, t, s in zip(rows, teacher, student):
        acc = sums.setdefault(traj_ids[i], [0.0, 0.0])
        acc[0] += float((t - s).sum())
        acc[1] += float(t.numel())
    return {traj: total / max(count, 1.0) for traj, (total, count) in sums.items()}


def analysis_batch(annotations: Sequence[Any], tokenizer: Any, chat_kwargs: dict[str, Any], gains: dict[str, float],
                   won: dict[str, bool]) -> tuple[list[list[int]], list[list[int]], list[float]]:
    """(prompt ids, answer ids, SEED rewards) of every analysis with a non-empty answer."""
    prompts, answers, rewards = [], [], []
    for a in annotations:
        ids = tokenizer(a.raw_output, add_special_tokens=False)["input_ids"]
        if not ids:
            continue
        prompts.append(encode_prompt(tokenizer, a.prompt, chat_kwargs))
        answers.append(list(ids))
        rewards.append(skill_gen_reward(gains.get(a.traj_id, 0.0), won.get(a.traj_id, False),
                                        a.parse_status == "ok", bool(a.episode_skill.strip()), len(a.raw_output)))
    return prompts, answers, rewards


def anchor_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: tuple[list, list, list[float]], *,
                  ref_model: torch.nn.Module | None, pad_id: int, sg_coef: float, kl_coef: float, micro: int,
                  grad_clip: float, accelerator: Any = None) -> dict[str, float]:
    """One optimizer step on the anchor loss of ``batch`` (``analysis_batch``); ``anchor/*`` metrics."""
    prompts, answers, rewards = batch
    if not answers:
        return {"anchor/samples": 0.0}
    model.train()
    optimizer.zero_grad(set_to_none=True)
    total_tokens = float(sum(len(a) for a in answers))
    sums: dict[str, float] = {}
    for start in range(0, len(answers), max(micro, 1)):
        part = slice(start, start + max(micro, 1))
        packed = pack_sequences(prompts[part], answers[part], pad_id)
        logprobs, _ = response_logprobs(model, packed)
        ref = None
        if ref_model is not None and kl_coef > 0:
            with torch.no_grad():
                ref, _ = response_logprobs(ref_model, packed)
        n, tokens = len(answers[part]), float(packed.response_mask.sum())
        # one loss over the whole batch: this micro-batch's share of the answers (L_sg) and of their tokens (L_kl)
        loss, metrics = anchor_loss(logprobs, ref, packed.response_mask, rewards[part], sg_coef * n / len(answers),
                                    kl_coef * tokens / total_tokens)
        (accelerator.backward(loss) if accelerator is not None else loss.backward())
        for key, weight in (("anchor/sg_loss", n / len(answers)), ("anchor/kl", tokens / total_tokens)):
            if key in metrics:
                sums[key] = sums.get(key, 0.0) + metrics[key] * weight
        sums["anchor/loss"] = sums.get("anchor/loss", 0.0) + float(loss.detach())
    norm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return {**sums, "anchor/samples": float(len(answers)), "anchor/reward_mean": sum(rewards) / len(rewards),
            "anchor/grad_norm": float(norm) if math.isfinite(float(norm)) else -1.0}
