"""The testbed model's corpus and builder (seed_core.modeling.testbed) on EZPoints with the compact prompt."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from seed_core.skills.insert import EPISODE_SKILL_TITLE
from seed_core.config import SeedConfig
from seed_core.envs import make_env
from seed_core.loader import with_overrides
from seed_core.modeling.testbed import build_corpus, build_testbed_model


def _cfg(**testbed) -> SeedConfig:
    return with_overrides(SeedConfig(), {
        "env.name": "ezpoints", "env.max_steps": 5, "env.history_length": 0, "env.ezpoints.prompt": "compact",
        **{f"testbed.{k}": v for k, v in testbed.items()}})


def _action(cfg: SeedConfig, response: str) -> str:
    return make_env(cfg.env).parse_action(response).action


def _unskilled(prompt: str) -> str:
    head, _, rest = prompt.partition(f"\n\n{EPISODE_SKILL_TITLE}\n")
    return head + "\n" + rest.split("\n\n", 1)[1]


@pytest.mark.parametrize("noise", [0.0, 1.0])
def test_skill_turns_carry_the_expert_action_in_the_same_states(noise: float) -> None:
    cfg = _cfg(episodes=8, noise=noise, skill_fraction=1.0, analysis_fraction=1.0)
    corpus = build_corpus(cfg)
    assert len(corpus.analysis) == 8 and len(corpus.skill) == len(corpus.agent)  # every step, every episode
    assert len(build_corpus(_cfg(episodes=8, noise=noise, analysis_fraction=0.25)).analysis) == 2
    agent = dict(corpus.agent)
    differ = 0
    for prompt, target in corpus.skill:
        assert EPISODE_SKILL_TITLE in prompt
        plain = _unskilled(prompt)
        assert plain in agent, "a skill turn is an agent state with the skill section inserted"
        differ += _action(cfg, agent[plain]) != _action(cfg, target)
    # noise 0: the agent played the expert; noise 1: its random moves differ from the expert's targets
    assert (differ == 0) if noise == 0.0 else (differ > len(corpus.skill) // 2)
    for prompt, target in corpus.analysis:
        assert "episode_skill" in json.loads(target) and prompt.strip()


def test_noise_controls_how_often_the_expert_wins() -> None:
    def wins(noise: float) -> int:
        return sum(json.loads(t)["episode_summary"].startswith("Built")
                   for _, t in build_corpus(_cfg(episodes=30, noise=noise, analysis_fraction=1.0)).analysis)

    assert wins(0.0) == 30 and wins(1.0) < wins(0.5) < 30


def test_the_builder_writes_a_loadable_chat_model(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from seed_core.config import ModelConfig
    from seed_core.modeling.models import encode_prompt, load_policy

    cfg = _cfg(episodes=3, epochs=1, hidden_size=32, layers=1, vocab_size=300, batch_size=8)
    with caplog.at_level(logging.INFO, logger="seed_core"):
        out = build_testbed_model(cfg, tmp_path / "testbed")
    progress = [r.getMessage() for r in caplog.records if ": step " in r.getMessage()]
    assert progress and all(line.startswith("testbed pretraining: step ") for line in progress), progress  # not sft's
    metrics = json.loads((out / "testbed_metrics.json").read_text())
    assert metrics["testbed/agent_examples"] > 0 and metrics["testbed/steps"] >= 1
    assert metrics["testbed/final_loss"] < metrics["testbed/first_loss"]
    policy = load_policy(ModelConfig(path=str(out), device="cpu"), trainable=False)
    assert policy.tokenizer.decode(encode_prompt(policy.tokenizer, "hi")).startswith("<|im_start|>user\nhi")


def test_two_builds_of_one_config_are_the_same_bytes(tmp_path: Path) -> None:
    """No wall time (or anything else of the run) in the model directory: its DVC hash, and with it every cell key
    and ``dvc.lock`` entry downstream, is the same for every build of one config under the same numerics."""
    import hashlib

    cfg = _cfg(episodes=3, epochs=1, hidden_size=32, layers=1, vocab_size=300, batch_size=8)

    def digests(out: Path) -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())}

    first, second = (digests(build_testbed_model(cfg, tmp_path / name)) for name in ("a", "b"))
    assert "testbed_metrics.json" in first and "model.safetensors" in first
    assert first == second
