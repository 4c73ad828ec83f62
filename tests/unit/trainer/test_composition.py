"""Golden tests of the TOTAL actor loss and its gradient for every algorithm (seed-algorithm.md §1.4-1.10).

The expected values are computed here token by token in plain Python floats, straight from the formulas
(not with the library's masked_mean), on a ragged 3-row batch with garbage in the padding: every term's
sign, coefficient, mask and token-mean over the whole mini-batch is pinned. ``GOLDEN`` says what each
algorithm *is* in the paper's table; a new algorithm without a row here fails
``test_every_algorithm_has_a_golden_row``.
"""

import math

import pytest
import torch

from seed_core.algorithms import ALGORITHMS, effective_rl
from seed_core.config import RLConfig
from seed_core.losses import LossInputs
from seed_core.trainer.compose import compose_loss

# What each algorithm is (the reference table under §1.10, §1.8, §1.11), independent of algorithms.py:
#   pg: weight of the PPO term; distill: kind of distillation term; beta: fixed gate (None = rl.gate_beta);
#   lam: fixed distillation weight (None = rl.opd_coef); shaping: advantage shaping.
GOLDEN = {
    "grpo": dict(pg=1.0, distill=None, shaping=None),
    "skill_grpo": dict(pg=1.0, distill=None, shaping=None),
    "grpo_opsd": dict(pg=1.0, distill="gated", beta=0.0, shaping=None),
    "opsd": dict(pg=0.0, distill="gated", shaping=None),
    "skill_sd": dict(pg=1.0, distill="skill_sd", lam=0.001, shaping=None),
    "rlsd": dict(pg=1.0, distill=None, shaping="rlsd"),
    "sdar": dict(pg=1.0, distill="gated", shaping=None),
    "opid": dict(pg=1.0, distill=None, shaping="opid"),
    "opid_self": dict(pg=1.0, distill=None, shaping="opid"),
    "seed_static": dict(pg=1.0, distill="gated", shaping=None),
    "seed": dict(pg=1.0, distill="gated", shaping=None),
    "seed_no_sft": dict(pg=1.0, distill="gated", shaping=None),
    "seed_no_opd": dict(pg=1.0, distill=None, shaping=None),
    "seed_static_library": dict(pg=1.0, distill="gated", shaping=None),
    "seed_shuffled": dict(pg=1.0, distill="gated", shaping=None),  # the controls differ in the teacher's skill only
    "seed_empty": dict(pg=1.0, distill="gated", shaping=None),
    "seed_ungated": dict(pg=1.0, distill="gated", beta=0.0, shaping=None),
    "seed_oracle": dict(pg=1.0, distill="gated", shaping=None),
    "opsd_oracle": dict(pg=0.0, distill="gated", shaping=None),
    "seed_static_shuffled": dict(pg=1.0, distill="gated", shaping=None),  # the frozen-analyzer twins of the controls
    "seed_static_empty": dict(pg=1.0, distill="gated", shaping=None),
    "grpo_sft_probe": dict(pg=1.0, distill=None, shaping=None),  # analyzes, but no term reads it
    "seed_ema": dict(pg=1.0, distill="gated", shaping=None),  # governance changes who analyzes, not this loss
    "seed_gated": dict(pg=1.0, distill="gated", shaping=None),
    "seed_anchored": dict(pg=1.0, distill="gated", shaping=None),  # + its own anchor step (tests/unit/losses/test_anchor.py)
}

CFG = RLConfig(kl_coef=0.05, entropy_coef=0.003, opd_coef=0.2, gate_beta=2.0, opid_coef=0.3, rlsd_lambda0=0.5,
               rlsd_decay_steps=100, rlsd_clip=0.2)
STEP = 10  # RLSD: lambda_10 = 0.5 * (1 - 10/100) = 0.45
GARBAGE = 50.0

# ragged rows: 3, 1 and 2 response tokens; row 1 has no teacher (its skill failed to parse)
LENGTHS = [3, 1, 2]
TEACHER_ROWS = [1.0, 0.0, 1.0]
ADV = [1.0, -0.5, -2.0]
L = [[-1.0, -0.5, -2.0], [-0.7], [-1.5, -0.2]]
OLD = [[-1.05, -0.45, -2.1], [-0.75], [-1.4, -0.25]]
REF = [[-1.2, -0.4, -1.9], [-0.9], [-1.3, -0.3]]
TEACHER = [[-0.6, -0.9, -2.0], [-3.0], [-2.5, -0.1]]
ENT = [[0.8, 1.1, 0.3], [0.5], [1.4, 0.9]]


def _pad(rows):
    return torch.tensor([r + [GARBAGE] * (3 - len(r)) for r in rows], dtype=torch.float64)


def _inputs():
    logprobs = _pad(L).requires_grad_(True)
    entropy = _pad(ENT).requires_grad_(True)
    mask = torch.tensor([[1.0] * n + [0.0] * (3 - n) for n in LENGTHS], dtype=torch.float64)
    adv = torch.tensor(ADV, dtype=torch.float64)[:, None] * mask
    inp = LossInputs(logprobs=logprobs, old_logprobs=_pad(OLD), advantages=adv, mask=mask, ref_logprobs=_pad(REF),
                     teacher_logprobs=_pad(TEACHER), teacher_mask=torch.tensor(TEACHER_ROWS, dtype=torch.float64),
                     entropy=entropy)
    return inp, logprobs, entropy


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def _expected(spec):
    """(total loss, dL/dl per token, dL/dH per token) from the formulas, one token at a time."""
    tokens = [(b, t) for b, n in enumerate(LENGTHS) for t in range(n)]
    n_all = len(tokens)
    n_teacher = sum(1 for b, _ in tokens if TEACHER_ROWS[b])
    beta = CFG.gate_beta if spec.get("beta") is None else spec["beta"]
    lam = CFG.opd_coef if spec.get("lam") is None else spec["lam"]
    lam_rlsd = CFG.rlsd_lambda0 * (1 - STEP / CFG.rlsd_decay_steps)
    total, grad_l, grad_h = 0.0, {}, {}
    for b, t in tokens:
        l, old, ref, te, h = L[b][t], OLD[b][t], REF[b][t], TEACHER[b][t], ENT[b][t]
        has_teacher = bool(TEACHER_ROWS[b])
        a = ADV[b]
        if spec["shaping"] == "opid" and has_teacher:
            a = a + CFG.opid_coef * (te - old)
        if spec["shaping"] == "rlsd" and has_teacher:
            sign = (a > 0) - (a < 0)
            w = min(max(math.exp(sign * (te - old)), 1 - CFG.rlsd_clip), 1 + CFG.rlsd_clip)
            a = a * ((1 - lam_rlsd) + lam_rlsd * w)
        r = math.exp(l - old)
        assert 1 - CFG.clip_ratio_low < r < 1 + CFG.clip_ratio_high  # unclipped branch: pg = -A r
        d = ref - l
        total += (spec["pg"] * (-a * r) + CFG.kl_coef * (math.exp(d) - d - 1) - CFG.entropy_coef * h) / n_all
        g_l = (spec["pg"] * (-a * r) + CFG.kl_coef * (1 - math.exp(d))) / n_all
        grad_h[(b, t)] = -CFG.entropy_coef / n_all
        if spec["distill"] and has_teacher:
            if spec["distill"] == "gated":
                g = _sigmoid(beta * (te - l))
                total += lam * g * (te - l) / n_teacher
                g_l += -lam * g / n_teacher
            else:  # skill_sd: rho * k3, rho = exp(l - old) with gradient (SDAR's compute_sdl_loss), e = l - te
                rho, e = math.exp(l - old), l - te
                k3 = math.exp(-e) - 1 + e
                total += lam * rho * k3 / n_teacher
                g_l += lam * rho * (k3 + 1 - math.exp(te - l)) / n_teacher
        grad_l[(b, t)] = g_l
    return total, grad_l, grad_h


def test_every_algorithm_has_a_golden_row():
    assert set(GOLDEN) == set(ALGORITHMS.names())


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_total_loss_and_gradient_match_the_formulas(name):
    algorithm = ALGORITHMS.get(name)
    cfg = effective_rl(CFG, algorithm)  # exactly what rl_update does first
    inp, logprobs, entropy = _inputs()
    composed = compose_loss(inp, cfg=cfg, algorithm=algorithm, step=STEP)
    composed.total.backward()
    want, grad_l, grad_h = _expected(GOLDEN[name])
    assert composed.total.item() == pytest.approx(want, rel=1e-10, abs=1e-12)
    for b, n in enumerate(LENGTHS):
        for t in range(3):
            gl, gh = logprobs.grad[b, t].item(), entropy.grad[b, t].item()
            if t < n:
                assert gl == pytest.approx(grad_l[(b, t)], rel=1e-9, abs=1e-12), (name, b, t)
                assert gh == pytest.approx(grad_h[(b, t)], rel=1e-9, abs=1e-12), (name, b, t)
            else:  # padding: no value, no gradient
                assert gl == 0.0 and gh == 0.0, (name, b, t)


def test_the_golden_batch_tells_the_terms_apart():
    """Guards the fixture: each term is non-zero and a sequence-mean differs from the token-mean here."""
    want = {name: _expected(spec)[0] for name, spec in GOLDEN.items()}
    assert len({round(v, 9) for v in want.values()}) >= 7  # grpo/skill_grpo, opid/opid_self, seed* coincide
    per_row = [sum(TEACHER[b][t] - L[b][t] for t in range(LENGTHS[b])) / LENGTHS[b] for b in (0, 2)]
    token = sum(TEACHER[b][t] - L[b][t] for b in (0, 2) for t in range(LENGTHS[b])) / 5
    assert abs(sum(per_row) / 2 - token) > 1e-3


def _rows(inp, rows):
    pick = torch.tensor(rows)
    return LossInputs(**{k: (getattr(inp, k)[pick] if getattr(inp, k) is not None else None)
                         for k in ("logprobs", "old_logprobs", "advantages", "mask", "ref_logprobs",
                                   "teacher_logprobs", "teacher_mask", "entropy")})


@pytest.mark.parametrize("name", ["seed", "skill_sd", "rlsd", "opsd"])
def test_micro_batches_weighted_by_the_trainer_give_the_golden_total(name):
    """The trainer's mini-batch loss, sum_k MicroLoss.global_share, on micro-batches {0, 1} and {2}."""
    from seed_core.trainer.rl_step import MicroLoss

    algorithm = ALGORITHMS.get(name)
    cfg = effective_rl(CFG, algorithm)
    inp, logprobs, entropy = _inputs()
    n_all = float(sum(LENGTHS))
    n_teacher = float(sum(n for n, w in zip(LENGTHS, TEACHER_ROWS) if w))
    total = 0.0
    for rows in ([0, 1], [2]):
        part = _rows(inp, rows)
        c = compose_loss(part, cfg=cfg, algorithm=algorithm, step=STEP)
        micro = MicroLoss(c.token_loss, c.distill_loss, float(part.mask.sum()), float(part.teacher_token_mask().sum()))
        total = total + micro.global_share(n_all, n_teacher)
    total.backward()
    want, grad_l, _ = _expected(GOLDEN[name])
    assert total.item() == pytest.approx(want, rel=1e-10, abs=1e-12)
    for (b, t), g in grad_l.items():
        assert logprobs.grad[b, t].item() == pytest.approx(g, rel=1e-9, abs=1e-12)
