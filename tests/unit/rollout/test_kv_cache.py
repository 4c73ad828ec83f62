"""BufferedLayer (seed_core.rollout.kv_cache): generation with the one-buffer KV cache gives transformers'
DynamicCache bits (greedy and sampled, 1 and 2 threads), and the cache really is one buffer (no copy per step)."""

import pytest
import torch
from transformers.cache_utils import DynamicCache

from seed_core.config import GenerationConfig
from seed_core.rollout.backends import HFBackend
from seed_core.rollout.kv_cache import BufferedLayer, buffered_cache

PROMPTS = ["go left", "push the box up and then go right twice", "a longer prompt about the room and its walls",
           "down", "up up", "wait here for a while", "x", "the box is stuck"]


def _generate(policy, monkeypatch, buffered: bool, temperature: float):
    monkeypatch.setattr(HFBackend, "use_buffered_cache", buffered)
    backend = HFBackend(policy, GenerationConfig(batch_size=8, max_prompt_tokens=64))
    got = backend.generate(PROMPTS, temperature=temperature, max_new_tokens=12, seed=3)
    return [(c.token_ids, c.logprobs, c.text) for c in got]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_buffered_cache_generates_dynamic_cache_bits(tiny_policy, monkeypatch, threads, temperature):
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        want = _generate(tiny_policy, monkeypatch, False, temperature)
        got = _generate(tiny_policy, monkeypatch, True, temperature)
    finally:
        torch.set_num_threads(saved)
    assert got == want
    assert sum(len(ids) for ids, _, _ in got) > len(PROMPTS)  # several decoding steps really ran


def test_generate_uses_one_buffer_per_layer(tiny_policy, monkeypatch):
    """Every step's keys are a view of the buffer allocated at the first step (concatenation would allocate anew)."""
    seen: list[tuple[int, int, int]] = []
    real = BufferedLayer.update

    def watching(self, key_states, value_states, *args, **kwargs):
        keys, values = real(self, key_states, value_states, *args, **kwargs)
        seen.append((id(self), keys.data_ptr(), keys.shape[-2]))
        return keys, values

    monkeypatch.setattr(BufferedLayer, "update", watching)
    _generate(tiny_policy, monkeypatch, True, 0.0)
    per_layer: dict[int, set[int]] = {}
    for layer, ptr, _ in seen:
        per_layer.setdefault(layer, set()).add(ptr)
    assert per_layer and all(len(ptrs) == 1 for ptrs in per_layer.values())
    assert max(n for _, _, n in seen) > min(n for _, _, n in seen)  # the cache grew inside the one buffer


def test_layer_update_appends_and_restarts_after_a_batch_select():
    layer = BufferedLayer(capacity=4)
    k = torch.arange(2 * 1 * 3 * 2, dtype=torch.float32).reshape(2, 1, 3, 2)
    keys, values = layer.update(k, -k)
    assert torch.equal(keys, k) and torch.equal(values, -k)
    step = torch.full((2, 1, 1, 2), 7.0)
    keys, _ = layer.update(step, step)
    assert torch.equal(keys, torch.cat([k, step], dim=-2)) and keys.data_ptr() == layer.buffers[0].data_ptr()
    for extra in range(3):  # past the capacity: a larger buffer, the earlier positions copied over
        keys, _ = layer.update(step + extra, step)
    assert keys.shape[-2] == 7 and torch.equal(keys[..., :3, :], k) and torch.equal(keys[..., 6:, :], step + 2)
    layer.batch_select_indices(torch.tensor([1]))  # a new tensor: the next update starts a buffer from it
    keys, _ = layer.update(step[:1], step[:1])
    assert keys.shape == (1, 1, 8, 2) and torch.equal(keys[0, :, :3], k[1])


def test_buffered_cache_keeps_transformers_cache_for_other_layer_types(tiny_policy):
    cache = buffered_cache(tiny_policy.model.config, 16)
    assert isinstance(cache, DynamicCache) and all(isinstance(layer, BufferedLayer) for layer in cache.layers)
    base = tiny_policy.model.config
    config = base.__class__(**{**base.to_dict(), "sliding_window": 4, "use_sliding_window": True,
                               "layer_types": ["sliding_attention"] * base.num_hidden_layers})
    assert buffered_cache(config, 16) is None
