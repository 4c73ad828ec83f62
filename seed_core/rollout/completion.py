"""What every generation backend returns (``Completion``) and where a completion ends (``eos_ids``,
``cut_at_eos``): shared by the in-process backends (``backends``) and the vLLM one (``vllm_backend``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seed_core.modeling.models import Policy


@dataclass(frozen=True)
class Completion:
    """One generated answer: ``token_ids`` end at (and include) the first EOS, or at the token budget;
    ``text`` is their decoding without special tokens; ``logprobs[i] = log p(token_ids[i])`` under the
    distribution actually sampled from (after temperature / top-k / top-p)."""

    text: str
    token_ids: list[int]
    logprobs: list[float]


def eos_ids(policy: Policy) -> list[int]:
    """End-of-turn ids: the tokenizer's EOS plus any the model's generation config declares."""
    declared = policy.model.generation_config.eos_token_id
    declared = declared if isinstance(declared, list) else [declared]
    ids = [policy.tokenizer.eos_token_id, *declared]
    return sorted({int(i) for i in ids if i is not None})


def cut_at_eos(token_ids: list[int], stop_ids: list[int]) -> int:
    """Length of the completion: up to and including the first stop id, else all tokens."""
    for i, tok in enumerate(token_ids):
        if tok in stop_ids:
            return i + 1
    return len(token_ids)
