"""``vllm_worker._repack_cpu_gemm_weights`` without vLLM: which layers it re-packs after a reload (the real
engine check is tests/vllm/test_vllm_rl.py::test_a_reload_refreshes_every_weight_tied_embeddings_included)."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from seed_core.rollout import vllm_worker


def _layer(weight: torch.Tensor, packed: bool = True) -> torch.nn.Module:
    layer = torch.nn.Module()
    layer.weight = torch.nn.Parameter(weight, requires_grad=False)
    if packed:
        layer.cpu_linear = lambda x, weight, bias: x
    return layer


def test_repacks_the_layers_that_keep_their_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[torch.nn.Module, bool]] = []
    fake = types.ModuleType("vllm.model_executor.layers.utils")
    fake.dispatch_cpu_unquantized_gemm = lambda layer, remove_weight: calls.append((layer, remove_weight))
    for name in ("vllm", "vllm.model_executor", "vllm.model_executor.layers"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "vllm.model_executor.layers.utils", fake)
    embedding = _layer(torch.ones(8, 4))  # kept weight (the tied embedding / lm_head): re-packed
    linear = _layer(torch.empty(0))  # packed with its weight removed: vLLM's reload rebuilt it
    plain = _layer(torch.ones(4, 4), packed=False)  # no CPU GEMM at all (a GPU worker)
    conv = _layer(torch.ones(4, 1, 4))  # not a GEMM
    model = torch.nn.ModuleList([embedding, linear, plain, conv])
    assert vllm_worker._repack_cpu_gemm_weights(model) == 1
    assert calls == [(embedding, False)]


def test_without_vllm_nothing_is_repacked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import fails
    assert vllm_worker._repack_cpu_gemm_weights(torch.nn.ModuleList([_layer(torch.ones(2, 2))])) == 0
