"""Stage 2: RL rounds. One round = rollout -> self-analysis -> old/teacher/ref log-probs -> PPO update.

    python -m seed_core.stages.rl --config params.yaml --init data/sft/checkpoint --out data/rl/seed

Each round writes ``round_XXX/`` (trajectories, annotations, metrics, DONE) atomically: it is built in a
temporary directory and swapped in at the end, so a killed round leaves nothing a rerun mistakes for done.

Checkpoints are written only where something reads them (``RoundCarry``): rounds run by ``run_rl`` hand the
live model and optimizer to the next round in memory; ``round_XXX/checkpoint`` (weights + optimizer state) is
written only at resume points, every ``rl.save_every`` rounds and at the last round (raising ``rl.rounds``
continues from it); after other rounds ``round_XXX/weights`` (no optimizer state, never resumed from) is
written only when vLLM engines load the next round's weights from disk. Older round checkpoints and weights
are deleted once a newer one exists. A rerun restarts after the newest resume point
(finished rounds after it are redone: their end state was never written). A round run on its own
(``--round``, ``run_rl_round`` without a carry) is always a resume point.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from seed_core.algorithms import ALGORITHMS, effective_config, effective_tags, effective_values
from seed_core.config import SeedConfig
from seed_core.data_gen.task_sets import require_tasks, task_seed, write_tasks
from seed_core.envs import make_env
from seed_core.lineage.resume import StaleRoundsError, check_rounds, rl_fingerprint
from seed_core.loader import config_from_args, stage_errors, stage_parser
from seed_core.modeling.models import load_policy
from seed_core.registries import BACKENDS
from seed_core.repro.numerics import write_resolved
from seed_core.rollout.backends import make_backend
from seed_core.rollout.collector import rollout, rollout_metrics
from seed_core.runtime.io import (DataFileError, atomic_write_text, read_metrics, swap_dir, write_json,
                                  write_records)
from seed_core.runtime.logs import Progress
from seed_core.runtime.services import ServiceUnavailableError, check_services
from seed_core.skills.contexts import TEACHER_CONTEXTS, hindsight_skills, make_encoders, static_skills
from seed_core.stages import rl_analyzer
from seed_core.stages.weight_sync import StaleEngineWeightsError, check_weight_sync
from seed_core.tracking import NullTracker, Tracker
from seed_core.trainer.checkpoint import ADAPTER_DIR, link_tree
from seed_core.trainer.distributed import Collective
from seed_core.trainer.optim import build_optimizer
from seed_core.trainer.rl_step import rl_update
from seed_core.trainer.samples import build_samples, gather_samples
from seed_core.trainer.scale import (apply_lora, check_layout, load_optimizer, make_accelerator, prepare_reference,
                                     save_policy)
from seed_core.types import AnnotationRecord, StepRecord

log = logging.getLogger(__name__)


def round_dir(out_dir: Path, round_idx: int) -> Path:
    return Path(out_dir) / f"round_{round_idx:03d}"


def _start_checkpoint(out_dir: Path, round_idx: int, init_checkpoint: Path) -> Path:
    if round_idx == 0:
        return Path(init_checkpoint)
    prev = round_dir(out_dir, round_idx - 1)
    if not (prev / "DONE").is_file():
        raise RuntimeError(f"round {round_idx} needs {prev} to be finished first; run the rounds in order")
    return prev / "checkpoint"


@dataclass
class RoundCarry:
    """The live training state one round hands to the next in the same process (``run_rl``, the flow), so
    rounds between resume points write no checkpoint. ``state`` is taken while a round runs and put back only
    when it finished, so a failed round never leaves a half-updated model behind."""

    round_idx: int = -1
    """The round whose end state ``state`` holds (-1: none)."""
    trimmed: bool = False
    """Whether the first use already dropped the finished rounds nothing can continue from (``trim_rounds``)."""
    state: dict[str, Any] | None = None
    """accelerator, policy, optimizer, ref (the reference model or None)."""


def is_resume_point(cfg: SeedConfig, round_idx: int) -> bool:
    """Rounds that write weights + optimizer state: every ``rl.save_every``-th (1-based) and the last."""
    every = cfg.rl.save_every
    return round_idx == cfg.rl.rounds - 1 or (every > 0 and (round_idx + 1) % every == 0)


def _resumable(path: Path) -> bool:
    """A finished round with a checkpoint (written with its optimizer state unless made by hand)."""
    return (path / "checkpoint" / "config.json").is_file() and (path / "DONE").is_file()


def trim_rounds(out_dir: Path) -> list[str]:
    """Delete the finished rounds after the newest resume point (their end state was kept in memory only, so
    nothing can continue from them); returns their names. Round 0 starts from --init, so with no resume point
    every finished round goes."""
    out_dir = Path(out_dir)
    done = sorted(p.parent for p in out_dir.glob("round_*/DONE"))
    points = [p for p in done if _resumable(p)]
    newest = points[-1].name if points else ""
    dropped = [p for p in done if p.name > newest]
    for path in dropped:
        shutil.rmtree(path)
    return [p.name for p in dropped]


def _prune_checkpoints(out_dir: Path, round_idx: int) -> None:
    """Delete what nobody reads after round ``round_idx``: every round checkpoint but the newest (the resume
    point a rerun restarts from) and every ``weights/`` but this round's (the next round's vLLM source)."""
    current = round_dir(out_dir, round_idx).name
    points = sorted(p.parent.name for p in Path(out_dir).glob("round_*/checkpoint") if p.parent.name <= current)
    for ckpt in [*Path(out_dir).glob("round_*/checkpoint"), *Path(out_dir).glob("round_*/analyzer")]:
        if ckpt.parent.name in points[:-1]:
            shutil.rmtree(ckpt, ignore_errors=True)
    for weights in Path(out_dir).glob("round_*/weights"):
        if weights.parent.name < current:
            shutil.rmtree(weights, ignore_errors=True)


@dataclass
class RoundState:
    """What one round's phases hand each other (``run_rl_round``): the live training state, then what each phase
    adds (the tasks and their rollouts, the analyses, the metrics so far)."""

    cfg: SeedConfig
    """The effective config (``effective_config``: the algorithm's fixed values applied)."""
    round_idx: int
    algorithm: Any
    """The ``Algorithm`` record of ``cfg.rl.algorithm``."""
    seed: int
    """``task_seed(cfg, "rl", round_idx)``: torch's seed for the round, its tasks and (plus the rank) its rollouts."""
    t_start: float
    accelerator: Any
    policy: Any
    optimizer: Any
    ref: Any
    """The reference model of the KL term, or None (``rl.kl_coef`` = 0)."""
    comm: Any = None
    backend: Any = None
    env: Any = None
    all_tasks: list[Any] = field(default_factory=list)
    """The round's tasks; ``tasks``: this process's share of them."""
    tasks: list[Any] = field(default_factory=list)
    version: str = ""
    library: Any = None
    """The static skill library (algorithms whose skills are static), else None."""
    records: list[StepRecord] = field(default_factory=list)
    """This process's rollouts; after ``_update``, every process's (the round's records)."""
    annotations: list[AnnotationRecord] = field(default_factory=list)
    """This process's analyses, likewise."""
    metrics: dict[str, float] = field(default_factory=dict)
    governance: dict[str, Any] = field(default_factory=dict)
    """The analyzer governance's state (``seed_core.stages.rl_analyzer``): own weights, panel, skill gains."""


def run_rl_round(
    cfg: SeedConfig,
    round_idx: int,
    init_checkpoint: Path,
    out_dir: Path,
    analyzer_checkpoint: Path | None = None,
    tracker: Tracker | None = None,
    fingerprint: str | None = None,
    carry: RoundCarry | None = None,
) -> dict[str, float]:
    """Run RL iteration ``round_idx`` of ``cfg.rl.algorithm``; returns (and saves) its metrics.

    Finished rounds in ``out_dir`` are reused only when they were made from the same config and starting
    checkpoint (``rl_fingerprint``, computed here unless the caller passes it); else ``StaleRoundsError``.
    ``carry``: the previous round's live state (see the module docstring); without one the round starts from
    the previous round's checkpoint on disk and writes its own (a resume point).

    The phases, in order: set up (``_set_up``), play (``_play``: the policy's rollouts), analyze (``_analyze``:
    the analyzer's skills), score (``_score``: step samples with their scores and teacher prompts), update
    (``_update``: ``rl_update``, the loss of ``seed_core.trainer.rl_step``) and persist (``_persist``)."""
    tracker = tracker or NullTracker()
    cfg = effective_config(cfg)  # the algorithm's fixed values applied: what is used is what is logged
    out_dir = Path(out_dir)
    final = round_dir(out_dir, round_idx)
    if (finished := _finished_round(cfg, round_idx, init_checkpoint, out_dir, fingerprint, carry)) is not None:
        return finished
    algorithm = ALGORITHMS.get(cfg.rl.algorithm)
    carried = carry.state if carry is not None and carry.round_idx == round_idx - 1 else None
    start = None if carried else _resume_from(cfg, out_dir, round_idx, init_checkpoint)
    check_services(cfg, analyzer=cfg.annotate.client if algorithm.analyzer == "annotate" else algorithm.analyzer)
    state = _set_up(cfg, round_idx, algorithm, init_checkpoint, start, carry if carried else None)
    rl_analyzer.set_up(state, start, out_dir, carried.get("governance") if carried else None)
    _play(state)
    rl_analyzer.analyze(state, analyzer_checkpoint, init_checkpoint)
    _update(state, _score(state), init_checkpoint)
    _persist(state, out_dir, final, carry, tracker)
    return state.metrics


def _finished_round(cfg: SeedConfig, round_idx: int, init_checkpoint: Path, out_dir: Path, fingerprint: str | None,
                    carry: RoundCarry | None) -> dict[str, float] | None:
    """The metrics of round ``round_idx`` when it is finished already, else None; refuses finished rounds of other
    inputs (``check_rounds``) and, on a process's first round, drops those nothing can continue from."""
    check_rounds(out_dir, fingerprint or rl_fingerprint(cfg, init_checkpoint))
    if carry is not None and not carry.trimmed:  # first round of this process: no end state in memory yet
        trim_rounds(out_dir)
        carry.trimmed = True
    final = round_dir(out_dir, round_idx)
    return read_metrics(final / "metrics.json") if (final / "DONE").is_file() else None


def _resume_from(cfg: SeedConfig, out_dir: Path, round_idx: int, init_checkpoint: Path) -> Path:
    """The checkpoint a round without a carry starts from: --init for round 0, else the previous round's, which
    must be a resume point."""
    start = _start_checkpoint(out_dir, round_idx, init_checkpoint)
    if round_idx > 0 and not _resumable(start.parent):
        raise RuntimeError(f"{start.parent} finished without a checkpoint (not a resume point: rl.save_every = "
                           f"{cfg.rl.save_every}); run the rounds with `python -m seed_core.stages.rl` (no --round), which "
                           "restarts after the newest resume point")
    return start


def _set_up(cfg: SeedConfig, round_idx: int, algorithm: Any, init_checkpoint: Path, start: Path | None,
            carry: RoundCarry | None) -> RoundState:
    """Seed torch with the round's seed, then take the training state from ``carry`` (taken: it is put back only
    when the round finished) or load it from ``start`` (``_load_training_state``)."""
    t_start = time.perf_counter()
    seed = task_seed(cfg, "rl", round_idx)
    torch.manual_seed(seed)
    if carry is not None:
        carried, carry.state = carry.state, None
        assert carried is not None
        accelerator, policy, optimizer, ref = (carried[k] for k in ("accelerator", "policy", "optimizer", "ref"))
    else:
        assert start is not None
        accelerator, policy, optimizer, ref = _load_training_state(cfg, round_idx, init_checkpoint, start)
    return RoundState(cfg, round_idx, algorithm, seed, t_start, accelerator, policy, optimizer, ref)


def _load_training_state(cfg: SeedConfig, round_idx: int, init_checkpoint: Path, start: Path) -> tuple[Any, ...]:
    """(accelerator, policy, optimizer, ref) from checkpoint ``start``: the policy (LoRA: base + saved adapter),
    ``rl.optim``'s AdamW(lr, betas (0.9, 0.999), weight_decay) with its saved state, and the frozen reference when
    ``rl.kl_coef`` > 0 (the KL term's pi_ref = --init)."""
    accelerator = make_accelerator(cfg.model)
    check_layout(accelerator, cfg, generates=True)
    resume_lora = cfg.model.lora_rank > 0 and round_idx > 0 and (start / ADAPTER_DIR).is_dir()
    adapter = start / ADAPTER_DIR if resume_lora else None
    # LoRA resumes as base + saved adapter (optimizer moments stay attached); `start` holds the merged weights
    policy = replace(load_policy(cfg.model, init_checkpoint if adapter else start), source=start)
    policy.model = apply_lora(policy.model, cfg.model, adapter)
    ref = load_policy(cfg.model, init_checkpoint, trainable=False).model if cfg.rl.kl_coef > 0 else None
    optimizer = build_optimizer((p for p in policy.model.parameters() if p.requires_grad), cfg.rl)
    policy.model, optimizer = accelerator.prepare(policy.model, optimizer)
    load_optimizer(accelerator, optimizer, start)
    ref = prepare_reference(accelerator, ref) if ref is not None else None
    return accelerator, policy, optimizer, ref


def _play(state: RoundState) -> None:
    """Play: this process's share of the round's ``rl.tasks_per_round`` tasks, ``rl.group_size`` rollouts each
    (seed = the round's + the rank), with the task type's static skill in the prompt for Skill-GRPO."""
    cfg, accelerator, algorithm, seed = state.cfg, state.accelerator, state.algorithm, state.seed
    state.comm = Collective(accelerator)
    # generation runs on the plain module (DDP wraps only forward/backward); same parameters, no copy
    state.backend = make_backend(replace(state.policy, model=accelerator.unwrap_model(state.policy.model)),
                                 cfg.generation)
    state.env = make_env(cfg.env)
    state.all_tasks = require_tasks(state.env.make_tasks("train", cfg.rl.tasks_per_round, seed=seed), cfg, "train",
                                    cfg.rl.tasks_per_round)
    state.tasks = state.all_tasks[accelerator.process_index::accelerator.num_processes]
    state.version = f"{cfg.rl.algorithm}/round_{state.round_idx:03d}"
    if algorithm.skill_source == "static":
        from seed_core.skills.static import for_config

        state.library = for_config(cfg)
    # Skill-GRPO: the policy plays with its task type's static skill in the prompt (§1.10 table)
    shown = {t.task_id: state.library.skill_for(t.task_type, t.task_id) for t in state.tasks} \
        if algorithm.student_skills and state.library is not None else None

    t0 = time.perf_counter()
    state.records = rollout(cfg.env, state.tasks, state.backend, group_size=cfg.rl.group_size,
                            temperature=cfg.generation.temperature, max_new_tokens=cfg.generation.max_new_tokens,
                            seed=seed + accelerator.process_index, policy_version=state.version,
                            group_tag=f"r{state.round_idx}:", skills=shown)
    state.metrics = {"time/rollout_s": time.perf_counter() - t0, **effective_values(cfg.rl, algorithm)}


def _score(state: RoundState) -> Any:
    """Score: the round's step samples, gathered from every process (``RLSamples``): prompt and response ids,
    each step's score (episode return minus ``env.invalid_action_penalty`` for an invalid format) and, for an
    algorithm with a teacher, the teacher prompt of its context with the step's skill (static or hindsight)."""
    cfg, algorithm, policy, records = state.cfg, state.algorithm, state.policy, state.records
    context = TEACHER_CONTEXTS.get(algorithm.context) if algorithm.context is not None else None
    task_of = {t.task_id: t for t in state.tasks}
    skills_of = static_skills(state.library) if state.library is not None else hindsight_skills(
        state.annotations, step_skills=algorithm.step_skills, pairing=context.pairing if context is not None else None,
        tasks={r.traj_id: task_of[r.task_id] for r in records}, judge=getattr(state.env, "judge_skill", None))
    encoders = make_encoders(policy.tokenizer, policy.chat_template_kwargs, cfg.generation.max_prompt_tokens)
    # every rank trains on the whole batch (split evenly inside rl_update), so GRPO groups stay whole
    return gather_samples(build_samples(records, encoders, cfg.env.invalid_action_penalty, context, skills_of),
                          state.comm)


def _update(state: RoundState, samples: Any, init_checkpoint: Path) -> None:
    """Update: ``rl_update`` (L = pg_coef L_PPO(A') - c_ent H + kl_coef KL + opd_coef L_OPD, see
    ``seed_core.trainer.rl_step``), the weight-sync check, then the round's ``rollout/*`` metrics over every
    process's records and its throughput; every metric a float."""
    cfg, metrics = state.cfg, state.metrics
    rl_analyzer.before_update(state, samples)
    metrics.update(rl_update(state.policy.model, state.optimizer, samples, cfg=cfg.rl, algorithm=state.algorithm,
                             pad_id=state.policy.tokenizer.pad_token_id, ref_model=state.ref,
                             accelerator=state.accelerator, seed=state.seed, step=state.round_idx))
    check_weight_sync(cfg, metrics, state.round_idx)  # before anything of this round is written
    metrics["time/round_s"] = time.perf_counter() - state.t_start
    # every process plays its shard of tasks; the round's records are the union over processes
    state.records = state.comm.gather_lists(state.records)
    state.annotations = state.comm.gather_lists(state.annotations)
    rl_analyzer.audit(state)  # the round's analyses, all processes' (analysis/*)
    metrics.update(rollout_metrics(state.records, "rollout"))
    metrics["rl/tokens_per_s"] = metrics.get("rollout/response_tokens", 0.0) / max(metrics["time/round_s"], 1e-9)
    rl_analyzer.after_update(state, init_checkpoint)  # the analyzer's governance step (ema, gated, anchored)
    log.info("rl %s round %d: success rate %.3f, loss %.4f, %.0f s", cfg.rl.algorithm, state.round_idx,
             metrics.get("rollout/success_rate", float("nan")), metrics.get("rl/total_loss", float("nan")),
             metrics["time/round_s"])
    state.metrics = {k: float(v) for k, v in metrics.items()}


def _persist(state: RoundState, out_dir: Path, final: Path, carry: RoundCarry | None, tracker: Tracker) -> None:
    """Persist: ``round_XXX/`` built in a temporary directory and swapped in (the checkpoint at a resume point,
    else the weights where vLLM loads them), older checkpoints pruned, the metrics to the tracker, and the live
    state handed to the next round (``carry``)."""
    cfg, accelerator, policy, round_idx = state.cfg, state.accelerator, state.policy, state.round_idx
    work = final.with_name(f".{final.name}.tmp")  # a killed attempt leaves only this; it is rebuilt
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    if carry is None or is_resume_point(cfg, round_idx):
        save_policy(accelerator, policy.model, policy.tokenizer, work / "checkpoint", state.optimizer)
        rl_analyzer.save(state, work)  # an own-weights analyzer resumes from here too
        policy = replace(policy, source=final / "checkpoint")
    elif BACKENDS.entry(cfg.generation.backend).reloads_weights:  # the engines load the next round's weights
        save_policy(accelerator, policy.model, policy.tokenizer, work / "weights")
        policy = replace(policy, source=final / "weights")
    if accelerator.is_main_process:
        write_records(state.records, work / "trajectories.parquet", StepRecord)
        write_records(state.annotations, work / "annotations.parquet", AnnotationRecord)
        write_tasks(state.all_tasks, work / "tasks.json")
        write_json(work / "metrics.json", state.metrics)
        atomic_write_text(work / "DONE", "ok\n")
        swap_dir(work, final)
        _prune_checkpoints(out_dir, round_idx)
        tracker.log_metrics(state.metrics, step=round_idx)
        if round_idx == 0:
            tracker.log_params(effective_tags(cfg.rl, state.algorithm))
    accelerator.wait_for_everyone()
    if carry is not None:
        carry.round_idx = round_idx
        carry.state = {"accelerator": accelerator, "policy": policy, "optimizer": state.optimizer, "ref": state.ref,
                       "governance": state.governance}


def finalize_rl(cfg: SeedConfig, out_dir: Path) -> dict[str, float]:
    """Write the final checkpoint, ``curve.csv`` (one row per round) and the stage ``metrics.json``."""
    import pandas as pd

    cfg = effective_config(cfg)
    out_dir = Path(out_dir)
    last = round_dir(out_dir, cfg.rl.rounds - 1)
    if not (last / "DONE").is_file():
        raise RuntimeError(f"{last} is not finished; run all {cfg.rl.rounds} rounds before finalizing")
    rows = [{"round": i, **read_metrics(round_dir(out_dir, i) / "metrics.json")} for i in range(cfg.rl.rounds)]
    curve = pd.DataFrame(rows)
    atomic_write_text(out_dir / "curve.csv", curve.to_csv(index=False))
    if not (last / "checkpoint").is_dir():  # pruned: later rounds of a longer run exist (rl.rounds was lowered)
        raise RuntimeError(f"{last}/checkpoint was pruned because {out_dir} holds later rounds; set rl.rounds back "
                           f"to at least {len(list(out_dir.glob('round_*')))} or delete {out_dir} to start over")
    link_tree(last / "checkpoint", out_dir / "checkpoint")  # weights and tokenizer only
    # the last round keeps its optimizer state: raising rl.rounds later continues AdamW where it stopped
    summary = {
        "algorithm_rounds": float(cfg.rl.rounds),
        "final_train_success_rate": float(rows[-1].get("rollout/success_rate", 0.0)),
        "mean_train_success_rate": float(curve.get("rollout/success_rate", pd.Series([0.0])).mean()),
        "total_time_s": float(curve.get("time/round_s", pd.Series([0.0])).sum()),
    }
    if "rl/gate_mean" in curve:
        summary["mean_gate"] = float(curve["rl/gate_mean"].mean())
    write_json(out_dir / "metrics.json", summary)
    write_resolved(cfg, out_dir / "resolved_config.json")  # with the numerics it ran under
    return summary


def run_rl(cfg: SeedConfig, init_checkpoint: Path, out_dir: Path, analyzer_checkpoint: Path | None = None,
           tracker: Tracker | None = None) -> dict[str, float]:
    """All rounds (resuming after the last finished one), then ``finalize_rl``."""
    cfg = effective_config(cfg)
    fingerprint = rl_fingerprint(cfg, init_checkpoint)  # hashes the starting checkpoint once per run
    carry = RoundCarry()
    with Progress(log, f"rl {cfg.rl.algorithm}", cfg.rl.rounds, "round", every_s=0.0, bar=False) as rounds:
        for i in range(cfg.rl.rounds):
            run_rl_round(cfg, i, init_checkpoint, out_dir, analyzer_checkpoint, tracker, fingerprint, carry)
            rounds.update(1)
    return finalize_rl(cfg, out_dir)


def main() -> None:
    parser = stage_parser("Stage 2: RL rounds (GRPO / SEED / ablations)")
    parser.add_argument("--init", required=True, help="starting checkpoint (Stage-1 SFT); also the KL reference")
    parser.add_argument("--out", required=True, help="output directory, e.g. data/rl/seed")
    parser.add_argument("--analyzer-checkpoint", default=None, help="frozen analyzer for seed_static/sdar/grpo_opsd")
    parser.add_argument("--round", type=int, default=None, help="run only this round (it needs the previous one)")
    args = parser.parse_args()
    cfg = config_from_args(args)
    ckpt = Path(args.analyzer_checkpoint) if args.analyzer_checkpoint else None
    known = (DataFileError, StaleRoundsError, ServiceUnavailableError, StaleEngineWeightsError)
    with stage_errors("rl", *known):  # the message says the fix
        if args.round is not None:
            print(run_rl_round(cfg, args.round, Path(args.init), Path(args.out), ckpt))
        else:
            print(run_rl(cfg, Path(args.init), Path(args.out), ckpt))


if __name__ == "__main__":
    main()
