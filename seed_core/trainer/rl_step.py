"""One RL update on a batch of step samples: GRPO advantages, old/teacher/ref log-probs, PPO mini-batches.

    L = pg_coef * L_PPO(A') - c_ent * H + kl_coef * KL_k3(pi || ref) + opd_coef * L_OPD(gate)   (seed-algorithm.md §1.7, §1.12)

The terms come from the ``Algorithm`` record through ``seed_core.trainer.compose`` (pure, golden-tested);
``cfg`` is the effective RL config (``seed_core.algorithms.effective_rl``).

The teacher log-probs are the *pre-update* policy scoring the *same response ids* under the
skill-augmented prompt; they are computed in the same no-grad pass as the old log-probs (one
length-sorted scoring run over ordinary + augmented sequences). Samples of trajectories whose skill
failed to parse carry ``teacher_mask = 0`` and get no distillation signal.

Weight-sync monitor (TRL's ``sampling_logp_difference``): ``rollout/sampling_logp_diff_mean`` / ``_max`` are
the mean and max over response tokens of |the log-prob the generation engine reported for each sampled token
- the trainer's log-prob of it under theta_old| (the old pass, or the first forward of the single-step update,
before any optimizer step). Near 0 when the engine samples from the weights being trained (fp32 hf: ~1e-7);
large when it serves stale weights (``seed_core.stages.weight_sync.check_weight_sync``).

Mechanism monitors (issue 25, ``seed_core.trainer.mechanism``): ``rl/zero_adv_group_ratio`` (groups whose every
advantage is 0); for algorithms with a teacher, the gap (and for the gated loss the gate) on decision tokens (the
action span) and on format tokens separately (``rl/teacher_gap_decision`` / ``_format``, ``rl/gate_decision`` /
``_format``); for distilling algorithms on one process, ``rl/grad_ratio`` = ||grad(opd_coef L_distill)|| /
||grad L_PG|| at theta_old on one micro-batch (``distill_grad_ratio``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from seed_core.algorithms import Algorithm, effective_rl, loss_kwargs
from seed_core.config import RLConfig
from seed_core.losses import ADVANTAGES, LossInputs
from seed_core.trainer.compose import compose_loss
from seed_core.trainer.distributed import Collective, Rows, group_by_prompt, pad_micro, rank_slice, split_micro
from seed_core.trainer.logprobs import can_share_prefix, pack_sequences, pad_rows, response_logprobs, \
    score_in_chunks, shared_response_logprobs
from seed_core.trainer.mechanism import gap_sums_by_outcome, grad_norm, pooled_split, span_mask, \
    split_sums, teacher_gap_by_outcome, zero_advantage_groups
from seed_core.trainer.optim import release_host_memory
from seed_core.trainer.samples import RLSamples


def _sum_metrics(acc: dict[str, float], new: dict[str, float]) -> None:
    for k, v in new.items():
        acc[k] = acc.get(k, 0.0) + float(v)


def compute_reference_logprobs(
    policy_model: torch.nn.Module,
    ref_model: torch.nn.Module | None,
    samples: RLSamples,
    pad_id: int,
    micro_batch_size: int,
    needs_teacher: bool,
    needs_old: bool = True,
    comm: Collective | None = None,
    max_tokens: int = 0,
    share_prefix: bool = False,
) -> dict[str, list[torch.Tensor]]:
    """The no-grad passes: old (+ teacher, batched together) with the policy, then ref with the reference.

    ``needs_old=False`` (one optimizer step per iteration) skips the old pass: the trainer then uses the
    detached current log-probs, which are equal because the weights have not moved yet. With several ranks
    each scores an equal share of the samples and the results are gathered; every rank runs the same number of
    forward passes, as FSDP needs (short shares are padded with real rows, and a rank whose token budget
    ``max_tokens`` cuts its share into fewer micro-batches runs padding passes: results dropped either way).
    Returns one list per pass in sample order; ``teacher[i]`` is zeros for samples without a skill.
    ``micro_batch_size`` / ``max_tokens`` / ``share_prefix``: how each forward pass is cut (``score_in_chunks``).
    """
    comm = comm or Collective()
    n = len(samples)
    share = rank_slice(list(range(n)), comm.rank, comm.world)
    rows = share.index
    teacher_rows = [i for i in rows if samples.teacher_prompt_ids[i] is not None] if needs_teacher else []
    width = comm.max_int(len(teacher_rows)) if needs_teacher else 0
    if width > len(teacher_rows):  # another rank has more teacher rows: pad with any teacher row
        filler = next(i for i, p in enumerate(samples.teacher_prompt_ids) if p is not None)
        teacher_rows += [filler] * (width - len(teacher_rows))
    own_rows = rows if needs_old else []
    prompts = [samples.prompt_ids[i] for i in own_rows] + [samples.teacher_prompt_ids[i] for i in teacher_rows]
    responses = [samples.response_ids[i] for i in own_rows + teacher_rows]  # exactly the sampled ids
    scored = score_in_chunks(policy_model, prompts, responses, pad_id, micro_batch_size, max_tokens,
                             comm, share_prefix) if prompts else []
    values: dict[str, dict[int, torch.Tensor]] = {
        "teacher": {i: scored[len(own_rows) + k] for k, i in enumerate(teacher_rows)}}
    if needs_old:
        values["old"] = dict(zip(rows, scored))
    if ref_model is not None:
        values["ref"] = dict(zip(rows, score_in_chunks(ref_model, [samples.prompt_ids[i] for i in rows],
                                                       [samples.response_ids[i] for i in rows], pad_id,
                                                       micro_batch_size, max_tokens, comm, share_prefix)))
    real = set(share.real)
    merged: dict[str, dict[int, torch.Tensor]] = {key: {} for key in values}
    for part in comm.gather_lists([{key: {i: v for i, v in d.items() if i in real} for key, d in values.items()}]):
        for key, d in part.items():
            merged[key].update(d)
    out = {key: [d[i] for i in range(n)] for key, d in merged.items() if key != "teacher"}
    out["teacher"] = [merged["teacher"].get(i, torch.zeros(len(r))) for i, r in enumerate(samples.response_ids)]
    return out


@dataclass
class MicroLoss:
    """One micro-batch's loss terms, each a token-mean over its own tokens (see ``distributed``)."""

    token_loss: torch.Tensor
    """L_PPO + kl_coef * KL - c_ent * H: token-means over the ``tokens`` response tokens."""
    distill_loss: torch.Tensor | None
    """opd_coef * L_OPD: token-mean over the ``teacher_tokens`` response tokens that have a teacher."""
    tokens: float
    teacher_tokens: float
    pg_loss: torch.Tensor | None = None
    """L_PG before pg_coef, token-mean over ``tokens`` (``distill_grad_ratio``)."""

    def local(self) -> torch.Tensor:
        """The loss of this micro-batch on its own: L_tok + opd_coef * L_OPD."""
        return self.token_loss if self.distill_loss is None else self.token_loss + self.distill_loss

    def global_share(self, total_tokens: float, total_teacher_tokens: float) -> torch.Tensor:
        """(n_k / N) L_tok + (n_k^T / N^T) opd_coef * L_OPD: this micro-batch's part of the mini-batch token-mean."""
        out = self.token_loss * (self.tokens / max(total_tokens, 1.0))
        if self.distill_loss is not None and total_teacher_tokens > 0:
            out = out + self.distill_loss * (self.teacher_tokens / total_teacher_tokens)
        return out


def micro_batch_loss(
    model: torch.nn.Module,
    samples: RLSamples,
    idx: list[int],
    scored: dict[str, list[torch.Tensor]],
    adv: torch.Tensor,
    *,
    pad_id: int,
    cfg: RLConfig,
    algorithm: Algorithm,
    keep: list[bool] | None = None,
    step: int = 0,
    old_out: dict[int, torch.Tensor] | None = None,
    share_prefix: bool = False,
) -> tuple[MicroLoss, dict[str, float]]:
    """``compose_loss`` on the samples ``idx`` with the current weights (``cfg`` = effective RL config).

    Rows with ``keep[i] = False`` are padding: their tokens are masked out of every term. ``old_out``: where
    the kept rows' theta_old log-probs go, by sample index (the weight-sync monitor of the single-step update).
    ``share_prefix``: rows that repeat a prompt compute it once (``shared_response_logprobs``; the caller checks
    that the model and the process count allow it).
    """
    prompts, responses = [samples.prompt_ids[i] for i in idx], [samples.response_ids[i] for i in idx]
    if share_prefix and len({tuple(p) for p in prompts}) < len(prompts):
        logprobs, entropy, response_mask = shared_response_logprobs(model, prompts, responses, pad_id,
                                                                    with_entropy=cfg.entropy_coef > 0)  # (B, T)
    else:
        batch = pack_sequences(prompts, responses, pad_id)
        logprobs, entropy = response_logprobs(model, batch, with_entropy=cfg.entropy_coef > 0)  # (B, T)
        response_mask = batch.response_mask
    T = response_mask.shape[1]
    dev = logprobs.device
    row_keep = torch.tensor(keep if keep is not None else [True] * len(idx), dtype=torch.float32, device=dev)
    mask = response_mask.to(dev) * row_keep.unsqueeze(1)
    # on-policy shortcut: with one optimizer step per iteration theta == theta_old here, so l_old = sg(l_theta)
    old = pad_rows([scored["old"][i] for i in idx], T).to(dev) if "old" in scored else logprobs.detach()
    if old_out is not None:
        old_out.update({i: old[row, :len(samples.response_ids[i])].cpu() for row, i in enumerate(idx)
                        if row_keep[row] > 0})
    teacher = pad_rows([scored["teacher"][i] for i in idx], T).to(dev)
    tmask = samples.teacher_mask[idx].to(dev) * row_keep  # (B,)
    token_adv = adv[idx].to(dev).unsqueeze(1) * mask  # (B, T): the step's advantage on every response token
    ref = pad_rows([scored["ref"][i] for i in idx], T).to(dev) if "ref" in scored else None
    inp = LossInputs(logprobs=logprobs, old_logprobs=old, advantages=token_adv, mask=mask,
                     ref_logprobs=ref, teacher_logprobs=teacher, teacher_mask=tmask, entropy=entropy)
    composed = compose_loss(inp, cfg=cfg, algorithm=algorithm, step=step)
    loss, distill, metrics = composed.token_loss, composed.distill_loss, composed.metrics
    if algorithm.needs_teacher and samples.success is not None:
        metrics.update(gap_sums_by_outcome(teacher, logprobs.detach(), mask * tmask.unsqueeze(1),
                                           samples.success[idx].to(dev)))
    if algorithm.needs_teacher and samples.decision_spans is not None:
        beta = loss_kwargs(cfg).get("beta") if algorithm.distill else None  # only a gated loss has g
        decision = span_mask([samples.decision_spans[i] for i in idx], T).to(dev)
        metrics.update(split_sums(teacher, logprobs.detach(), mask * tmask.unsqueeze(1), decision, beta))
    tokens = float(mask.sum())
    teacher_tokens = float((mask * tmask.unsqueeze(1)).sum())
    return MicroLoss(loss, distill, tokens, teacher_tokens, composed.pg_loss), metrics


def distill_grad_ratio(model: torch.nn.Module, samples: RLSamples, rows: list[int],
                       scored: dict[str, list[torch.Tensor]], adv: torch.Tensor, *, pad_id: int, cfg: RLConfig,
                       algorithm: Algorithm, step: int = 0, backward: Any = None) -> dict[str, float]:
    """The size of the distillation signal against the policy gradient, on the samples ``rows`` at the current
    weights, micro-batched like the update (each micro-batch weighted by its share of the rows' tokens):

        rl/grad_norm_pg      = || d L_PG / d theta ||                 L_PG before pg_coef (token-mean over rows)
        rl/grad_norm_distill = || d (opd_coef L_distill) / d theta ||  (token-mean over the rows' teacher tokens)
        rl/grad_ratio        = grad_norm_distill / grad_norm_pg        (inf when L_PG has no gradient)

    Two backward sweeps (one per term); the gradients are cleared before and after, so the update is unchanged.
    ``backward``: ``accelerator.backward`` (loss scaling) or None. ``{}`` without a distillation term or teacher."""
    if not algorithm.distill or not rows:
        return {}
    total, total_teacher = _mini_batch_totals(samples, rows)
    if total_teacher == 0:
        return {}
    params = [p for p in model.parameters() if p.requires_grad]
    micros, shared = micro_batches(model, samples, Rows(list(rows), [True] * len(rows)), cfg, Collective())
    norms = {}
    for term in ("pg", "distill"):
        model.zero_grad(set_to_none=True)
        for micro in micros:
            part, _ = micro_batch_loss(model, samples, micro.index, scored, adv, pad_id=pad_id, cfg=cfg,
                                       algorithm=algorithm, step=step, share_prefix=shared)
            loss = part.pg_loss * (part.tokens / total) if term == "pg" else \
                part.distill_loss * (part.teacher_tokens / total_teacher)
            (backward or torch.Tensor.backward)(loss)
        norms[term] = grad_norm(params)
    model.zero_grad(set_to_none=True)
    ratio = norms["distill"] / norms["pg"] if norms["pg"] > 0 else math.inf
    return {"rl/grad_norm_pg": norms["pg"], "rl/grad_norm_distill": norms["distill"], "rl/grad_ratio": ratio}


def micro_batches(model: torch.nn.Module, samples: RLSamples, rows: Rows, cfg: RLConfig,
                  comm: Collective) -> tuple[list[Rows], bool]:
    """This rank's ``rows`` cut into forward/backward passes (``split_micro``), and whether they share prompts: with
    ``rl.share_prefix`` on one process and a model that allows it (``can_share_prefix``) a group's rows go side by
    side and its prompt counts once against ``rl.micro_batch_tokens``."""
    lengths = [len(p) + len(r) for p, r in zip(samples.prompt_ids, samples.response_ids)]
    shared = cfg.share_prefix and comm.world == 1 and can_share_prefix(model)
    if shared:
        rows = group_by_prompt(rows, samples.prompt_ids)
    return split_micro(rows, lengths, cfg.micro_batch_size, cfg.micro_batch_tokens,
                       samples.prompt_ids if shared else None), shared


def grad_ratio_rows(n: int, size: int, seed: int) -> list[int]:
    """``size`` sample indices drawn without replacement (a generator of its own: the update's draws are unchanged),
    so the ratio sees several groups, not the first task's only."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed + 1)).tolist()[:size]


def _mini_batch_totals(samples: RLSamples, mini: list[int]) -> tuple[float, float]:
    """(N, N^T): response tokens of the whole mini-batch (all ranks), and those that have a teacher."""
    tokens = sum(len(samples.response_ids[i]) for i in mini)
    teacher = sum(len(samples.response_ids[i]) for i in mini if samples.teacher_prompt_ids[i] is not None)
    return float(tokens), float(teacher)


@dataclass
class _Tally:
    """What the optimizer steps of one ``rl_update`` add up: the per-micro-batch metrics summed over the
    ``n_micro`` micro-batches that have tokens, each step's mini-batch loss (summed over ranks), the pre-clip
    gradient norm of each step taken, and the steps skipped for a non-finite norm."""

    sums: dict[str, float] = field(default_factory=dict)
    n_micro: int = 0
    losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    skipped_steps: int = 0


def rl_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: RLSamples,
    *,
    cfg: RLConfig,
    algorithm: Algorithm,
    pad_id: int,
    ref_model: torch.nn.Module | None = None,
    accelerator: Any = None,
    seed: int = 0,
    step: int = 0,
) -> dict[str, float]:
    """Advantages + scoring passes + ``ppo_epochs`` x mini-batches of clipped updates; returns ``rl/...`` metrics.

    ``samples`` is the *global* batch (the same on every rank). Each optimizer step minimises the token-mean
    over its whole mini-batch (``distributed``), so 1 and P processes, and any micro-batching, give the same
    loss and update. ``rl/total_loss`` is that mini-batch loss, averaged over the optimizer steps.
    ``cfg`` must be the effective RL config of ``algorithm`` (``effective_rl``); ``step`` = the RL round.
    """
    if len(samples) == 0:
        return {"rl/skipped_empty_batch": 1.0, "rl/samples": 0.0}
    cfg = effective_rl(cfg, algorithm)  # idempotent: the algorithm's fixed values win (one owner)
    comm = Collective(accelerator)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    adv = ADVANTAGES.get(cfg.advantage)(samples.scores, samples.group_ids)  # (N,)
    single_step = cfg.ppo_epochs == 1 and len(samples) <= cfg.mini_batch_size
    scored = compute_reference_logprobs(
        model, ref_model if cfg.kl_coef > 0 else None, samples, pad_id, cfg.micro_batch_size,
        algorithm.needs_teacher, needs_old=not single_step, comm=comm, max_tokens=cfg.micro_batch_tokens,
        share_prefix=cfg.share_prefix,
    )
    timings["time/logprob_passes_s"] = time.perf_counter() - t0
    monitors = _update_monitors(model, samples, scored, adv, cfg=cfg, algorithm=algorithm, pad_id=pad_id,
                                accelerator=accelerator, comm=comm, seed=seed, step=step, timings=timings)
    # theta_old for the weight-sync monitor: the old pass, else the single-step update's own first forward
    old_rows: dict[int, torch.Tensor] | None = dict(enumerate(scored["old"])) if "old" in scored else {}

    t1 = time.perf_counter()
    model.train()
    tally = _Tally()
    gen = torch.Generator().manual_seed(seed)  # same permutation on every rank
    for _ in range(cfg.ppo_epochs):
        perm = torch.randperm(len(samples), generator=gen).tolist()
        for m0 in range(0, len(perm), cfg.mini_batch_size):
            _mini_batch_step(model, optimizer, samples, perm[m0:m0 + cfg.mini_batch_size], scored, adv, tally,
                             cfg=cfg, algorithm=algorithm, pad_id=pad_id, accelerator=accelerator, comm=comm,
                             step=step, old_out=None if "old" in scored else old_rows)
    timings["time/update_s"] = time.perf_counter() - t1
    out = _mean_over_ranks(comm, tally.sums, tally.n_micro)
    out.update(teacher_gap_by_outcome(out))
    out.update(pooled_split(out))
    out.update({k: v for k, v in monitors.items() if math.isfinite(v)})  # inf: no PG gradient at all
    out.update(sampling_logp_diff(samples, old_rows, comm, pooled="old" in scored))
    return out | _step_metrics(tally, samples, adv) | timings


def _update_monitors(model: torch.nn.Module, samples: RLSamples, scored: dict[str, list[torch.Tensor]],
                     adv: torch.Tensor, *, cfg: RLConfig, algorithm: Algorithm, pad_id: int, accelerator: Any,
                     comm: Collective, seed: int, step: int, timings: dict[str, float]) -> dict[str, float]:
    """The mechanism monitors measured before the update: ``rl/zero_adv_group_ratio`` and, for a distilling
    algorithm on one process, ``distill_grad_ratio`` on ``grad_ratio_rows`` (its time in ``timings``)."""
    monitors = {"rl/zero_adv_group_ratio": zero_advantage_groups(adv, samples.group_ids)}
    if algorithm.distill and comm.world == 1:  # several ranks: DDP reduces every backward; not measured there
        t2 = time.perf_counter()
        rows = grad_ratio_rows(len(samples), cfg.micro_batch_size, seed)
        backward = accelerator.backward if accelerator is not None else None
        monitors.update(distill_grad_ratio(model, samples, rows, scored, adv, pad_id=pad_id, cfg=cfg,
                                           algorithm=algorithm, step=step, backward=backward))
        timings["time/grad_ratio_s"] = time.perf_counter() - t2
    return monitors


def _mini_batch_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, samples: RLSamples, mini: list[int],
                     scored: dict[str, list[torch.Tensor]], adv: torch.Tensor, tally: _Tally, *, cfg: RLConfig,
                     algorithm: Algorithm, pad_id: int, accelerator: Any, comm: Collective, step: int,
                     old_out: dict[int, torch.Tensor] | None) -> None:
    """One optimizer step on the mini-batch ``mini`` (all ranks): this rank's micro-batches (padded to the most
    any rank has) backpropagate (n_k / N) L_tok + (n_k^T / N^T) opd_coef L_OPD, times the world size (DDP / FSDP
    average over ranks), so the step minimises the mini-batch token-mean; the gradient is clipped to
    ``rl.grad_clip`` and a non-finite norm skips the step (verl). Losses, norms and metrics go to ``tally``."""
    total, total_teacher = _mini_batch_totals(samples, mini)
    micros, shared = micro_batches(model, samples, rank_slice(mini, comm.rank, comm.world), cfg, comm)
    micros = pad_micro(micros, comm.max_int(len(micros)), filler=mini[0])
    optimizer.zero_grad(set_to_none=True)
    share_sum = 0.0
    for rows in micros:
        part, metrics = micro_batch_loss(model, samples, rows.index, scored, adv, pad_id=pad_id, cfg=cfg,
                                         algorithm=algorithm, keep=rows.keep, step=step, old_out=old_out,
                                         share_prefix=shared)
        share = part.global_share(total, total_teacher)
        scaled = share * comm.world  # DDP / FSDP average the gradients over ranks
        if accelerator is not None:
            accelerator.backward(scaled)
        else:
            scaled.backward()
        share_sum += float(share.detach())
        if part.tokens > 0:  # padding micro-batches carry no metrics
            _sum_metrics(tally.sums, metrics)
            tally.n_micro += 1
    tally.losses.append(comm.sum_float(share_sum))
    clip = accelerator.clip_grad_norm_ if accelerator is not None else torch.nn.utils.clip_grad_norm_
    norm = float(clip(model.parameters(), cfg.grad_clip))
    if math.isfinite(norm):
        release_host_memory(model)  # the backward's freed blocks, before AdamW's state grows (trainer.optim)
        optimizer.step()
        tally.grad_norms.append(norm)
    else:  # verl: a non-finite gradient skips the step instead of corrupting the weights
        tally.skipped_steps += 1
    optimizer.zero_grad(set_to_none=True)


def _step_metrics(tally: _Tally, samples: RLSamples, adv: torch.Tensor) -> dict[str, float]:
    """``rl/total_loss`` (the mean mini-batch loss over the optimizer steps), the mean gradient norm, the step
    counts and the batch's size, teacher share and mean |A|."""
    return {
        "rl/total_loss": sum(tally.losses) / len(tally.losses),
        "rl/grad_norm": sum(tally.grad_norms) / max(len(tally.grad_norms), 1),
        "rl/optimizer_steps": float(len(tally.grad_norms)),
        "rl/skipped_nonfinite_steps": float(tally.skipped_steps),
        "rl/samples": float(len(samples)),
        "rl/teacher_sample_ratio": float(samples.teacher_mask.mean()),
        "rl/advantage_abs_mean": float(adv.abs().mean()),
    }


def sampling_logp_diff(samples: RLSamples, old: dict[int, torch.Tensor], comm: Collective,
                       pooled: bool = True) -> dict[str, float]:
    """``rollout/sampling_logp_diff_mean`` / ``_max``: |engine log-prob - theta_old log-prob| over the response
    tokens of the rows in ``old`` (sample index -> theta_old's log-probs; module docstring). ``pooled``: every
    rank holds every row; else each holds its own share and the sums are pooled over ranks here. Rows without
    engine log-probs of the right length are left out; no row at all, no metric."""
    total, count, worst = 0.0, 0.0, 0.0
    for i, logp in old.items() if samples.sampling_logprobs is not None else ():
        sampled = samples.sampling_logprobs[i]
        if not sampled or len(sampled) != logp.numel():
            continue
        diff = (torch.tensor(sampled, dtype=torch.float32) - logp.float()).abs()
        total, count, worst = total + float(diff.sum()), count + diff.numel(), max(worst, float(diff.max()))
    if not pooled:
        parts = comm.gather_lists([(total, count, worst)])
        total, count, worst = sum(p[0] for p in parts), sum(p[1] for p in parts), max(p[2] for p in parts)
    if count == 0:
        return {}
    return {"rollout/sampling_logp_diff_mean": total / count, "rollout/sampling_logp_diff_max": worst}


def _mean_over_ranks(comm: Collective, sums: dict[str, float], count: int) -> dict[str, float]:
    """Per-micro-batch monitoring metrics (clip_frac, gate_mean, ...) averaged over all ranks' micro-batches."""
    parts = comm.gather_lists([(sums, count)])
    total = sum(c for _, c in parts)
    keys = sorted({k for s, _ in parts for k in s})
    return {f"rl/{k}": sum(s.get(k, 0.0) for s, _ in parts) / max(total, 1) for k in keys}
