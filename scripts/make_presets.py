"""Write presets/<env>-<backbone>.yaml: params.yaml with the paper settings of one environment and backbone.

    python scripts/make_presets.py          # rewrite every preset (run after params.yaml gains a key)

Values come from the OPID / SDAR example scripts (shared/docs/seed-algorithm.md §3.1-3.4); where they
differ, SDAR's per-environment values are used with OPID's environment settings (history window,
max steps, truncation), as §3.4 suggests. Not published for SEED and therefore [inferred]: the RL
round count (SDAR's 150), the SFT max length, and the Sokoban/EZPoints settings (verl-agent defaults).
A test checks that the checked-in presets equal what this script writes and that each one loads.

Each paper preset also gets a provenance card, presets/cards/<preset>.md: its result-changing values in the paper,
in SEED's released launcher and here, with the reason where they differ (scripts/preset_provenance.py). The script
refuses to write the cards while a preset holds a value its card does not record.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]

PAPER_COMMON: dict[str, Any] = {
    # fp32 master weights + bf16 autocast under FSDP2 on 8 GPUs; vLLM engines serve bf16
    "model.dtype": "float32", "model.device": "auto", "model.mixed_precision": "bf16",
    "model.gradient_checkpointing": True, "project.accelerate_config": "configs/accelerate/8gpu_fsdp.yaml",
    "rl.micro_batch_tokens": 0,  # GPU micro-batches by sample count (rl.micro_batch_size); the budget is for CPUs
    "rl.optim": "adamw_torch_fused",  # Hugging Face Trainer's and TRL's default: one kernel per step, no temporaries
    "env.ezpoints.prompt": "paper", "sft.batch_size": 4,
    "generation.backend": "vllm", "generation.vllm.dtype": "bfloat16", "generation.vllm.gpu_memory_utilization": 0.4,
    "generation.temperature": 1.0, "generation.eval_temperature": 0.4, "generation.max_new_tokens": 512,
    "generation.batch_size": 64,
    # register checkpoints as plain files: the transformers flavor would load each 1.5-7B model on CPU and copy it
    "tracking.model_flavor": "files",
    "collect.num_tasks": 180, "collect.group_size": 8,  # SEED README: 180 tasks x 8 rollouts
    "annotate.client": "openai",  # any OpenAI-compatible endpoint: OPENAI_BASE_URL / OPENAI_API_KEY
    "annotate.static_skill_tokens": 512,  # [inferred] static skill library per task type; prompts here allow 2-4k
    "sft.epochs": 3, "sft.lr": 1.0e-5, "sft.max_length": 4096,
    "rl.algorithm": "seed", "rl.rounds": 150, "rl.lr": 1.0e-6, "rl.opd_coef": 0.01, "rl.gate_beta": 5.0,
    "rl.clip_ratio_low": 0.2, "rl.clip_ratio_high": 0.2, "rl.analyzer_max_new_tokens": 1024,
    "rl.save_every": 10,  # a 3B policy's resume point (weights + AdamW moments) is ~36 GB: every 10th round
}
"""Shared by every paper preset."""

ENVIRONMENTS: dict[str, dict[str, Any]] = {
    "alfworld": {"env.name": "alfworld", "env.max_steps": 30, "env.history_length": 5,
                 "env.invalid_action_penalty": 0.1, "generation.max_prompt_tokens": 2048,
                 "rl.tasks_per_round": 16, "rl.group_size": 8, "rl.mini_batch_size": 256, "rl.micro_batch_size": 32,
                 "rl.kl_coef": 0.01, "rl.entropy_coef": 0.001,
                 "eval.num_tasks": 128, "eval.splits": ["valid_seen", "valid_unseen"]},
    "webshop": {"env.name": "webshop", "env.webshop.num_products": 1000, "env.webshop.num_test_goals": 500,
                "env.max_steps": 15, "env.history_length": 2,
                "env.webshop.num_products": 1000, "env.webshop.num_test_goals": 500,
                "env.invalid_action_penalty": 0.1, "generation.max_prompt_tokens": 4096,
                "rl.tasks_per_round": 16, "rl.group_size": 8, "rl.mini_batch_size": 64, "rl.micro_batch_size": 8,
                "rl.kl_coef": 0.01, "rl.entropy_coef": 0.001, "eval.num_tasks": 128, "eval.splits": ["test"]},
    "search": {"env.name": "search_qa", "env.search_qa.topk": 3,  # data_dir / retriever_url: the user's (docs/gpu.md)
               "env.max_steps": 4, "env.history_length": 4,
               "env.invalid_action_penalty": 0.01, "generation.max_prompt_tokens": 4096,
               "rl.tasks_per_round": 128, "rl.group_size": 8, "rl.mini_batch_size": 256, "rl.micro_batch_size": 16,
               "rl.kl_coef": 0.001, "rl.entropy_coef": 0.001, "rl.max_step_skills": 2,  # OPID Search: K = 2
               "eval.num_tasks": 512, "eval.splits": ["test"]},
    "sokoban": {"env.name": "sokoban", "env.max_steps": 15, "env.history_length": 2,
                "env.invalid_action_penalty": 0.1, "env.sokoban.dim_room": [6, 6], "env.sokoban.num_boxes": 1,
                "env.sokoban.search_depth": 30, "generation.max_prompt_tokens": 2048,
                "rl.tasks_per_round": 16, "rl.group_size": 8, "rl.mini_batch_size": 256, "rl.micro_batch_size": 32,
                "rl.kl_coef": 0.01, "rl.entropy_coef": 0.001, "eval.num_tasks": 128, "eval.splits": ["test"]},
    "ezpoints": {"env.name": "ezpoints", "env.max_steps": 8, "env.history_length": 2,
                 "env.invalid_action_penalty": 0.1, "env.ezpoints.target": 12, "env.ezpoints.max_formula_length": 5,
                 "generation.max_prompt_tokens": 2048,
                 "rl.tasks_per_round": 16, "rl.group_size": 8, "rl.mini_batch_size": 256, "rl.micro_batch_size": 32,
                 "rl.kl_coef": 0.01, "rl.entropy_coef": 0.001, "eval.num_tasks": 128, "eval.splits": ["test"]},
}
"""Per-environment settings (seed-algorithm.md §3.2-3.3; Sokoban/EZPoints: verl-agent defaults, §3.1)."""

BACKBONES: dict[str, dict[str, Any]] = {
    "qwen2.5-1.5b": {"model.path": "Qwen2.5-1.5B-Instruct"},
    "qwen2.5-3b": {"model.path": "Qwen2.5-3B-Instruct"},
    "qwen2.5-7b": {"model.path": "Qwen2.5-7B-Instruct", "rl.micro_batch_size": 8},
    "qwen3-1.7b": {"model.path": "Qwen3-1.7B", "model.chat_template_kwargs": {"enable_thinking": False}},
}
"""Hugging Face directories under $MODELS_ROOT (download them once on a networked machine)."""

HOURS_8GPU: dict[str, dict[str, float]] = {
    "alfworld": {"qwen2.5-1.5b": 10, "qwen2.5-3b": 14, "qwen2.5-7b": 22, "qwen3-1.7b": 11},
    "webshop": {"qwen2.5-1.5b": 5, "qwen2.5-3b": 7, "qwen2.5-7b": 12, "qwen3-1.7b": 5.5},
    "search": {"qwen2.5-1.5b": 5, "qwen2.5-3b": 8, "qwen2.5-7b": 15, "qwen3-1.7b": 5.5},
    "sokoban": {"qwen2.5-1.5b": 2.5}, "ezpoints": {"qwen2.5-1.5b": 2},
}
"""RL-stage hours on 8 x H100/H200 for 150 updates: ESTIMATES from the cost model in docs/gpu.md "GPU scale"
(vLLM decode ~10 ms per batched token step, measured CPU env step costs, training 6 N FLOPs per token
x (1 update + 3 scoring passes / 3) at 35 % MFU), not measurements. Stage 1 adds ~0.5-1 h."""

PRESETS = [(env, bb) for env in ("alfworld", "webshop", "search") for bb in BACKBONES] + [
    ("sokoban", "qwen2.5-1.5b"), ("ezpoints", "qwen2.5-1.5b")]
"""The paper's grid (environments x backbones of the OPID/SDAR tables) plus the two games."""


CPU_PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "smollm2-sokoban": (
        "SmolLM2-135M-Instruct on offline Sokoban (levels solvable in <= 3 moves), the pre-testbed embedded "
        "default: a real instruct LLM, but at ~80 tokens/s on 2 CPU cores RL does not move it measurably in "
        "20 minutes (docs/testbed.md)",
        {"model.path": "smollm2-135m-instruct", "env.name": "sokoban", "env.max_steps": 3, "env.history_length": 1,
         "env.ezpoints.prompt": "paper", "generation.batch_size": 16, "rl.mini_batch_size": 64,
         "generation.max_new_tokens": 48, "generation.eval_temperature": 0.4,
         "collect.num_tasks": 4, "collect.group_size": 2, "collect.expert_episodes": 6,
         "sft.epochs": 2, "sft.lr": 5.0e-5, "sft.batch_size": 4, "sft.max_length": 768, "sft.include_expert": True,
         "rl.rounds": 2, "rl.tasks_per_round": 1, "rl.group_size": 3, "rl.lr": 1.0e-6, "rl.micro_batch_size": 8, "rl.micro_batch_tokens": 512,
         "rl.analyzer_max_new_tokens": 96, "eval.num_tasks": 4}),
    "testbed-mechanism": (
        "the mechanism lab (issue 25, docs/mechanism.md): the embedded default where SEED's preconditions can hold. "
        "EZPoints with a hidden target (the sum of the two cards if the first card is red, their product if black; "
        "the task line says only 'the sum or the product'), the operator as the one action, a binary reward; a "
        "testbed whose plain turns are played by a naive player who always adds and whose skill turns teach it to "
        "follow a skill's content (30% carry another task's skill and its answer). Stage 1 at lr 2e-4 (the "
        "default's 1e-3 broke acting) and lambda 1 (the smallest of 0.01, 0.1, 1 whose gradient ratio passes 0.2), "
        "both chosen by seed preflight's thresholds before any RL was looked at. RL budget (rl.lr 3e-4, mini-batches "
        "of 16, 20 rounds: 160 updates) chosen on GRPO rows alone (seeds 0-1: GRPO >= SFT + 10 points, held-out "
        "format-valid >= 0.9 for GRPO from the base model and from SFT); the default's budget did not move GRPO, and "
        "rl.lr 1e-3 and 5e-4 lost the answer format (benchmarks/results/mechanism_budget.json)",
        {"env.max_steps": 1, "env.invalid_action_penalty": 0.0, "env.ezpoints.target_rule": "suit",
         "env.ezpoints.action_unit": "operator", "env.ezpoints.reward": "binary", "collect.num_tasks": 64,
         "sft.lr": 2.0e-4, "rl.opd_coef": 1.0, "rl.lr": 3.0e-4, "rl.mini_batch_size": 16, "rl.rounds": 20,
         "testbed.episodes": 600, "testbed.noise": 0.15,
         "testbed.skill_fraction": 1.0, "testbed.analysis_fraction": 0.25, "testbed.plain_policy": "naive",
         "testbed.mismatch_fraction": 0.3, "sweep.seeds": list(range(10)),
         "annotate.static_skill_tokens": 96,  # the lab's committed cells (sweep/cells) were computed at 96
         "sweep.methods": ["vanilla", "sft", "grpo", "seed_no_opd", "seed_static", "seed", "skill_grpo_star",
                           "vanilla_star", "seed_shuffled"]}),
}
CPU_PRESETS["testbed-mechanism-confirmatory"] = (
    "the confirmatory mechanism study (issue 39, benchmarks/mechanism_plan.yaml, registered before its cells ran): "
    "the mechanism lab's setting unchanged, its study seeds (10-19; the tuning seeds 0-3 are not study seeds) and its "
    "rows: GRPO, GRPO from SFT and its analysis probe, SEED, SEED-static, the governed analyzers (EMA, gated, "
    "anchored), the shuffled and empty teachers under the live and the frozen analyzer, and the oracle rows",
    {**CPU_PRESETS["testbed-mechanism"][1], "sweep.seeds": list(range(10, 20)),
     "sweep.methods": ["sft", "grpo", "seed_no_opd", "grpo_sft_probe", "seed", "seed_static", "seed_ema",
                       "seed_gated", "seed_anchored", "seed_shuffled", "seed_empty", "seed_static_shuffled",
                       "seed_static_empty", "opsd_oracle", "seed_oracle"]})
"""Small presets for a CPU (2 cores): name -> (what it is, overrides of params.yaml)."""


class _Dumper(yaml.SafeDumper):
    """Block style, except lists of scalars inline (``[6, 6]``), as in params.yaml."""


def _list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(not isinstance(item, (list, dict)) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _list)


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = tree
    for key in parents:
        node = node[key]
    if leaf not in node:
        raise KeyError(f"{dotted} is not a key of params.yaml")
    node[leaf] = value


def preset_text(env: str, backbone: str) -> str:
    name = f"{env}-{backbone}"
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for dotted, value in {**PAPER_COMMON, **ENVIRONMENTS[env], **BACKBONES[backbone],
                          "project.preset": name}.items():
        _set(params, dotted, value)
    header = (f"# Paper setting: {env} with {BACKBONES[backbone]['model.path']} (seed-algorithm.md §3).\n"
              f"# Generated by scripts/make_presets.py from params.yaml; edit that script, not this file.\n"
              f"# Run (8 GPUs): seed run --preset presets/{name}.yaml --name {name}\n"
              f"# Expected wall time on 8 x H100: ~{HOURS_8GPU[env][backbone]:g} h per RL run of {PAPER_COMMON['rl.rounds']} "
              f"updates, x3 for grpo + seed + seed_static (an estimate, see docs/gpu.md 'GPU scale'; 1 GPU: "
              f"configs/accelerate/1gpu.yaml)\n")
    return header + yaml.dump(params, Dumper=_Dumper, sort_keys=False)


def cpu_preset_text(name: str) -> str:
    what, overrides = CPU_PRESETS[name]
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for dotted, value in {**overrides, "project.preset": name}.items():
        _set(params, dotted, value)
    header = (f"# CPU preset: {what}.\n"
              f"# Generated by scripts/make_presets.py from params.yaml; edit that script, not this file.\n"
              f"# Run: seed run --preset presets/{name}.yaml --name {name}\n")
    return header + yaml.dump(params, Dumper=_Dumper, sort_keys=False)


def all_presets() -> dict[str, str]:
    """File stem -> text of every generated preset."""
    out = {f"{env}-{bb}": preset_text(env, bb) for env, bb in PRESETS}
    return out | {name: cpu_preset_text(name) for name in CPU_PRESETS}


def provenance() -> Any:
    """scripts/preset_provenance.py (scripts/ is no package: loaded by path)."""
    spec = importlib.util.spec_from_file_location("preset_provenance", ROOT / "scripts" / "preset_provenance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def all_cards() -> dict[str, str]:
    """File stem -> provenance card of every paper preset; SystemExit naming each value a card does not record."""
    cards = provenance()
    presets = {(env, bb): f"{env}-{bb}" for env, bb in PRESETS}
    stale = [line for (env, bb), name in presets.items() for line in cards.check(
        name, cards.knobs(env, BACKBONES[bb]["model.path"]), yaml.safe_load(preset_text(env, bb)))]
    if stale:
        raise SystemExit("\n".join(stale))
    return {name: cards.card_text(name, env, BACKBONES[bb]["model.path"]) for (env, bb), name in presets.items()}


def main() -> None:
    out = ROOT / "presets"
    out.mkdir(exist_ok=True)
    for stem, text in all_presets().items():
        path = out / f"{stem}.yaml"
        path.write_text(text)
        print(path.relative_to(ROOT), file=sys.stderr)
    (out / "cards").mkdir(exist_ok=True)
    for stem, text in all_cards().items():
        path = out / "cards" / f"{stem}.md"
        path.write_text(text)
        print(path.relative_to(ROOT), file=sys.stderr)


if __name__ == "__main__":
    main()
