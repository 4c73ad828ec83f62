"""A KV cache that writes each generated token into a buffer allocated once, instead of concatenating (issue 29).

transformers' ``DynamicLayer.update`` grows the cache by ``torch.cat`` at every decoding step, so step ``t`` of a
batch copies the whole cache so far: for a self-analysis batch of the default (31 prompts, 730 positions wide,
~120 new tokens, 4 layers) that is 15% of the batch's time (``aten::cat``, profiled on the testbed).
``BufferedLayer`` allocates ``(B, heads, capacity, head_dim)`` once (``capacity`` = prompt width + new tokens) and
writes each step's keys and values into it; ``keys``/``values`` are views of its first ``n`` positions:

    buffer[..., n:n + k, :] = new_states ;  keys = buffer[..., :n + k, :]

The attention reads the same numbers at the same positions, only through other strides, so the logits are bit
for bit those of ``DynamicLayer``: checked on the testbed's five analysis batches of one SEED round (a one-off
probe, 1 and 2 threads, greedy and sampled), in ``benchmarks/iteration_cost.py``'s identity check, and on the tiny
test model in tests/unit/rollout/test_kv_cache.py. Anything that replaces ``keys`` by a new tensor
(``batch_select_indices``, ``crop``, ``reorder_cache``) leaves a view of nothing: the next ``update`` sees that
``keys`` no longer lies in the buffer and starts a new one from it.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer


class BufferedLayer(DynamicLayer):
    """``DynamicLayer`` whose keys and values are views of one preallocated buffer (module docstring)."""

    def __init__(self, capacity: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.capacity = capacity
        self.buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def _holds(self, n: int, add: int, rows: int) -> bool:
        """Whether the buffer has room for ``add`` more positions and ``keys`` are still its first ``n``."""
        if self.buffers is None:
            return False
        keys = self.buffers[0]
        return keys.shape[0] == rows and keys.shape[-2] >= n + add and (n == 0 or self.keys.data_ptr() ==
                                                                         keys.data_ptr())

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, add = self.get_seq_length(), key_states.shape[-2]
        if not self._holds(n, add, key_states.shape[0]):
            size = max(self.capacity, 2 * (n + add))
            rows, heads, _, _ = key_states.shape
            fresh = (key_states.new_empty(rows, heads, size, key_states.shape[-1]),
                     value_states.new_empty(rows, heads, size, value_states.shape[-1]))
            if n:
                fresh[0][..., :n, :] = self.keys
                fresh[1][..., :n, :] = self.values
            self.buffers = fresh
        keys, values = self.buffers
        keys[..., n:n + add, :] = key_states
        values[..., n:n + add, :] = value_states
        self.keys, self.values = keys[..., :n + add, :], values[..., :n + add, :]
        return self.keys, self.values


def buffered_cache(config: Any, capacity: int) -> DynamicCache | None:
    """A ``DynamicCache`` of ``BufferedLayer``s holding ``capacity`` positions per layer without a copy, or None
    when the model's cache is not all plain ``DynamicLayer``s (sliding-window or other layer types keep
    transformers' own cache: ``generate`` builds it when it gets none)."""
    cache = DynamicCache(config=config)
    if not cache.layers or any(type(layer) is not DynamicLayer for layer in cache.layers):
        return None
    cache.layers = [BufferedLayer(capacity) for _ in cache.layers]
    return cache


class WriteOnceLayer(DynamicLayer):
    """The cache of a shared-prefix pass (``trainer.logprobs.shared_response_logprobs``): keeps the first keys and
    values it is given and returns every input unchanged. Under activation checkpointing the backward replays the
    layer with the same input; a ``DynamicLayer`` would append the prompt a second time, this one stores nothing."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)  # sets empty keys: the prompt's replace them
            self.keys, self.values = key_states, value_states
        return key_states, value_states


class ReadOnlyLayer(DynamicLayer):
    """The cache of a shared-prefix continuation pass: the U distinct prompts' keys and values and each of the B rows'
    prompt (``rows``), read, never extended: ``update`` returns ``cat(prompt[rows], new)`` and keeps nothing, so a
    checkpointed replay of the layer sees the same P cached positions as the first run. The rows are indexed inside
    ``update``, so one layer's (B, heads, P, dim) copy lives at a time, not all layers' at once."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, rows: torch.Tensor) -> None:
        super().__init__()
        self.lazy_initialization(keys, values)
        self.keys, self.values, self.rows = keys, values, rows

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.cat([self.keys[self.rows], key_states], dim=-2),
                torch.cat([self.values[self.rows], value_states], dim=-2))


def prefix_cache(config: Any) -> DynamicCache | None:
    """A ``DynamicCache`` of ``WriteOnceLayer``s for a prefix pass, or None when the model's cache is not all plain
    ``DynamicLayer``s (sliding windows and other layer types are not shared)."""
    cache = DynamicCache(config=config)
    if not cache.layers or any(type(layer) is not DynamicLayer for layer in cache.layers):
        return None
    cache.layers = [WriteOnceLayer() for _ in cache.layers]
    return cache


def continuation_cache(config: Any, keys_values: list[tuple[torch.Tensor, torch.Tensor]],
                       rows: torch.Tensor) -> DynamicCache:
    """``ReadOnlyLayer``s over each layer's prompt ``keys_values`` (U rows), read at the batch rows ``rows`` (B,): a new
    cache, since a checkpointed replay of the prefix pass still writes to (and reads nothing from) the prefix's."""
    cache = DynamicCache(config=config)
    cache.layers = [ReadOnlyLayer(keys, values, rows) for keys, values in keys_values]
    return cache
