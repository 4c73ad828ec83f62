"""Test and benchmark helpers that need real engine pieces (no mocks): a tiny policy that can analyze.

``build_tiny_analyzer_model`` is Stage 1 in miniature: a random tiny model gets a few SFT steps on
analyzer prompts built from real Sokoban/EZPoints/Search-QA/WebShop observations with a short skill JSON as target, so its
greedy self-analysis parses and the SEED teacher pass runs on real skills.
"""

from __future__ import annotations

from pathlib import Path

SKILL_JSON = '{"episode_skill": "push the box"}'


def build_tiny_analyzer_model(out_dir: str | Path, seed: int = 0) -> Path:
    from seed_core.analyzer.prompts import AnalysisStep, build_analysis_prompt
    from seed_core.config import EnvConfig, ModelConfig, SFTConfig
    from seed_core.envs import make_env
    from seed_core.models import build_tiny_model, is_complete_model_dir, load_policy
    from seed_core.models import make_encoder
    from seed_core.trainer.checkpoint import save_checkpoint
    from seed_core.trainer.sft import run_sft_loop, tokenize_examples

    out_dir = Path(out_dir)
    if is_complete_model_dir(out_dir):
        return out_dir
    base = build_tiny_model(out_dir.with_name(out_dir.name + "-base"), seed=seed)
    policy = load_policy(ModelConfig(path=str(base), device="cpu"))
    prompts = []
    for i, name in enumerate(["sokoban", "ezpoints", "search_qa", "webshop"] * 2):
        env = make_env(EnvConfig(name=name))
        obs = env.reset(env.make_tasks("train", 1, seed=i)[0])
        steps = [AnalysisStep(k, obs, f"<think>{k}</think> junk {i}", 0.5 * k) for k in range(1 + i % 3)]
        prompts.append(build_analysis_prompt(env.task_description(), steps, success=bool(i % 2)))
    encode = make_encoder(policy.tokenizer, {}, 256)
    data = tokenize_examples([(p, SKILL_JSON) for p in prompts], encode, policy.tokenizer, 300)
    history = run_sft_loop(policy.model, data, SFTConfig(epochs=40, lr=5e-3, batch_size=2, warmup_ratio=0.0),
                           policy.tokenizer.pad_token_id, seed=seed)
    if history[-1]["sft/loss"] > 0.1 * history[0]["sft/loss"]:
        raise RuntimeError(f"analyzer warm-up did not converge: loss {history[0]['sft/loss']:.3f} -> "
                           f"{history[-1]['sft/loss']:.3f}")
    return save_checkpoint(policy.model, policy.tokenizer, out_dir)
