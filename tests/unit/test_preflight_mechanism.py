"""Issue 25: the pre-flight measures against hand-computed cases, the environments' skill judges on known right and
wrong skills, the shuffled / empty teacher controls, the per-round monitors, and ``seed preflight``'s verdict."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from seed_core.algorithms import ALGORITHMS
from seed_core.config import EnvConfig, RLConfig
from seed_core.skills.contexts import TEACHER_CONTEXTS, hindsight_skills, make_encoders, shuffle_skills
from seed_core.envs import make_env
from seed_core.losses.advantages import grpo_advantages
from seed_core.analyzer.mechanism import (
    THRESHOLDS,
    PreflightInputError,
    PreflightReport,
    action_probability,
    override_thresholds,
    success_rate,
)
from seed_core.analyzer.audit import skill_correctness
from seed_core.skills.insert import EPISODE_SKILL_TITLE
from seed_core.trainer.mechanism import (
    NO_SPAN,
    decision_span,
    pooled_split,
    span_mask,
    split_sums,
    zero_advantage_groups,
)
from seed_core.trainer.rl_step import RLSamples, distill_grad_ratio, rl_update
from seed_core.types import AnnotationRecord, StepRecord


def _note(traj_id: str, skill: str, ok: bool = True) -> AnnotationRecord:
    return AnnotationRecord(traj_id, "oracle", "m", "v", "", "", "", skill if ok else "", "{}",
                            "ok" if ok else "failed",
                            "", 1, 0, 0, 0.0)


def _record(traj_id: str, success: bool, step: int = 0) -> StepRecord:
    return StepRecord("ezpoints", "test", traj_id.split("/")[0], "ezpoints", 0, "g", traj_id, step, "", "", "", [1],
                      [0.0],
                      "", True, 0.0, False, 0.0, success, 1, "v")


# --- each measure on a hand-computed case ------------------------------------------------------------------------


def test_action_probability_is_the_product_over_the_action_span():
    assert action_probability([-0.1, -0.5, -0.2], (1, 3)) == pytest.approx(math.exp(-0.7))
    assert action_probability([-0.1, -0.5, -0.2], (0, 1)) == pytest.approx(math.exp(-0.1))


def test_p_expert_lift_and_control_are_differences_to_plain_and_judged_by_the_table():
    report = PreflightReport({"p_expert": {"plain": 0.40, "matched": 0.75, "mismatched": 0.43}, "perf_gap": 0.31,
                              "skill_correct": 0.8, "grad_ratio": 0.25, "zero_adv_groups": 0.5})
    assert report.value("p_expert_lift") == pytest.approx(0.35)
    assert report.value("p_expert_control") == pytest.approx(0.03)
    assert report.passed and report.lines()[-1].startswith("GO")
    worse = PreflightReport({**report.measures, "p_expert": {"plain": 0.40, "matched": 0.60, "mismatched": 0.50},
                             "zero_adv_groups": 0.39, "skill_correct": None})
    assert worse.failed == ["p_expert_lift", "p_expert_control", "skill_correct", "zero_adv_groups"]
    assert worse.lines()[-1] == ("NO-GO: 4 of 6 thresholds fail: p_expert_lift, p_expert_control, skill_correct, "
                                 "zero_adv_groups")
    assert "FAIL  skill_correct = n/a" in worse.lines()[3]


def test_the_default_thresholds_are_the_issues():
    table = {t.measure: (t.op, t.value) for t in THRESHOLDS}
    assert table == {"p_expert_lift": (">=", 0.3), "p_expert_control": ("<=", 0.05), "perf_gap": (">=", 0.3),
                     "skill_correct": (">=", 0.8), "grad_ratio": (">=", 0.2), "zero_adv_groups": (">=", 0.4)}
    changed = {t.measure: t.value for t in override_thresholds(THRESHOLDS, ["perf_gap=0.1"])}
    assert changed["perf_gap"] == 0.1 and changed["grad_ratio"] == 0.2
    with pytest.raises(PreflightInputError, match="NAME one of"):
        override_thresholds(THRESHOLDS, ["gap=0.1"])


def test_perf_gap_inputs_count_episodes_not_steps():
    plain = [_record("a/0", False, 0), _record("a/0", False, 1), _record("b/0", True), _record("c/0", False)]
    teacher = [_record("a/0", True, 0), _record("a/0", True, 1), _record("b/0", True), _record("c/0", False)]
    assert success_rate(plain) == pytest.approx(1 / 3) and success_rate(teacher) == pytest.approx(2 / 3)
    assert success_rate(teacher) - success_rate(plain) == pytest.approx(1 / 3)  # the perf gap, 33 points


def test_skill_correctness_counts_a_failed_parse_as_wrong():
    tasks = {f"t{i}": SimpleNamespace(task_id=f"t{i}", answer=str(i)) for i in range(4)}
    notes = [_note("t0", "0"), _note("t1", "1"), _note("t2", "9"), _note("t3", "3", ok=False)]
    judge = lambda task, skill: skill == task.answer  # noqa: E731
    assert skill_correctness(judge, notes, tasks) == pytest.approx(2 / 4)
    assert skill_correctness(None, notes, tasks) is None


def test_zero_advantage_groups_by_hand():
    scores = torch.tensor([1.0, 1.0, 0.0, 2.0, 3.0, 3.0])
    groups = ["a", "a", "b", "b", "c", "c"]
    assert zero_advantage_groups(grpo_advantages(scores, groups), groups) == pytest.approx(2 / 3)
    assert zero_advantage_groups(torch.tensor([0.0, 1e-7, 0.5]), ["x", "x", "y"]) == pytest.approx(1 / 2)
    assert zero_advantage_groups(torch.tensor([0.0, 0.5, 0.0]), ["x", "x", "y"]) == pytest.approx(1 / 2)  # one A != 0


def test_decision_span_maps_the_actions_characters_to_tokens():
    pieces = ["ab", "cd", "ef", "g"]

    def decode(ids):
        return "".join(pieces[i] for i in ids)

    assert decision_span([0, 1, 2, 3], "de", decode) == (1, 3)  # "d" in token 1, "e" in token 2
    assert decision_span([0, 1, 2, 3], "EF", decode) == (2, 3)  # case-insensitive, token-aligned
    assert decision_span([0, 1, 2, 3], "g", decode) == (3, 4)
    assert decision_span([0, 1, 2, 3], "zz", decode) == NO_SPAN and decision_span([0, 1], "", decode) == NO_SPAN


def test_decision_span_on_the_tiny_tokenizer(tiny_policy):
    tok = tiny_policy.tokenizer
    enc = make_encoders(tok, {}, 256)
    response = json.dumps({"thoughts": "I read both card numbers 12 and 3.", "action": "12"})
    ids = enc.raw(response)
    a, b = decision_span(ids, "12", enc.decode)
    assert "12" in enc.decode(ids[a:b]) and "12" not in enc.decode(ids[b:])  # the last "12", the action's
    assert enc.decode(ids[:a]).endswith('"action": "') or '"action"' in enc.decode(ids[:a])


def test_gap_and_gate_split_decision_from_format_tokens_by_hand():
    teacher = torch.tensor([[-1.0, -0.5, -2.0], [-0.2, -0.4, 0.0]])
    student = torch.tensor([[-1.5, -0.5, -1.0], [-0.2, -1.4, 0.0]])
    active = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # row 1: 2 tokens
    decision = span_mask([(1, 2), (1, 2)], 3)  # the middle token of each row
    sums = split_sums(teacher, student, active, decision, beta=2.0)
    out = pooled_split({f"rl/{k}": v for k, v in sums.items()})
    # decision tokens: delta 0.0 and 1.0; format tokens: 0.5, -1.0 (row 0) and 0.0 (row 1)
    assert out["rl/teacher_gap_decision"] == pytest.approx(0.5)
    assert out["rl/teacher_gap_format"] == pytest.approx(-0.5 / 3)
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    assert out["rl/gate_decision"] == pytest.approx((sig(0.0) + sig(2.0)) / 2)
    assert out["rl/gate_format"] == pytest.approx((sig(1.0) + sig(-2.0) + sig(0.0)) / 3)
    assert out["rl/decision_token_share"] == pytest.approx(2 / 5)
    assert "rl/gate_decision" not in pooled_split({f"rl/{k}": v for k, v in
                                                   split_sums(teacher, student, active, decision).items()})


def test_p_expert_by_hand_with_a_prompt_blind_model():
    """log pi = log(0.8, 0.2) whatever the prompt: an expert response "0010" with action "1" has P = 0.2, with
    action "10" P = 0.2 * 0.8; a state without a mismatched skill is left out of all three conditions."""
    from seed_core.skills.contexts import Encoders
    from seed_core.analyzer.mechanism import ExpertState, p_expert

    model = BiasLM()
    with torch.no_grad():
        model.bias.copy_(torch.log(torch.tensor([0.8, 0.2])))
    enc = Encoders(chat=lambda text: [0] * (1 + len(text) % 5), template=str, raw=lambda text: [int(c) for c in text],
                   decode=lambda ids: "".join(str(i) for i in ids))
    task = lambda i: SimpleNamespace(task_id=f"t{i}")  # noqa: E731
    states = [ExpertState(task(0), "p", "0010", "1"), ExpertState(task(1), "q", "0110", "10"),
              ExpertState(task(2), "r", "0010", "1")]
    out = p_expert(model, 0, enc, states, {"t0": "s0", "t1": "s1", "t2": "s2"}, {"t0": "s1", "t1": "s0"}, 2)
    want = (0.2 + 0.2 * 0.8) / 2
    assert out["states"] == 2
    assert out["plain"] == pytest.approx(want) and out["matched"] == pytest.approx(want)
    assert out["mismatched"] == pytest.approx(want)


class BiasLM(torch.nn.Module):
    """logits = one free vector b for every position: log pi(y) = b_y - logsumexp(b), whatever the prompt."""

    def __init__(self, vocab: int = 2) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(vocab))

    def forward(self, input_ids, attention_mask=None, position_ids=None, logits_to_keep=0, use_cache=False):
        rows, width = input_ids.shape
        return SimpleNamespace(logits=self.bias.expand(rows, logits_to_keep or width, -1))


def test_grad_ratio_by_hand_on_a_bias_only_model():
    """Two one-token samples, y = 0 and y = 1, one group with scores 1 and 0 (A = +-1/sqrt 2), p = (1/2, 1/2):
    grad_b L_PG = -(1/2) sum_i A_i (e_yi - p) = -(1/2)(1/sqrt 2)(1, -1), norm 1/2;
    teacher deltas +1 and -1, beta 1: grad_b lambda L_OPD = -(lambda/2) sum_i g_i (e_yi - p),
    norm = (lambda/2)(1/2)|g_0 - g_1| sqrt 2 with g = sigmoid(+-1)."""
    half = math.log(0.5)
    samples = RLSamples(prompt_ids=[[0], [1]], response_ids=[[0], [1]], teacher_prompt_ids=[[1, 1], [0, 0]],
                        group_ids=["g", "g"], scores=torch.tensor([1.0, 0.0]))
    scored = {"old": [torch.tensor([half]), torch.tensor([half])],
              "teacher": [torch.tensor([half + 1.0]), torch.tensor([half - 1.0])]}
    cfg = RLConfig(kl_coef=0.0, entropy_coef=0.0, opd_coef=0.1, gate_beta=1.0, micro_batch_size=1)
    adv = grpo_advantages(samples.scores, samples.group_ids)
    model = BiasLM()
    out = distill_grad_ratio(model, samples, [0, 1], scored, adv, pad_id=0, cfg=cfg, algorithm=ALGORITHMS.get("seed"))
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    want_distill = 0.1 / 2 * 0.5 * (sig(1.0) - sig(-1.0)) * math.sqrt(2)
    assert out["rl/grad_norm_pg"] == pytest.approx(0.5, rel=1e-5)
    assert out["rl/grad_norm_distill"] == pytest.approx(want_distill, rel=1e-5)
    assert out["rl/grad_ratio"] == pytest.approx(want_distill / 0.5, rel=1e-5)
    assert model.bias.grad is None  # cleared: the update that follows is unchanged
    assert distill_grad_ratio(model, samples, [0, 1], scored, adv, pad_id=0, cfg=cfg,
                              algorithm=ALGORITHMS.get("grpo")) == {}


def test_rl_update_logs_the_mechanism_monitors(tiny_policy):
    enc = make_encoders(tiny_policy.tokenizer, {}, 256)
    response = enc.raw(json.dumps({"thoughts": "x", "action": "3"}))
    samples = RLSamples(prompt_ids=[[10, 11], [12, 13], [14]], response_ids=[response] * 3,
                        teacher_prompt_ids=[[9, 10, 11], [9, 12, 13], None], group_ids=["a", "a", "b"],
                        scores=torch.tensor([1.0, 1.0, 0.5]),
                        decision_spans=[decision_span(response, "3", enc.decode)] * 3)
    opt = torch.optim.SGD(tiny_policy.model.parameters(), lr=0.0)
    m = rl_update(tiny_policy.model, opt, samples, cfg=RLConfig(kl_coef=0.0), algorithm=ALGORITHMS.get("seed"),
                  pad_id=tiny_policy.tokenizer.pad_token_id)
    assert m["rl/zero_adv_group_ratio"] == pytest.approx(1 / 2)  # group a: equal scores; b: one sample, A = s
    assert m["rl/grad_ratio"] > 0 and m["rl/grad_norm_pg"] > 0
    assert {"rl/teacher_gap_decision", "rl/teacher_gap_format", "rl/gate_decision", "rl/gate_format"} <= set(m)
    a, b = samples.decision_spans[0]
    assert b > a and m["rl/decision_token_share"] == pytest.approx((b - a) / len(response))
    grpo = rl_update(tiny_policy.model, opt, samples, cfg=RLConfig(kl_coef=0.0), algorithm=ALGORITHMS.get("grpo"),
                     pad_id=tiny_policy.tokenizer.pad_token_id)
    assert "rl/grad_ratio" not in grpo and "rl/gate_decision" not in grpo and "rl/zero_adv_group_ratio" in grpo


def test_an_rl_round_logs_the_monitors_into_the_curve(tiny_model_dir, tmp_path):
    """One tiny round of SEED with the oracle's skills (they parse) and of the shuffled control: the per-round
    measures reach metrics.json and curve.csv."""
    import pandas as pd

    from seed_core.config import SeedConfig
    from seed_core.loader import with_overrides
    from seed_core.stages.rl import run_rl

    cfg = with_overrides(SeedConfig(), {
        "model.path": str(tiny_model_dir), "model.device": "cpu", "env.name": "ezpoints", "env.max_steps": 2,
        "rl.rounds": 1, "rl.tasks_per_round": 2, "rl.group_size": 2, "rl.micro_batch_size": 4, "rl.mini_batch_size": 8,
        "generation.max_new_tokens": 6, "generation.max_prompt_tokens": 256})
    for name in ("seed_oracle", "seed_shuffled"):
        run_rl(with_overrides(cfg, {"rl.algorithm": name}), tiny_model_dir, tmp_path / name)
        curve = pd.read_csv(tmp_path / name / "curve.csv")
        assert {"rl/zero_adv_group_ratio"} <= set(curve.columns), name
    oracle = pd.read_csv(tmp_path / "seed_oracle" / "curve.csv").iloc[0]
    assert oracle["analysis/skill_correct"] == 1.0  # the oracle's skills state the winning formula
    assert {"rl/teacher_gap_decision", "rl/gate_format"} <= set(oracle.index)
    assert oracle["rl/teacher_sample_ratio"] == 1.0


def test_stage1_logs_the_share_of_correct_skills(tiny_model_dir, tmp_path):
    from seed_core.config import SeedConfig
    from seed_core.loader import with_overrides
    from seed_core.stages.annotate import run_annotate
    from seed_core.stages.collect import run_collect

    cfg = with_overrides(SeedConfig(), {
        "model.path": str(tiny_model_dir), "model.device": "cpu", "env.name": "ezpoints", "env.max_steps": 2,
        "collect.num_tasks": 2, "generation.max_new_tokens": 6, "generation.max_prompt_tokens": 256})
    run_collect(cfg, tiny_model_dir, tmp_path / "collect")
    assert run_annotate(cfg, tmp_path / "collect", tmp_path / "annotate")["annotate/skill_correct"] == 1.0  # the oracle


# --- the environments' judges on known right and wrong skills --------------------------------------------------


def _expert_episode(env, task):
    env.reset(task)
    actions = []
    while True:
        actions.append(env.expert_action())
        if env.step(actions[-1]).done:
            return actions


def test_ezpoints_judge_on_right_and_wrong_skills():
    from seed_core.envs.ezpoints import deal

    env = make_env(EnvConfig(name="ezpoints"))
    task = env.make_tasks("test", 1, seed=0)[0]
    (a, b), _ = deal(task.seed, 12)
    op = "+" if a + b == 12 else "*"
    wrong_op = "*" if op == "+" else "+"
    assert env.judge_skill(task, env.oracle_skill(task, _expert_episode(env, task), True)["episode_skill"])
    assert env.judge_skill(task, env.oracle_skill(task, ["="], False)["episode_skill"])  # failure skills state it too
    assert env.judge_skill(task, f"Use {b} {op} {a} = 12.")
    assert not env.judge_skill(task, f"Use {a}{wrong_op}{b} = 12.")
    other = next(f for f in ("5+7", "2+10", "3*4", "6*2") if sorted(map(int, f.replace("*", "+").split("+"))) !=
                 sorted((a, b)))
    assert not env.judge_skill(task, f"Use {other} = 12.")  # right target, other cards
    assert not env.judge_skill(task, "Append the first card, the operator, the second card and '='.")


def test_sokoban_judge_replays_the_stated_moves():
    env = make_env(EnvConfig(name="sokoban"))
    task = env.make_tasks("test", 1, seed=0)[0]
    moves = _expert_episode(env, task)
    assert env.judge_skill(task, env.oracle_skill(task, moves, True)["episode_skill"])
    assert env.judge_skill(task, f"Push: {' then '.join(moves)}.")
    assert not env.judge_skill(task, f"Here the moves {', '.join(moves[:-1])} worked.")  # one move short
    assert not env.judge_skill(task, env.oracle_skill(task, ["left"], False)["episode_skill"])  # a mistake, no plan
    assert not env.judge_skill(task, "Push the box toward the target.")


# --- the controls ----------------------------------------------------------------------------------------------


def _ezpoints_world():
    """Four ezpoints tasks, two of which share their cards' answer (the bug of the old control)."""
    env = make_env(EnvConfig(name="ezpoints"))
    pool = env.make_tasks("train", 40, seed=3)
    skills = {t.task_id: env.oracle_skill(t, _expert_episode(env, t), True)["episode_skill"] for t in pool}
    first = pool[0]
    twin = next(t for t in pool[1:] if env.judge_skill(first, skills[t.task_id])  # same answer, other text (cards
                and skills[t.task_id] != skills[first.task_id])                     # swapped or other suits)
    others = [t for t in pool[1:] if not env.judge_skill(first, skills[t.task_id])][:2]
    tasks = [first, twin, *others]
    return env, tasks, {f"{t.task_id}/0": skills[t.task_id] for t in tasks}, {f"{t.task_id}/0": t for t in tasks}


def test_shuffled_control_gives_another_tasks_skill_with_another_answer():
    env, tasks, skills, by_traj = _ezpoints_world()
    out = shuffle_skills(skills, by_traj, env.judge_skill)
    assert set(out) == set(skills)  # the same mask: every trajectory with a skill still has a teacher
    for traj, chosen in out.items():
        assert chosen != skills[traj], "the shuffled control must not be the matched skill"
        assert not env.judge_skill(by_traj[traj], chosen), "its answer must differ"
    first, twin = (f"{t.task_id}/0" for t in tasks[:2])
    assert out[first] != skills[twin]  # the twin shares the answer: never the control
    pair = {k: skills[k] for k in (first, twin)}
    assert shuffle_skills(pair, by_traj, env.judge_skill) == {}  # only a same-answer skill: no control at all
    assert shuffle_skills(pair, by_traj, None)[first] == skills[twin]  # what "another task" alone would have given


def test_shuffle_prefers_the_candidate_closest_in_length():
    task = lambda i: SimpleNamespace(task_id=f"t{i}")  # noqa: E731
    skills = {"a": "x" * 10, "b": "y" * 30, "c": "z" * 11}
    out = shuffle_skills(skills, {"a": task(0), "b": task(1), "c": task(2)})
    assert out == {"a": "z" * 11, "b": "z" * 11, "c": "x" * 10}
    assert shuffle_skills({"a": "s", "b": "t"}, {"a": task(0), "b": task(0)}) == {}  # one task: no control


def test_shuffled_and_empty_contexts_keep_the_mask_and_change_the_teachers_context(tiny_policy):
    env, tasks, skills, by_traj = _ezpoints_world()
    enc = make_encoders(tiny_policy.tokenizer, {}, 4096)
    notes = [_note(t, s) for t, s in skills.items()] + [_note("none/0", "", ok=False)]
    step = lambda traj: SimpleNamespace(traj_id=traj, step=0)  # noqa: E731
    prompt = "Your task is: build 12.\nStep 1. Cards: ..."
    matched = TEACHER_CONTEXTS.get("hindsight_after_task_line")
    shuffled, empty = TEACHER_CONTEXTS.get("hindsight_shuffled"), TEACHER_CONTEXTS.get("hindsight_empty")
    own = hindsight_skills(notes)
    swap = hindsight_skills(notes, pairing=shuffled.pairing, tasks=by_traj, judge=env.judge_skill)
    for traj, skill in skills.items():
        m = tiny_policy.tokenizer.decode(matched.build(prompt, own(step(traj)), enc))
        s = tiny_policy.tokenizer.decode(shuffled.build(prompt, swap(step(traj)), enc))
        e = tiny_policy.tokenizer.decode(empty.build(prompt, own(step(traj)), enc))
        assert skill in m and skill not in s and s != m
        assert EPISODE_SKILL_TITLE in s and EPISODE_SKILL_TITLE in e and "[]" in e and skill not in e
        assert 0.5 < len(s) / len(m) < 2.0  # comparable length
    for ctx, of in ((matched, own), (shuffled, swap), (empty, own)):
        assert ctx.build(prompt, of(step("none/0")), enc) is None  # no skill of its own: no teacher, in every one


def test_the_controls_are_registered_from_the_sft_checkpoint():
    from seed_core.algorithms import CONTROLS, PAPER_ORDER

    for name in CONTROLS:
        a = ALGORITHMS.get(name)
        assert a.init == "sft" and a.label and name in PAPER_ORDER
        assert a.distill == (name != "grpo_sft_probe"), "every control but the probe distills"
    assert not ALGORITHMS.get("grpo_sft_probe").needs_teacher, "the probe's analyses reach no loss"
    for frozen, live in (("seed_static_shuffled", "seed_shuffled"), ("seed_static_empty", "seed_empty")):
        assert ALGORITHMS.get(frozen).context == ALGORITHMS.get(live).context  # the same teacher, the frozen analyzer
        assert ALGORITHMS.get(frozen).analyzer_governance == "frozen" != ALGORITHMS.get(live).analyzer_governance
    assert ALGORITHMS.get("seed_shuffled").context == "hindsight_shuffled"
    assert ALGORITHMS.get("seed_empty").context == "hindsight_empty"
    assert dict(ALGORITHMS.get("seed_ungated").fixed) == {"gate_beta": 0.0}
    assert ALGORITHMS.get("seed_oracle").analyzer == "oracle" == ALGORITHMS.get("opsd_oracle").analyzer
    assert dict(ALGORITHMS.get("opsd_oracle").fixed) == {"pg_coef": 0.0}


# --- seed preflight on a tiny config ----------------------------------------------------------------------------


def _cli(tiny_model_dir: Path, *extra: str):
    from typer.testing import CliRunner

    from seed_app.cli import app

    sets = {"model.path": str(tiny_model_dir), "model.device": "cpu", "env.name": "ezpoints", "env.max_steps": 2,
            "rl.group_size": 2, "generation.max_new_tokens": 8, "generation.max_prompt_tokens": 256,
            "rl.analyzer_max_new_tokens": 8, "rl.micro_batch_size": 4, "rl.mini_batch_size": 8}
    args = ["preflight", "--checkpoint", str(tiny_model_dir), "--heldout", "3", "--tasks", "2"]
    for key, value in sets.items():
        args += ["-S", f"{key}={value}"]
    return CliRunner().invoke(app, [*args, *extra])


def test_seed_preflight_fails_naming_the_thresholds_and_passes_when_they_hold(tiny_model_dir, tmp_path):
    failing = _cli(tiny_model_dir)
    assert failing.exit_code == 1, failing.output
    lines = failing.stdout.strip().splitlines()  # stderr holds the weights' loading bar
    assert len([line for line in lines if line.startswith(("PASS", "FAIL"))]) == len(THRESHOLDS)
    verdict = lines[-1]
    assert verdict.startswith("NO-GO") and "p_expert_lift" in verdict and "skill_correct" in verdict
    assert any(line.startswith("FAIL  p_expert_lift") and "needs >= 0.3" in line for line in lines)
    # the tiny random model cannot pass the issue's thresholds; with the oracle's skills and thresholds it can meet,
    # every branch of the verdict is the passing one
    out = tmp_path / "preflight.json"
    passing = _cli(tiny_model_dir, "--algorithm", "seed_oracle", "--json", str(out),
                   *(x for t in ("p_expert_lift=-1", "p_expert_control=1", "perf_gap=-1", "grad_ratio=0",
                                 "zero_adv_groups=0") for x in ("--threshold", t)))
    assert passing.exit_code == 0, passing.output
    assert "GO: every pre-flight threshold passes" in passing.output and "thresholds overridden" in passing.output
    block = json.loads(out.read_text())
    assert set(block) >= {"perf_gap", "p_expert", "skill_correct", "grad_ratio", "zero_adv_groups", "decision"}
    assert set(block["p_expert"]) >= {"plain", "matched", "mismatched"} and block["skill_correct"] == 1.0
    assert block["passed"] is True and block["failed"] == []


def test_seed_preflight_exits_2_on_bad_input(tiny_model_dir, tmp_path):
    missing = _cli(tiny_model_dir, "--checkpoint", str(tmp_path / "nowhere"))
    assert missing.exit_code == 2 and "not a model checkpoint" in missing.output
    unknown = _cli(tiny_model_dir, "--threshold", "nonsense=1")
    assert unknown.exit_code == 2 and "NAME one of" in unknown.output
