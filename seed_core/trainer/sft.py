"""Supervised fine-tuning on (prompt, target) chat examples; the loss covers target tokens only.

    L = - (1 / |targets|) * sum_{i, j} log pi(y_ij | prompt_i, y_i,<j)        (token-mean over the batch)

Stage 1 trains the analyzer format (analyzer prompt -> hindsight-skill JSON) and, optionally,
expert demonstrations (agent prompt -> well-formed action response). AdamW, linear warm-up then cosine.
One optimizer step covers ``batch_size * grad_accum`` examples; with several accelerate processes each
takes an equal share of them and the token-mean is over the whole step (``trainer.distributed``), so the
update does not depend on the number of processes.
"""

from __future__ import annotations

import logging
import math
import random
from typing import Any, Callable, Sequence

import torch

from seed_core.config import SFTConfig
from seed_core.runtime.logs import Progress
from seed_core.trainer.distributed import Collective, pad_micro, rank_slice, split_micro
from seed_core.trainer.logprobs import pack_sequences, response_logprobs

log = logging.getLogger(__name__)


def tokenize_examples(
    examples: Sequence[tuple[str, str]], encode: Callable[[str], list[int]], tokenizer: Any, max_length: int
) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, target ids + end-of-turn); the prompt is cut from the left so the target always fits."""
    eos = tokenizer.eos_token_id
    out = []
    for prompt, target in examples:
        t_ids = tokenizer.encode(target, add_special_tokens=False)[: max_length - 1] + [eos]
        p_ids = encode(prompt)
        room = max(max_length - len(t_ids), 1)
        out.append((p_ids[-room:], t_ids))
    return out


def run_sft_loop(
    model: torch.nn.Module,
    data: Sequence[tuple[list[int], list[int]]],
    cfg: SFTConfig,
    pad_id: int,
    *,
    seed: int = 0,
    accelerator: Any = None,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
    label: str = "sft",
) -> list[dict[str, float]]:
    """Train ``cfg.epochs`` epochs over ``data``; returns one metrics row per optimizer step. ``label`` names the
    progress lines (``sft: step 3/10 ...``; the testbed's pretraining has its own)."""
    from transformers import get_cosine_schedule_with_warmup

    if not data:
        raise ValueError("SFT got no examples: the annotate stage produced no parseable skills "
                         "(see data/annotate/metrics.json failure_reasons)")
    params = [p for p in model.parameters() if p.requires_grad]  # LoRA: the adapters only
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    steps_per_epoch = math.ceil(len(data) / (cfg.batch_size * cfg.grad_accum))
    total = steps_per_epoch * cfg.epochs
    scheduler = get_cosine_schedule_with_warmup(optimizer, int(cfg.warmup_ratio * total), total)
    if accelerator is not None:
        model, optimizer = accelerator.prepare(model, optimizer)
    comm = Collective(accelerator)
    lengths = [len(p) + len(t) for p, t in data]
    rng = random.Random(seed)
    model.train()
    history: list[dict[str, float]] = []
    step = 0
    bar = Progress(log, label, total, "step")
    for epoch in range(cfg.epochs):
        order = list(range(len(data)))
        rng.shuffle(order)
        chunk = cfg.batch_size * cfg.grad_accum
        for start in range(0, len(order), chunk):
            group = order[start:start + chunk]
            n_tokens = float(sum(len(data[i][1]) for i in group))  # target tokens of the whole step, all ranks
            micros = split_micro(rank_slice(group, comm.rank, comm.world), lengths, cfg.batch_size)
            micros = pad_micro(micros, comm.max_int(len(micros)), filler=group[0])
            optimizer.zero_grad(set_to_none=True)
            local_loss = 0.0
            for rows in micros:
                batch = pack_sequences([data[i][0] for i in rows.index], [data[i][1] for i in rows.index], pad_id)
                logprobs, _ = response_logprobs(model, batch)
                keep = torch.tensor(rows.keep, dtype=logprobs.dtype, device=logprobs.device).unsqueeze(1)
                mask = batch.response_mask.to(logprobs.device) * keep
                share = -(logprobs * mask).sum() / n_tokens  # this micro-batch's part of the step's token-mean
                scaled = share * comm.world  # DDP / FSDP average gradients over ranks
                accelerator.backward(scaled) if accelerator is not None else scaled.backward()
                local_loss += float(share.detach())
            total_loss, tokens = comm.sum_float(local_loss), n_tokens
            clip = accelerator.clip_grad_norm_ if accelerator is not None else torch.nn.utils.clip_grad_norm_
            grad_norm = float(clip(model.parameters(), cfg.grad_clip))
            if math.isfinite(grad_norm):
                optimizer.step()
            scheduler.step()
            row = {"sft/loss": total_loss, "sft/grad_norm": grad_norm, "sft/lr": scheduler.get_last_lr()[0],
                   "sft/target_tokens": float(tokens), "sft/epoch": float(epoch)}
            history.append(row)
            if on_step is not None:
                on_step(step, row)
            step += 1
            bar.update(1, loss=f"{total_loss:.3f}")
    bar.close()
    return history
