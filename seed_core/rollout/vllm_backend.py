"""The ``vllm`` generation backend: the ``hf`` contract (``Completion`` with the exact sampled token ids)
served by vLLM engines in their own environment (``vllm_engine``), over HTTP.

Each prompt is rendered and encoded by *our* tokenizer exactly as ``HFBackend.encode`` does (chat
template, left truncation to ``max_prompt_tokens``) and sent as token ids to ``/v1/completions``, one
request per prompt, all in flight at once (the engine batches them), with ``return_token_ids`` and
``logprobs=0``: the answer carries the generated ids and their logprobs under the sampled distribution
(engines run with ``--logprobs-mode processed_logprobs``). Stop ids are ``eos_ids(policy)``, kept in
``token_ids`` like hf; the text is decoded by our tokenizer. ``temperature == 0`` is greedy; sampling uses
``top_p`` / ``top_k`` from the config, penalties neutral; ``seed`` gives request ``i`` the seed ``seed + i``
(reproducible whatever the batching). Prompts are split into contiguous chunks over the
``num_engines`` engines (a GRPO group stays on one engine and shares its prefix cache); results come
back in prompt order.

Before each ``generate`` the engines are made to serve ``policy.source`` (the directory the policy was
loaded from; in-memory weight changes after that are not seen). A trainable policy owns one reloaded
slot; a frozen model (analyzer checkpoint, evaluation) gets engines of its own (see ``vllm_engine``).
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seed_core.config import GenerationConfig
from seed_core.modeling.models import encode_prompt
from seed_core.rollout.completion import Completion, cut_at_eos, eos_ids
from seed_core.rollout.vllm_engine import (
    POOL,
    Engine,
    EngineError,
    EnginePool,
    launch_group,
    remote_engine,
    resolve_python,
)
from seed_core.rollout.vllm_launch import launch_specs

if TYPE_CHECKING:
    from seed_core.modeling.models import Policy

MAX_IN_FLIGHT = 256
"""Requests open at once per engine (the engine's own scheduler batches and queues them)."""
SHAPE_KEYS = ("architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size",
              "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "tie_word_embeddings")


def model_shape(model_dir: Path) -> str:
    """What must match for weights to be reloaded in place: the config fields that fix tensor shapes."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return json.dumps({k: config.get(k) for k in SHAPE_KEYS}, sort_keys=True)


def is_trainable(policy: Policy) -> bool:
    return any(p.requires_grad for p in policy.model.parameters())


def split_evenly(n: int, parts: int) -> list[range]:
    """``parts`` contiguous index ranges covering ``range(n)``, sizes differing by at most one."""
    base, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


class VLLMBackend:
    """Generation on vLLM engines that serve ``policy.source``; same interface as ``HFBackend``."""

    def __init__(self, policy: Policy, gen_cfg: GenerationConfig, *, pool: EnginePool = POOL,
                 local_rank: int | None = None) -> None:
        if policy.source is None:
            raise EngineError("the vllm backend needs policy.source (the model directory the engine loads); "
                              "load the policy with seed_core.modeling.models.load_policy")
        self.policy = policy
        self.gen_cfg = gen_cfg
        self.cfg = gen_cfg.vllm
        self.source = Path(policy.source).resolve()
        self.stop_ids = eos_ids(policy)
        self.pool = pool
        self.remote = [u.strip() for u in self.cfg.base_url.split(",") if u.strip()]
        self.python = None if self.remote else resolve_python(self.cfg)  # fail fast, before any work
        self._local_rank = local_rank

    # ------------------------------------------------------------------ engines

    def pool_key(self) -> str:
        """Launch settings + model shape + role (the trainable policy, or this frozen directory); a
        remote server is one slot whatever the role, reloaded for whichever backend uses it."""
        if self.remote:  # one server, whoever asks: its group tracks which weights it holds
            return "remote|" + ",".join(self.remote)
        role = "policy" if is_trainable(self.policy) else f"frozen:{self.source}"
        settings = self.cfg.model_dump_json(exclude={"startup_timeout_s"})
        digest = hashlib.sha256(f"{settings}|{model_shape(self.source)}".encode()).hexdigest()[:16]
        return f"{role}|{digest}"

    def _launch(self) -> list[Engine]:
        if self.remote:
            return [remote_engine(url) for url in self.remote]
        import torch

        use_gpus = torch.cuda.is_available()
        # GPU placement is relative to the devices this process sees (an infrastructure variable, not a setting)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES") if use_gpus else None
        assert self.python is not None
        specs = launch_specs(self.cfg, self.source, python=self.python, local_rank=self.local_rank(),
                             use_gpus=use_gpus, visible=visible)
        return launch_group(specs)

    def local_rank(self) -> int:
        if self._local_rank is None:
            import torch

            if not torch.cuda.is_available():
                return 0
            from accelerate import PartialState

            self._local_rank = int(PartialState().local_process_index)
        return self._local_rank

    # ------------------------------------------------------------------ generation

    def encode(self, prompt: str) -> list[int]:
        """Chat-templated prompt ids, cut from the left to ``max_prompt_tokens`` (as ``HFBackend.encode``)."""
        ids = encode_prompt(self.policy.tokenizer, prompt, self.policy.chat_template_kwargs)
        return ids[-self.gen_cfg.max_prompt_tokens:]

    def request(self, ids: list[int], *, temperature: float, max_new_tokens: int, seed: int | None) -> dict[str, Any]:
        """The ``/v1/completions`` body for one prompt (without ``model``)."""
        greedy = temperature == 0
        body: dict[str, Any] = {
            "prompt": ids, "max_tokens": max_new_tokens, "temperature": 0.0 if greedy else temperature,
            "top_p": 1.0 if greedy else self.gen_cfg.top_p, "top_k": 0 if greedy else self.gen_cfg.top_k,
            "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
            "n": 1, "stop_token_ids": self.stop_ids, "logprobs": 0, "return_token_ids": True,
            "skip_special_tokens": True,
        }
        if seed is not None:
            body["seed"] = seed
        return body

    def generate(self, prompts: list[str], *, temperature: float, max_new_tokens: int,
                 seed: int | None = None) -> list[Completion]:
        """One ``Completion`` per prompt, in order; greedy when ``temperature == 0``."""
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
        if not prompts:
            return []
        encoded = [self.encode(p) for p in prompts]
        longest = max(len(ids) for ids in encoded)
        if longest + max_new_tokens > self.cfg.max_model_len:
            raise ValueError(
                f"a prompt of {longest} tokens + max_new_tokens {max_new_tokens} exceeds generation.vllm.max_model_len "
                f"{self.cfg.max_model_len}; raise max_model_len or lower generation.max_prompt_tokens")
        bodies = [self.request(ids, temperature=temperature, max_new_tokens=max_new_tokens,
                               seed=None if seed is None else seed + i) for i, ids in enumerate(encoded)]
        group = self.pool.get(self.pool_key(), self._launch)
        with group.serving(self.source) as engines:
            jobs = [(engines[e], i) for e, chunk in enumerate(split_evenly(len(bodies), len(engines))) for i in chunk]
            workers = min(len(jobs), MAX_IN_FLIGHT * len(engines))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                choices = list(pool.map(lambda job: job[0].complete(bodies[job[1]]), jobs))
        return [self._completion(choice, engine.url) for choice, (engine, _) in zip(choices, jobs)]

    def _completion(self, choice: dict[str, Any], url: str) -> Completion:
        token_ids = choice.get("token_ids")
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
        if not isinstance(token_ids, list) or not isinstance(logprobs, list) or len(token_ids) != len(logprobs):
            raise EngineError(f"{url}/v1/completions answered without matching token_ids and logprobs (is it a "
                              f"vLLM server >= 0.10 with return_token_ids?): {json.dumps(choice)[:500]}")
        n = cut_at_eos([int(t) for t in token_ids], self.stop_ids)
        ids = [int(t) for t in token_ids[:n]]
        return Completion(text=self.policy.tokenizer.decode(ids, skip_special_tokens=True), token_ids=ids,
                          logprobs=[float(lp) for lp in logprobs[:n]])
