"""The analyze phase of an RL round and the analyzer's governance around the update (issue 39).

``analyze``: the algorithm's analyzer writes an episode skill for each trajectory this process played; ``audit``,
once every process's analyses are gathered, audits the round's (``seed_core.analyzer.audit``: ``analysis/*``, one
warning line when the parse rate is low). Who analyzes is the algorithm's record: no one, the environment's oracle,
the Stage-1 client, or the policy's own weights under one governance mode (``seed_core.analyzer.governance``: live,
frozen, ema, gated, anchored).

Around the update (``before_update`` / ``after_update``): ``anchored`` scores each trajectory's skill gain under
pi_old before the update and takes its anchor step after it; ``ema`` moves its weights toward the updated policy;
``gated`` audits the updated policy on its fixed panel of held-out trajectories (``audit/*``) and takes it as the
next round's analyzer only when the rule of ``refresh_passes`` holds. The panel: one episode on each of
``rl.audit_panel_tasks`` tasks of the environment's first held-out split, played once by the round-0 policy (the
Stage-1 checkpoint) at ``generation.temperature`` under its own RNG (the round's rollouts are unchanged), and
kept in ``<out>/audit_panel/`` for resumed runs.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from seed_core.analyzer.annotate import annotate_trajectories
from seed_core.analyzer.audit import audit_metrics, token_budget, warn_if_unsound
from seed_core.analyzer.clients import CLIENTS, policy_client
from seed_core.analyzer.governance import (ANALYZER_DIR, GOVERNANCE, AnalyzerWeights, Governance, GovernanceError,
                                           check_supported, ema_update, refresh_passes)
from seed_core.analyzer.parse import skill_metrics
from seed_core.data_gen.task_sets import held_out_split, read_tasks, task_seed, write_tasks
from seed_core.envs import make_env
from seed_core.registries import BACKENDS
from seed_core.rollout.backends import make_backend
from seed_core.rollout.collector import group_by_trajectory, rollout
from seed_core.runtime.io import read_records, write_records
from seed_core.trainer.anchor_step import analysis_batch, anchor_update, trajectory_gains
from seed_core.trainer.scale import is_fsdp
from seed_core.types import StepRecord

log = logging.getLogger(__name__)

PANEL_DIR = "audit_panel"


def governance_of(algorithm: Any) -> Governance | None:
    """The governance mode of an algorithm whose analyzer is the policy's own weights, else None."""
    name = algorithm.analyzer_governance
    return GOVERNANCE.get(name) if name else None


def set_up(state: Any, start: Path | None, out_dir: Path, carried: dict[str, Any] | None) -> None:
    """``state.governance``: the carried one, else (own-weights modes) the analyzer's weights from the previous
    resume point's ``analyzer/`` or, in round 0, a copy of the starting policy, and the gated mode's panel."""
    mode = governance_of(state.algorithm)
    if mode is None or not mode.own_weights:
        return
    if carried is not None:
        state.governance = carried
        return

    cfg = state.cfg
    check_supported(mode, cfg, is_fsdp(state.accelerator))
    if not BACKENDS.entry(cfg.generation.backend).in_process:
        raise GovernanceError(f"the {mode.name!r} analyzer generates from weights it keeps in memory: set "
                              f"generation.backend to one that generates in this process, hf (it is "
                              f"{cfg.generation.backend!r})")
    plain = state.accelerator.unwrap_model(state.policy.model)
    if state.round_idx == 0:
        weights = AnalyzerWeights.copy_of(plain)
        weights.refreshed_round = 0
    else:
        assert start is not None
        folder = start.parent / ANALYZER_DIR
        if not (folder / "config.json").is_file():
            raise GovernanceError(f"{folder} is missing: the resume point of a {mode.name!r} analyzer keeps its weights "
                                  f"there; delete {out_dir} to start the rounds over")
        weights = AnalyzerWeights.load(cfg.model, folder)
    state.governance = {"weights": weights}
    if mode.name == "gated":
        state.governance["panel"] = _panel(state, out_dir)
        if not weights.audit:
            weights.audit = _audit(state, weights.model)


def _panel(state: Any, out_dir: Path) -> tuple[list[StepRecord], dict[str, Any]]:
    """The gated mode's fixed held-out panel (module docstring): read from ``<out>/audit_panel`` or played now."""
    folder = Path(out_dir) / PANEL_DIR
    if (folder / "tasks.json").is_file():
        return read_records(folder / "trajectories.parquet", StepRecord), read_tasks(folder / "tasks.json")
    cfg = state.cfg
    env = make_env(cfg.env)
    seed = task_seed(cfg, "audit", 0)
    tasks = env.make_tasks(held_out_split(env), cfg.rl.audit_panel_tasks, seed=seed)
    backend = make_backend(replace(state.policy, model=state.accelerator.unwrap_model(state.policy.model)),
                           cfg.generation)
    with torch.random.fork_rng():
        records = rollout(cfg.env, tasks, backend, group_size=1, temperature=cfg.generation.temperature,
                          max_new_tokens=cfg.generation.max_new_tokens, seed=seed, policy_version="audit-panel",
                          group_tag="audit:", progress=False)
    if state.accelerator.is_main_process:
        folder.mkdir(parents=True, exist_ok=True)
        write_records(records, folder / "trajectories.parquet", StepRecord)
        write_tasks(tasks, folder / "tasks.json")
    return records, {t.task_id: t for t in tasks}


def _audit(state: Any, model: torch.nn.Module) -> dict[str, float]:
    """Parse rate, failure shares and correctness of ``model``'s analyses of the panel (unprefixed keys)."""
    cfg = state.cfg
    records, tasks = state.governance["panel"]
    env = state.env if state.env is not None else make_env(cfg.env)  # round 0's first audit runs before play
    backend = make_backend(replace(state.policy, model=model), cfg.generation)
    with torch.random.fork_rng():
        notes = annotate_trajectories(group_by_trajectory(records), tasks, policy_client(cfg, backend=backend),
                                      parse_attempts=cfg.annotate.parse_attempts, policy_version="audit", env=env)
    found = audit_metrics(env, notes, records, tasks, cfg.rl.analyzer_max_new_tokens, "panel")
    return {k.split("/", 1)[1]: v for k, v in found.items()}


def analyze(state: Any, analyzer_checkpoint: Path | None, init_checkpoint: Path) -> None:
    """This process's analyses by the algorithm's analyzer (module docstring); ``audit`` grades the round's."""
    cfg, algorithm = state.cfg, state.algorithm
    t0 = time.perf_counter()
    if algorithm.analyzer is not None:
        frozen, backend = None, state.backend  # only the ``checkpoint`` analyzer reads rl.analyzer_checkpoint
        if algorithm.analyzer == "checkpoint":
            frozen = analyzer_checkpoint or Path(cfg.rl.analyzer_checkpoint or init_checkpoint)
        if "weights" in state.governance:  # ema / gated: their own weights, not the policy's
            backend = make_backend(replace(state.policy, model=state.governance["weights"].model),
                                   cfg.generation)
        # ``annotate``: the Stage-1 analyzer (OPID's external LLM; the offline ``oracle`` by default)
        client_name = cfg.annotate.client if algorithm.analyzer == "annotate" else algorithm.analyzer
        client = CLIENTS.get(client_name)(cfg, env=state.env, backend=backend, checkpoint=frozen)
        state.annotations = annotate_trajectories(
            group_by_trajectory(state.records), {t.task_id: t for t in state.tasks}, client,
            parse_attempts=cfg.annotate.parse_attempts, policy_version=state.version, env=state.env,
            max_step_skills=cfg.rl.max_step_skills if algorithm.step_skills else 0)
    state.metrics["time/analysis_s"] = time.perf_counter() - t0


def audit(state: Any) -> None:
    """The round's ``analysis/*`` audit over every process's analyses: called once ``state.records`` and
    ``state.annotations`` are gathered (each process analyzes only the trajectories it played, so a rank's own
    share would describe 1/world of the round; the rehearsal at 609a0d8 logged rank 1's 0% beside rank 0's 100%).
    The warning line is the main process's."""
    cfg, algorithm = state.cfg, state.algorithm
    if algorithm.analyzer is None:
        return
    annotations = state.annotations
    state.metrics.update(audit_metrics(state.env, annotations, state.records,
                                       {t.task_id: t for t in state.all_tasks}, token_budget(cfg, algorithm),
                                       "analysis"))
    state.metrics.update(skill_metrics([a.episode_skill for a in annotations if a.ok], "analysis"))
    if state.accelerator.is_main_process:
        warn_if_unsound(state.metrics, cfg.rl.algorithm, state.round_idx)


def before_update(state: Any, samples: Any) -> None:
    """``anchored``: each trajectory's skill gain under pi_old (``trajectory_gains``), before the update moves it."""
    mode = governance_of(state.algorithm)
    if mode is None or not mode.anchored:
        return

    traj_ids = state.comm.gather_lists([r.traj_id for r in state.records if len(r.response_ids) > 0])
    state.governance["gains"] = trajectory_gains(state.policy.model, samples, traj_ids,
                                                 state.policy.tokenizer.pad_token_id, state.cfg.rl.micro_batch_size)


def after_update(state: Any, init_checkpoint: Path) -> None:
    """The mode's step after the RL update (module docstring); its metrics join the round's."""
    mode = governance_of(state.algorithm)
    if mode is None:
        return
    cfg, metrics = state.cfg, state.metrics
    plain = state.accelerator.unwrap_model(state.policy.model)
    if mode.name == "ema":
        ema_update(state.governance["weights"].model, plain, cfg.rl.analyzer_ema_rate)
    elif mode.name == "gated":
        metrics.update(_gated_refresh(state, plain))
    elif mode.anchored:
        metrics.update(_anchor_step(state, init_checkpoint))


def _gated_refresh(state: Any, plain: torch.nn.Module) -> dict[str, float]:
    """Audit the updated policy on the panel; refresh the analyzer to it iff ``refresh_passes``."""
    weights = state.governance["weights"]
    candidate = _audit(state, plain)
    passed = refresh_passes(candidate, weights.audit, state.cfg.rl.audit_tolerance)
    if passed:
        weights.model.load_state_dict(plain.state_dict())
        weights.refreshed_round, weights.audit = state.round_idx + 1, candidate
    out = {f"audit/candidate_{k}": v for k, v in candidate.items()}
    out.update({f"audit/{k}": v for k, v in weights.audit.items()})
    out.update({"audit/refreshed": float(passed), "audit/analyzer_round": float(weights.refreshed_round)})
    return out


def _anchor_step(state: Any, init_checkpoint: Path) -> dict[str, float]:
    """One optimizer step on the anchor loss of the round's analyses (``seed_core.trainer.anchor_step``)."""
    cfg, policy = state.cfg, state.policy
    ref = state.ref
    if ref is None and cfg.rl.anchor_kl_coef > 0:  # the KL anchor's pi_0 without the KL term's reference
        from seed_core.modeling.models import load_policy

        ref = load_policy(cfg.model, init_checkpoint, trainable=False).model
    won = {r.traj_id: bool(r.success) for r in state.records}
    batch = analysis_batch(state.annotations, policy.tokenizer, policy.chat_template_kwargs,
                           state.governance.get("gains", {}), won)
    return anchor_update(policy.model, state.optimizer, batch, ref_model=ref, pad_id=policy.tokenizer.pad_token_id,
                         sg_coef=cfg.rl.anchor_coef, kl_coef=cfg.rl.anchor_kl_coef, micro=cfg.rl.micro_batch_size,
                         grad_clip=cfg.rl.grad_clip, accelerator=state.accelerator)


def save(state: Any, work: Path) -> None:
    """At a resume point: an own-weights analyzer's weights and state into ``work/analyzer``."""
    if "weights" in state.governance and state.accelerator.is_main_process:
        state.governance["weights"].save(state.policy.tokenizer, work)
