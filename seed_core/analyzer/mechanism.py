"""Pre-flight of SEED's mechanism: can the teacher teach, and can the loss carry it, before any RL (issue 25).

    seed preflight                          # the workspace's Stage-1 checkpoint under params.yaml
    seed preflight --preset presets/X.yaml --heldout 32 --tasks 8 --json preflight.json

SEED's distillation can only beat GRPO where a skill in context changes the actions, the skills the policy
writes are right, and the distillation gradient is not negligible next to the policy gradient (the gain of
on-policy self-distillation is linear in the initial teacher-student gap, intercept ~0: seed-algorithm.md §8).
The measures, on the policy that RL starts from (the Stage-1 checkpoint):

* ``p_expert`` = {plain, matched, mismatched}: P(expert action) on held-out states. At every state of the expert's
  episodes on ``heldout`` held-out tasks, P = exp(sum of log pi over the expert response's action-span tokens, given
  the expert's own prefix), averaged over states; under the plain prompt, with the matched skill (the oracle's
  hindsight skill of the same instance's expert episode) and with a mismatched one (``shuffle_skills``: another
  instance's oracle skill that the environment's ``judge_skill`` rejects for this instance: its answer differs).
* ``perf_gap`` = teacher - student held-out success: the policy plays each held-out task plainly (student), then
  again with the oracle's hindsight skill of that episode in its prompt (teacher), at ``generation.eval_temperature``.
* ``skill_correct``: after Stage 1, the share of round-0 trajectories whose self-written analysis ``judge_skill``
  accepts (``skill_correctness``; one that does not parse counts as wrong).
* ``grad_ratio`` = ||grad(lambda L_distill)|| / ||grad L_PG||: round 0, at theta_old, on one mini-batch, with the
  algorithm's lambda and beta (``seed_core.trainer.rl_step.distill_grad_ratio``).
* ``zero_adv_groups``: the share of round-0 GRPO groups whose every advantage is 0.
* ``decision``: gap and gate on decision (action-span) and format tokens, round 0, teacher = the self-written
  skill (``seed_core.trainer.mechanism``).

Round 0 is what ``rl@<algorithm>`` round 0 plays: the train tasks of ``task_seed(cfg, "rl", 0)`` (``tasks`` of
them), ``rl.group_size`` episodes each, analysed by the policy itself. Every threshold of the go/no-go is one row of
``THRESHOLDS``; ``PreflightReport.block()`` is the ``"preflight"`` block of ``benchmarks/results/mechanism.json``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from seed_core.algorithms import ALGORITHMS, effective_rl, loss_kwargs
from seed_core.analyzer.annotate import annotate_trajectories
from seed_core.analyzer.audit import skill_correct_metrics, skill_correctness  # noqa: F401  (re-exported)
from seed_core.analyzer.clients import CLIENTS
from seed_core.config import SeedConfig
from seed_core.data_gen.task_sets import held_out_split, task_seed
from seed_core.envs import make_env
from seed_core.losses import ADVANTAGES
from seed_core.modeling.models import load_policy
from seed_core.rollout.backends import make_backend
from seed_core.rollout.collector import group_by_trajectory, rollout
from seed_core.rollout.expert import play_expert
from seed_core.runtime.io import KnownError
from seed_core.skills.contexts import TEACHER_CONTEXTS, hindsight_skills, make_encoders, shuffle_skills
from seed_core.skills.insert import insert_episode_skill
from seed_core.trainer.logprobs import pad_rows, score_in_chunks
from seed_core.trainer.mechanism import (NO_SPAN, decision_span, pooled_split, span_mask, split_sums,
                                         zero_advantage_groups)
from seed_core.trainer.rl_step import compute_reference_logprobs, distill_grad_ratio, grad_ratio_rows
from seed_core.trainer.samples import build_samples
from seed_core.types import StepRecord, Task

MISMATCH_MARGIN = 0.05
"""A mismatched skill "does not raise" P(expert action): mismatched - plain <= this."""


class PreflightInputError(KnownError, ValueError):
    """The pre-flight cannot run on what it was given (no checkpoint, an unknown threshold); the message says why."""


@dataclass(frozen=True)
class Threshold:
    """One go/no-go condition: ``measure op value``."""

    measure: str
    op: str
    """``>=`` or ``<=``."""
    value: float
    says: str

    def passes(self, value: float | None) -> bool:
        """A measure that could not be taken (None, NaN) fails."""
        if value is None or math.isnan(value):
            return False
        return value >= self.value if self.op == ">=" else value <= self.value


THRESHOLDS: tuple[Threshold, ...] = (
    Threshold("p_expert_lift", ">=", 0.30, "a matched skill raises P(expert action) over plain"),
    Threshold("p_expert_control", "<=", MISMATCH_MARGIN, "a mismatched skill does not raise P(expert action)"),
    Threshold("perf_gap", ">=", 0.30, "the teacher's held-out success exceeds the student's"),
    Threshold("skill_correct", ">=", 0.80, "self-written skills are correct after Stage 1"),
    Threshold("grad_ratio", ">=", 0.20, "the distillation gradient is a share of the PG gradient at the chosen lambda"),
    Threshold("zero_adv_groups", ">=", 0.40, "round-0 groups have zero advantage"),
)
"""The go/no-go of issue 25, one row per condition (p_expert_lift = matched - plain; p_expert_control =
mismatched - plain; perf_gap in success-rate units: 0.30 = 30 points)."""


def override_thresholds(thresholds: Sequence[Threshold], items: Sequence[str]) -> tuple[Threshold, ...]:
    """``["perf_gap=0.1"]`` -> the table with that value replaced; an unknown name or a non-number is refused."""
    table = {t.measure: t for t in thresholds}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or name.strip() not in table:
            raise PreflightInputError(f"--threshold {item!r}: expected NAME=VALUE with NAME one of {', '.join(table)}")
        try:
            table[name.strip()] = replace(table[name.strip()], value=float(text))
        except ValueError:
            raise PreflightInputError(f"--threshold {item!r}: {text!r} is not a number") from None
    return tuple(table.values())


@dataclass
class PreflightReport:
    """The measures and the thresholds they were judged by."""

    measures: dict[str, Any]
    thresholds: tuple[Threshold, ...] = THRESHOLDS
    notes: dict[str, str] = field(default_factory=dict)
    """Why a measure is missing (measure -> reason)."""

    def value(self, measure: str) -> float | None:
        p = self.measures.get("p_expert") or {}
        if measure in ("p_expert_lift", "p_expert_control"):
            other = p.get("matched" if measure == "p_expert_lift" else "mismatched")
            return None if other is None or p.get("plain") is None else other - p["plain"]
        return self.measures.get(measure)

    def checks(self) -> list[tuple[Threshold, float | None, bool]]:
        return [(t, self.value(t.measure), t.passes(self.value(t.measure))) for t in self.thresholds]

    @property
    def failed(self) -> list[str]:
        return [t.measure for t, _, ok in self.checks() if not ok]

    @property
    def passed(self) -> bool:
        return not self.failed

    def lines(self) -> list[str]:
        """One line per threshold (measure, value, threshold, PASS/FAIL), then the verdict."""
        out = []
        for t, value, ok in self.checks():
            shown = "n/a" if value is None or math.isnan(value) else f"{value:.3f}"
            why = f"  ({self.notes[t.measure]})" if t.measure in self.notes and not ok else ""
            out.append(f"{'PASS' if ok else 'FAIL'}  {t.measure} = {shown}  (needs {t.op} {t.value:g}: {t.says}){why}")
        verdict = "GO: every pre-flight threshold passes" if self.passed else \
            f"NO-GO: {len(self.failed)} of {len(self.thresholds)} thresholds fail: {', '.join(self.failed)}"
        return out + [verdict]

    def block(self) -> dict[str, Any]:
        """The ``"preflight"`` block of ``benchmarks/results/mechanism.json`` (non-finite numbers as None)."""
        def clean(v: Any) -> Any:
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            return None if isinstance(v, float) and not math.isfinite(v) else v

        out = clean(dict(self.measures))
        out["thresholds"] = {t.measure: {"op": t.op, "value": t.value, "passed": ok} for t, _, ok in self.checks()}
        out["passed"], out["failed"] = self.passed, self.failed
        return out


# --- arithmetic (hand-checked in tests/unit/test_preflight_mechanism.py) ----------------------------------------


def action_probability(logprobs: Sequence[float], span: tuple[int, int]) -> float:
    """P(action) = exp(sum_{t in [a, b)} log pi(y_t | x, y_<t)); the span's tokens given the response prefix."""
    a, b = span
    return math.exp(sum(float(x) for x in list(logprobs)[a:b]))


def success_rate(records: Sequence[StepRecord]) -> float:
    """Share of episodes (distinct ``traj_id``) that were won; NaN without episodes."""
    won: dict[str, bool] = {}
    for r in records:
        won[r.traj_id] = won.get(r.traj_id, False) or bool(r.success)
    return sum(won.values()) / len(won) if won else math.nan


# --- held-out measures -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpertState:
    task: Task
    prompt: str
    response: str
    action: str


def expert_states(cfg: SeedConfig, env: Any, tasks: Sequence[Task]) -> tuple[list[ExpertState], dict[str, str]]:
    """Every state of the expert's episode on each task, and the oracle's hindsight skill of that episode
    (task_id -> skill: the matched skill of the task's states)."""
    records = play_expert(cfg.env, tasks)
    by_id = {t.task_id: t for t in tasks}
    states, skills = [], {}
    for steps in group_by_trajectory(records).values():
        task = by_id[steps[0].task_id]
        skills[task.task_id] = env.oracle_skill(task, [r.action for r in steps], steps[-1].success)["episode_skill"]
        states += [ExpertState(task, r.prompt, r.response, r.action) for r in steps]
    return states, skills


def p_expert(model: Any, pad_id: int, enc: Any, states: Sequence[ExpertState], matched: dict[str, str],
             mismatched: dict[str, str], micro_batch_size: int) -> dict[str, Any]:
    """Mean P(expert action) (``action_probability``) over the states that have an action span and both skills,
    under the plain prompt, the matched and the mismatched skill; ``states`` counts them."""
    rows = []
    for s in states:
        ids = enc.raw(s.response)
        span = decision_span(ids, s.action, enc.decode)
        if span != NO_SPAN and s.task.task_id in matched and s.task.task_id in mismatched:
            rows.append((s, ids, span))
    out: dict[str, Any] = {"states": len(rows)}
    skills = {"plain": {}, "matched": matched, "mismatched": mismatched}
    for name, chosen in skills.items():
        prompts = [enc.chat(insert_episode_skill(s.prompt, chosen.get(s.task.task_id, ""))) for s, _, _ in rows]
        scored = score_in_chunks(model, prompts, [ids for _, ids, _ in rows], pad_id, micro_batch_size) if rows else []
        probs = [action_probability(lp.tolist(), span) for lp, (_, _, span) in zip(scored, rows)]
        out[name] = sum(probs) / len(probs) if probs else math.nan
    return out


def success_gap(cfg: SeedConfig, backend: Any, env: Any, tasks: Sequence[Task]) -> dict[str, float]:
    """``student`` / ``teacher`` held-out success (plain; with the oracle's hindsight skill of the plain episode)
    and ``perf_gap`` = teacher - student."""
    def play(skills: dict[str, str] | None, tag: str) -> list[StepRecord]:
        return rollout(cfg.env, tasks, backend, group_size=1, temperature=cfg.generation.eval_temperature,
                       max_new_tokens=cfg.generation.max_new_tokens, seed=cfg.project.seed, policy_version="preflight",
                       group_tag=tag, skills=skills, progress=False)

    plain = play(None, "plain:")
    by_id = {t.task_id: t for t in tasks}
    hindsight = {steps[0].task_id: env.oracle_skill(by_id[steps[0].task_id], [r.action for r in steps],
                                                    steps[-1].success)["episode_skill"]
                 for steps in group_by_trajectory(plain).values()}
    student, teacher = success_rate(plain), success_rate(play(hindsight, "teacher:"))
    return {"student": student, "teacher": teacher, "perf_gap": teacher - student}


# --- round-0 measures --------------------------------------------------------------------------------------------


def round0_measures(cfg: SeedConfig, policy: Any, backend: Any, env: Any, n_tasks: int,
                    algorithm_name: str) -> dict[str, Any]:
    """``skill_correct``, ``zero_adv_groups``, ``grad_ratio``, ``decision`` of the round-0 batch (module docstring)."""
    algorithm = ALGORITHMS.get(algorithm_name)
    seed = task_seed(cfg, "rl", 0)
    tasks = env.make_tasks("train", n_tasks, seed=seed)
    records = rollout(cfg.env, tasks, backend, group_size=cfg.rl.group_size, temperature=cfg.generation.temperature,
                      max_new_tokens=cfg.generation.max_new_tokens, seed=seed, policy_version="preflight/round_000",
                      group_tag="r0:", progress=False)
    by_id = {t.task_id: t for t in tasks}
    analyzer = {"annotate": cfg.annotate.client, "checkpoint": "policy"}.get(algorithm.analyzer or "policy",
                                                                             algorithm.analyzer or "policy")
    client = CLIENTS.get(analyzer)(cfg, env=env, backend=backend)  # round 0: the frozen checkpoint is the policy
    notes = annotate_trajectories(group_by_trajectory(records), by_id, client,
                                  parse_attempts=cfg.annotate.parse_attempts, policy_version="preflight", env=env)
    by_traj = {r.traj_id: by_id[r.task_id] for r in records}
    out: dict[str, Any] = {"skill_correct": skill_correctness(getattr(env, "judge_skill", None), notes, by_traj),
                           "skill_parse_ok": sum(a.ok for a in notes) / max(len(notes), 1)}
    context = TEACHER_CONTEXTS.get(algorithm.context or "hindsight_after_task_line")
    skills_of = hindsight_skills(notes, pairing=context.pairing, tasks=by_traj, judge=getattr(env, "judge_skill", None))
    enc = make_encoders(policy.tokenizer, policy.chat_template_kwargs, cfg.generation.max_prompt_tokens)
    samples = build_samples(records, enc, cfg.env.invalid_action_penalty, context, skills_of)
    out.update(batch_measures(cfg, policy, samples, algorithm, seed))
    return out


def batch_measures(cfg: SeedConfig, policy: Any, samples: Any, algorithm: Any, seed: int) -> dict[str, Any]:
    """``zero_adv_groups``, ``grad_ratio`` (on the first ``rl.mini_batch_size`` rows of a fixed draw) and the
    decision / format split of the gap and gate (teacher vs theta_old on every teacher token) of one batch."""
    import torch

    rl = effective_rl(cfg.rl, algorithm)
    if len(samples) == 0:
        return {"zero_adv_groups": None, "grad_ratio": None, "decision": {}}
    pad_id = policy.tokenizer.pad_token_id
    adv = ADVANTAGES.get(rl.advantage)(samples.scores, samples.group_ids)
    scored = compute_reference_logprobs(policy.model, None, samples, pad_id, rl.micro_batch_size, True,
                                        max_tokens=rl.micro_batch_tokens)
    rows = grad_ratio_rows(len(samples), rl.mini_batch_size, seed)
    ratio = distill_grad_ratio(policy.model, samples, rows, scored, adv, pad_id=pad_id, cfg=rl, algorithm=algorithm)
    width = max(len(r) for r in samples.response_ids)
    teacher, old = pad_rows(scored["teacher"], width), pad_rows(scored["old"], width)
    active = span_mask([(0, len(r)) for r in samples.response_ids], width) * samples.teacher_mask.unsqueeze(1)
    beta = loss_kwargs(rl).get("beta") if algorithm.distill else None
    spans = samples.decision_spans or [(0, 0)] * len(samples)
    sums = split_sums(teacher, old, active, span_mask(spans, width), beta)
    split = pooled_split({f"rl/{k}": v for k, v in sums.items()})
    return {"zero_adv_groups": zero_advantage_groups(adv, samples.group_ids),
            "grad_ratio": ratio.get("rl/grad_ratio"),
            "grad_norm_pg": ratio.get("rl/grad_norm_pg"), "grad_norm_distill": ratio.get("rl/grad_norm_distill"),
            "decision": {k.removeprefix("rl/"): v for k, v in split.items()},
            "teacher_sample_ratio": float(torch.as_tensor(samples.teacher_mask).mean())}


# --- the whole pre-flight ----------------------------------------------------------------------------------------


def check_preflight_args(checkpoint: Path, *, heldout: int, tasks: int, algorithm: str) -> None:
    """``run_preflight``'s arguments, the given values first and the checkpoint last (``seed preflight`` checks them
    before any model loads): a ``PreflightInputError`` naming the value, what it may be and the fix."""
    distilling = [name for name in ALGORITHMS.names() if ALGORITHMS.get(name).distill
                  and ALGORITHMS.get(name).skill_source == "hindsight"]
    if algorithm not in distilling:
        raise PreflightInputError(f"--algorithm {algorithm!r} is not an algorithm of the registry that distills from "
                                  f"hindsight skills; choose one of {', '.join(distilling)}")
    if heldout < 2 or tasks < 1:
        raise PreflightInputError(f"--heldout must be >= 2 (a mismatched skill needs another task) and --tasks >= 1; "
                                  f"got {heldout} and {tasks}")
    if not (Path(checkpoint) / "config.json").is_file():
        raise PreflightInputError(f"{checkpoint} is not a model checkpoint (no config.json): run Stage 1 first "
                                  "(`seed stage sft`, or `seed run`), or pass --checkpoint")


def run_preflight(cfg: SeedConfig, checkpoint: Path, *, heldout: int = 32, tasks: int = 8, algorithm: str = "seed",
                  thresholds: Sequence[Threshold] = THRESHOLDS) -> PreflightReport:
    """Every measure of the module docstring on ``checkpoint`` (the Stage-1 SFT output), judged by ``thresholds``.
    ``heldout`` held-out tasks (P(expert action), perf_gap), ``tasks`` round-0 train tasks; ``algorithm``: whose
    lambda, beta and teacher context the round-0 measures use (a distilling one)."""
    checkpoint = Path(checkpoint)
    check_preflight_args(checkpoint, heldout=heldout, tasks=tasks, algorithm=algorithm)
    env = make_env(cfg.env)
    judge = getattr(env, "judge_skill", None)
    policy = load_policy(cfg.model, checkpoint)
    backend = make_backend(policy, cfg.generation)
    held = env.make_tasks(held_out_split(env), heldout, seed=cfg.project.seed)
    states, matched = expert_states(cfg, env, held)
    control = shuffle_skills(matched, {t.task_id: t for t in held}, judge)
    enc = make_encoders(policy.tokenizer, policy.chat_template_kwargs, cfg.generation.max_prompt_tokens)
    measures: dict[str, Any] = {
        "p_expert": p_expert(policy.model, policy.tokenizer.pad_token_id, enc, states, matched, control,
                             cfg.rl.micro_batch_size)}
    gap = success_gap(cfg, backend, env, held)
    measures.update(perf_gap=gap["perf_gap"], success={"student": gap["student"], "teacher": gap["teacher"]})
    measures.update(round0_measures(cfg, policy, backend, env, tasks, algorithm))
    measures["setting"] = {"env": cfg.env.name, "checkpoint": str(checkpoint), "algorithm": algorithm,
                           "heldout": heldout, "tasks": tasks, "mismatch_verified": judge is not None}
    notes = {}
    if judge is None:
        notes["skill_correct"] = f"environment {cfg.env.name!r} has no judge_skill"
    if measures.get("grad_ratio") is None:
        notes["grad_ratio"] = "no teacher token in the round-0 batch (no self-written skill parsed)"
    return PreflightReport(measures, tuple(thresholds), notes)
