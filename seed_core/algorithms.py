"""Algorithms = named records of (analyzer, teacher context, loss terms, advantage shaping) (DESIGN §7).

The trainer never branches on the algorithm name; it reads the ``Algorithm`` record. Total loss of one
mini-batch (token-means over the whole mini-batch, seed-algorithm.md §1.7):

    L = pg_coef * L_PPO(A') + kl_coef * KL_k3 - entropy_coef * H + opd_coef * L_distill      (distill only)
    A' = SHAPINGS[shaping](A, l^T, l^old)                                                    (shaping only)

| name | starts from | analyzer | teacher context | pg | distillation | advantage | fixed | paper row |
|---|---|---|---|---|---|---|---|---|
| grpo | base | - | - | 1 | - | GRPO | | GRPO |
| skill_grpo | base | - | - (the student sees static skills) | 1 | - | GRPO | | Skill-GRPO |
| grpo_opsd | base | - | static_before_chat_template | 1 | gated OPD | GRPO | gate_beta 0 | GRPO+OPSD |
| opsd | base | - | static_before_chat_template | 0 | gated OPD | GRPO | pg_coef 0 | OPSD |
| skill_sd | base | - | static_before_chat_template | 1 | skill_sd (k3) | GRPO | distill_loss skill_sd, opd_coef 0.001 | Skill-SD |
| rlsd | base | - | static_before_chat_template | 1 | - | RLSD reweighting | | RLSD |
| sdar | base | - | static_before_chat_template | 1 | gated OPD | GRPO | | SDAR |
| opid | base | ``annotate`` (Stage-1 client) | hindsight_after_task_line (+step) | 1 | - | GRPO + opid shift | | OPID |
| opid_self | base | ``policy`` | hindsight_after_task_line | 1 | - | GRPO + opid shift | | (ablation) |
| seed_static | sft | ``checkpoint`` | hindsight_after_task_line | 1 | gated OPD | GRPO | | SEED-static |
| seed | sft | ``policy`` | hindsight_after_task_line | 1 | gated OPD | GRPO | | SEED |
| seed_no_sft | base | ``policy`` | hindsight_after_task_line | 1 | gated OPD | GRPO | | SEED w/o hindsight-skill SFT |
| seed_no_opd | sft | - | - | 1 | - | GRPO | | SEED w/o self-evolving OPD |
| seed_static_library | sft | - | static_before_chat_template | 1 | gated OPD | GRPO | | SEED w/o on-policy skill |
| seed_shuffled | sft | ``policy`` | hindsight_shuffled | 1 | gated OPD | GRPO | | (control) |
| seed_empty | sft | ``policy`` | hindsight_empty | 1 | gated OPD | GRPO | | (control) |
| seed_ungated | sft | ``policy`` | hindsight_after_task_line | 1 | gated OPD | GRPO | gate_beta 0 | (control) |
| seed_oracle | sft | ``oracle`` | hindsight_after_task_line | 1 | gated OPD | GRPO | | (control) |
| opsd_oracle | sft | ``oracle`` | hindsight_after_task_line | 0 | gated OPD | GRPO | pg_coef 0 | (control) |
| seed_static_shuffled | sft | ``checkpoint`` | hindsight_shuffled | 1 | gated OPD | GRPO | | (control) |
| seed_static_empty | sft | ``checkpoint`` | hindsight_empty | 1 | gated OPD | GRPO | | (control) |
| grpo_sft_probe | sft | ``policy`` (audited, unused) | - | 1 | - | GRPO | | (probe) |
| seed_ema | sft | ``policy``, governance ``ema`` | hindsight_after_task_line | 1 | gated OPD | GRPO | | (governance) |
| seed_gated | sft | ``policy``, governance ``gated`` | hindsight_after_task_line | 1 | gated OPD | GRPO | | (governance) |
| seed_anchored | sft | ``policy``, governance ``anchored`` | hindsight_after_task_line | 1 | gated OPD + anchor | GRPO | | (governance) |

**Where a run starts** (``init``, seed-algorithm.md §8): the paper's baseline block is shared cell for cell with
SDAR's table, whose runs have no Stage 1, so every baseline starts from the base model (``data/models/base``);
SEED and the rows that need the Stage-1 hindsight-skill checkpoint start from it (``data/sft/checkpoint``). The
starting checkpoint is also the KL reference. The last three rows are the paper's ablations (Table 2, ALFWorld
3B: SEED 91.8; 86.0 / 87.0 / 84.4): SEED from the base model with its analyzer untrained; GRPO from the SFT
checkpoint; SEED whose teacher context is the static offline skill library instead of its own analyses.

**Controls** (issue 25, ``CONTROLS``; all from the Stage-1 checkpoint like SEED, so each differs from SEED in one
part): a teacher whose skill is another task's with a different answer (``hindsight_shuffled``, same mask and
comparable length) and one whose skill section is empty (``hindsight_empty``) separate hindsight *credit* from
self-imitation of sampled tokens; ``seed_ungated`` is SEED with beta = 0 (g = 0.5 everywhere); ``seed_oracle`` is
SEED whose skills come from the environment's rule-based oracle (``CLIENTS["oracle"]``) instead of self-analysis
("distillation works" vs "self-analysis works"); ``opsd_oracle`` is distillation alone (no policy gradient) with
the oracle's skills, the positive control.

What each control holds fixed (issue 39): ``seed_shuffled`` and ``seed_empty`` hold SEED's *live* analyzer and its
parse mask (a trajectory whose analysis failed gets no teacher in them either); their teacher's skill is always
another task's with a different answer (``hindsight_shuffled``), or an empty skill section (``hindsight_empty``:
the teacher prompt differs from the student's by the empty section's title). ``seed_static_shuffled`` and
``seed_static_empty`` are the same two teachers under SEED-static's *frozen* analyzer and mask, so SEED-static minus
each measures the frozen skill's content with the analyzer held fixed. ``grpo_sft_probe`` is GRPO from the SFT
checkpoint (``seed_no_opd``) that also analyzes its rollouts with its own weights and audits them, but has no
teacher: its analyses never reach the loss, so its analysis drift is the policy gradient's alone.

**Governed analyzers** (issue 39, ``GOVERNED``): SEED whose analyzer follows the policy under another mode of
``seed_core.analyzer.governance`` (``ema``, ``gated``, ``anchored``); the paper's ``seed`` is ``live``.

One owner per coefficient: a value an algorithm *defines* (GRPO+OPSD is beta = 0; OPSD has no policy
gradient; Skill-SD's loss and lambda) lives in ``fixed`` here; every other value is the config's.
``effective_rl`` is the one place where they meet; the trainer, the metrics, the resolved config and
MLflow all read its result, so what is logged is what was used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from seed_core.registries import ANNOTATOR_KEYS, CLIENTS, DISTILL_LOSSES, GOVERNANCE, SHAPINGS
from seed_core.registry import Registry

if TYPE_CHECKING:
    from seed_core.config import RLConfig, SeedConfig


@dataclass(frozen=True)
class Algorithm:
    name: str
    analyzer: str | None = None
    """Who writes hindsight skills during RL: a key in CLIENTS (``policy``, ``checkpoint``, ``oracle``), ``annotate``
    (the Stage-1 client ``annotate.client``: ``openai`` or the offline ``oracle``), or None."""
    context: str | None = None
    """Key in TEACHER_CONTEXTS: how the teacher prompt is built; None = no teacher."""
    student_skills: bool = False
    """Rollouts show the task type's static skill to the policy (inserted like an episode skill, §2.5):
    Skill-GRPO. The RL samples are then those skill-prompted steps."""
    distill: bool = False
    """Add ``opd_coef * DISTILL_LOSSES[distill_loss]``."""
    shaping: str | None = None
    """Key in ``seed_core.trainer.compose.SHAPINGS`` (``opid``, ``rlsd``); None = advantages unchanged."""
    step_skills: bool = False
    """Route steps with a step skill to the step-skill teacher prompt (OPID ``step_priority``, §1.8)."""
    fixed: tuple[tuple[str, Any], ...] = field(default=())
    """(RLConfig field, value) pairs this algorithm defines; they override the config (``effective_rl``)."""
    label: str = ""
    """Row label in the report (the paper's name)."""
    init: str = "base"
    """Where the run starts (and its KL reference): ``base`` (the base model) or ``sft`` (the Stage-1 checkpoint)."""
    governance: str | None = None
    """How a self-analyzer's weights follow the policy: a key in ``seed_core.analyzer.governance.GOVERNANCE``
    (``ema``, ``gated``, ``anchored``); None = what the analyzer implies (``analyzer_governance``)."""

    @property
    def analyzer_governance(self) -> str | None:
        """The governance mode of the policy's own analyzer: ``governance``, else ``live`` for the ``policy``
        analyzer and ``frozen`` for the Stage-1 ``checkpoint``; None for the oracle, Stage-1 client or no analyzer."""
        return self.governance or {"policy": "live", "checkpoint": "frozen"}.get(self.analyzer or "")

    @property
    def needs_teacher(self) -> bool:
        return self.context is not None and (self.distill or self.shaping is not None)

    @property
    def skill_source(self) -> str | None:
        """``hindsight`` (per-trajectory annotations), ``static`` (the static skill library), or None."""
        if self.context is not None:
            return "static" if self.context == STATIC else "hindsight"
        return "static" if self.student_skills else None

    @property
    def keys(self) -> tuple[str, ...]:
        """The config keys this algorithm's parts read, as their registry entries declare them (in no order; the
        lineage takes out the values it fixes): its analyzer's (``CLIENTS``; ``annotate``: the Stage-1 analyzer's
        ``ANNOTATOR_KEYS``) and its governance's (``GOVERNANCE``), its distillation loss's (``DISTILL_LOSSES``: the
        one it fixes, else ``rl.distill_loss`` and every loss's, as the config may pick any), its shaping's
        (``SHAPINGS``), the static skill library's directory and the step-skill cap where it uses them."""
        analyzer = ANNOTATOR_KEYS if self.analyzer == "annotate" else (
            CLIENTS.entry(self.analyzer).keys if self.analyzer else ())
        governance = GOVERNANCE.entry(self.governance).keys if self.governance else ()
        loss: tuple[str, ...] = ()
        if self.distill:
            fixed_loss = dict(self.fixed).get("distill_loss")
            losses = [fixed_loss] if fixed_loss else DISTILL_LOSSES.names()
            loss = (*(() if fixed_loss else ("rl.distill_loss",)),
                    *(k for name in losses for k in DISTILL_LOSSES.entry(name).keys))
        keys = {*analyzer, *governance, *loss, *(SHAPINGS.entry(self.shaping).keys if self.shaping else ()),
                *(("rl.static_skills_dir",) if self.skill_source == "static" else ()),
                *(("rl.max_step_skills",) if self.step_skills else ())}
        return tuple(keys)


ALGORITHMS: Registry[Algorithm] = Registry("algorithm")

CHECKPOINT_METHODS = ("vanilla", "sft")
"""Evaluated methods that are a checkpoint, not an RL run: the base model and the Stage-1 checkpoint."""

HINDSIGHT = "hindsight_after_task_line"
STATIC = "static_before_chat_template"
SHUFFLED = "hindsight_shuffled"
EMPTY = "hindsight_empty"

for _algo in (
    Algorithm("grpo", label="GRPO"),
    Algorithm("skill_grpo", student_skills=True, label="Skill-GRPO"),
    Algorithm("grpo_opsd", context=STATIC, distill=True, fixed=(("gate_beta", 0.0),), label="GRPO+OPSD"),
    Algorithm("opsd", context=STATIC, distill=True, fixed=(("pg_coef", 0.0),), label="OPSD"),
    Algorithm("skill_sd", context=STATIC, distill=True,
              fixed=(("distill_loss", "skill_sd"), ("opd_coef", 0.001)), label="Skill-SD"),
    Algorithm("rlsd", context=STATIC, shaping="rlsd", label="RLSD"),
    Algorithm("sdar", context=STATIC, distill=True, label="SDAR"),
    Algorithm("opid", analyzer="annotate", context=HINDSIGHT, shaping="opid", step_skills=True, label="OPID"),
    Algorithm("opid_self", analyzer="policy", context=HINDSIGHT, shaping="opid", label="OPID (self-analysis)"),
    Algorithm("seed_static", analyzer="checkpoint", context=HINDSIGHT, distill=True, label="SEED-static", init="sft"),
    Algorithm("seed", analyzer="policy", context=HINDSIGHT, distill=True, label="SEED", init="sft"),
    Algorithm("seed_no_sft", analyzer="policy", context=HINDSIGHT, distill=True, label="SEED w/o hindsight-skill SFT"),
    Algorithm("seed_no_opd", label="SEED w/o self-evolving OPD", init="sft"),
    Algorithm("seed_static_library", context=STATIC, distill=True, label="SEED w/o on-policy skill", init="sft"),
    Algorithm("seed_shuffled", analyzer="policy", context=SHUFFLED, distill=True, label="SEED (shuffled skill)",
              init="sft"),
    Algorithm("seed_empty", analyzer="policy", context=EMPTY, distill=True, label="SEED (empty skill)", init="sft"),
    Algorithm("seed_ungated", analyzer="policy", context=HINDSIGHT, distill=True, fixed=(("gate_beta", 0.0),),
              label="SEED (beta = 0)", init="sft"),
    Algorithm("seed_oracle", analyzer="oracle", context=HINDSIGHT, distill=True, label="SEED (oracle analyzer)",
              init="sft"),
    Algorithm("opsd_oracle", analyzer="oracle", context=HINDSIGHT, distill=True, fixed=(("pg_coef", 0.0),),
              label="OPSD (oracle skills)", init="sft"),
    Algorithm("seed_static_shuffled", analyzer="checkpoint", context=SHUFFLED, distill=True,
              label="SEED-static (shuffled skill)", init="sft"),
    Algorithm("seed_static_empty", analyzer="checkpoint", context=EMPTY, distill=True,
              label="SEED-static (empty skill)", init="sft"),
    Algorithm("seed_ema", analyzer="policy", governance="ema", context=HINDSIGHT, distill=True,
              label="SEED (EMA analyzer)", init="sft"),
    Algorithm("seed_gated", analyzer="policy", governance="gated", context=HINDSIGHT, distill=True,
              label="SEED (gated analyzer)", init="sft"),
    Algorithm("seed_anchored", analyzer="policy", governance="anchored", context=HINDSIGHT, distill=True,
              label="SEED (anchored analyzer)", init="sft"),
    Algorithm("grpo_sft_probe", analyzer="policy", label="GRPO from SFT (analysis probe)", init="sft"),
):
    ALGORITHMS.register(_algo.name)(_algo)

INITS = ("base", "sft")
"""The values of ``Algorithm.init``."""

ABLATIONS = ("seed", "seed_no_sft", "seed_no_opd", "seed_static_library", "seed_static")
"""The rows of the paper's ablation table (Table 2), SEED first; each other row's drop is measured against it."""

CONTROLS = ("seed_shuffled", "seed_empty", "seed_ungated", "seed_oracle", "opsd_oracle", "seed_static_shuffled",
            "seed_static_empty", "grpo_sft_probe")
"""The mechanism controls (issues 25, 39): each holds one part of SEED or SEED-static fixed (module docstring)."""

GOVERNED = ("seed_ema", "seed_gated", "seed_anchored")
"""SEED with a governed analyzer (issue 39, ``seed_core.analyzer.governance``): the lab's rows, after the controls."""

PAPER_ORDER = ("vanilla", "sft", "opsd", "grpo", "skill_grpo", "grpo_opsd", "skill_sd", "rlsd", "sdar", "opid",
               "opid_self", "seed_static", "seed", "seed_no_sft", "seed_no_opd", "seed_static_library", *CONTROLS, *GOVERNED)
"""Report row order of the policies (the OPID/SDAR main table, seed-algorithm.md §5.1: Vanilla, OPSD, GRPO,
Skill-GRPO, GRPO+OPSD, Skill-SD, RLSD, SDAR, OPID; then SEED-static, SEED). ``seed_core.methods`` adds the
"*" rows and the labels; every registered algorithm must be listed (tests/unit/test_methods.py). The ablations
come after it, as the paper's Table 2 (``ABLATIONS``) follows its main table; the controls (``CONTROLS``) last."""


def effective_rl(rl: "RLConfig", algorithm: Algorithm) -> "RLConfig":
    """``rl`` with the algorithm's fixed values applied: the coefficients the trainer actually uses."""
    if not algorithm.fixed:
        return rl
    return rl.model_copy(update=dict(algorithm.fixed))


def effective_config(cfg: "SeedConfig") -> "SeedConfig":
    """``cfg`` with ``effective_rl`` applied for ``cfg.rl.algorithm`` (idempotent)."""
    algorithm = ALGORITHMS.get(cfg.rl.algorithm)
    rl = effective_rl(cfg.rl, algorithm)
    return cfg if rl is cfg.rl else cfg.model_copy(update={"rl": rl})


def _rl_value(rl: "RLConfig", key: str) -> Any:
    """The value of ``rl.<field>`` (a dotted key a loss entry declares) in ``rl``."""
    section, _, name = key.partition(".")
    if section != "rl" or not hasattr(rl, name):
        raise KeyError(f"{key!r}: a distillation loss's coefficient and arguments are rl.<field> keys of RLConfig")
    return getattr(rl, name)


def loss_coef(rl: "RLConfig") -> float:
    """The coefficient of ``rl.distill_loss``'s term, read from the key its entry declares (``LossEntry.coef``)."""
    return float(_rl_value(rl, DISTILL_LOSSES.entry(rl.distill_loss).coef))


def loss_kwargs(rl: "RLConfig") -> dict[str, Any]:
    """The keyword arguments ``rl.distill_loss`` is called with, from the keys its entry declares (the gated
    loss's ``beta``: ``rl.gate_beta``; the others none)."""
    return {arg: _rl_value(rl, key) for arg, key in DISTILL_LOSSES.entry(rl.distill_loss).kwargs}


def effective_values(rl: "RLConfig", algorithm: Algorithm) -> dict[str, float]:
    """Numbers to log (``algo/...``): the coefficients used after ``effective_rl``; ``rl`` must be effective."""
    out = {"algo/pg_coef": float(rl.pg_coef), "algo/kl_coef": float(rl.kl_coef),
           "algo/entropy_coef": float(rl.entropy_coef)}
    if algorithm.distill:
        out["algo/lambda"] = float(loss_coef(rl))
        out |= {f"algo/{arg}": float(value) for arg, value in loss_kwargs(rl).items()}
    if algorithm.shaping == "opid":
        out["algo/opid_coef"] = float(rl.opid_coef)
    if algorithm.shaping == "rlsd":
        out["algo/rlsd_lambda0"] = float(rl.rlsd_lambda0)
    return out


def effective_tags(rl: "RLConfig", algorithm: Algorithm) -> dict[str, str]:
    """Names to log as tags: the teacher context, the distillation loss, the analyzer."""
    return {"algo/context": algorithm.context or "none",
            "algo/student_skills": str(algorithm.student_skills).lower(),
            "algo/distill_loss": rl.distill_loss if algorithm.distill else "none",
            "algo/analyzer": algorithm.analyzer or "none",
            "algo/governance": algorithm.analyzer_governance or "none"}
