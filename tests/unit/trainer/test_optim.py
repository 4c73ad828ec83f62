"""rl.optim picks AdamW's kernel; the host memory release before the step changes no number."""

from __future__ import annotations

import torch

from seed_core.config import RLConfig
from seed_core.trainer.optim import OPTIMIZERS, build_optimizer, release_host_memory


def _steps(optim: str, release: bool) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    optimizer = build_optimizer(model.parameters(), RLConfig(optim=optim, lr=1e-2, weight_decay=0.01))
    for _ in range(3):
        model(torch.randn(8, 16)).square().mean().backward()
        if release:
            release_host_memory(model)
        optimizer.step()
        optimizer.zero_grad()
    return [p.detach().clone() for p in model.parameters()]


def test_the_config_names_the_kernel_and_the_hyperparameters_reach_it() -> None:
    model = torch.nn.Linear(3, 3)
    plain = build_optimizer(model.parameters(), RLConfig(lr=3e-4, weight_decay=0.1))
    fused = build_optimizer(model.parameters(), RLConfig(optim="adamw_torch_fused", lr=3e-4, weight_decay=0.1))
    assert set(OPTIMIZERS) == {"adamw_torch", "adamw_torch_fused"}
    for optimizer in (plain, fused):
        group = optimizer.param_groups[0]
        assert isinstance(optimizer, torch.optim.AdamW)
        assert (group["lr"], group["weight_decay"], group["betas"]) == (3e-4, 0.1, (0.9, 0.999))
    assert not plain.param_groups[0]["fused"] and fused.param_groups[0]["fused"]


def test_releasing_host_memory_before_the_step_changes_no_bit() -> None:
    for a, b in zip(_steps("adamw_torch", release=False), _steps("adamw_torch", release=True)):
        assert torch.equal(a, b)


def test_the_fused_kernel_is_the_same_update_up_to_rounding() -> None:
    plain, fused = _steps("adamw_torch", release=False), _steps("adamw_torch_fused", release=False)
    assert all(torch.allclose(a, b, rtol=0, atol=1e-6) for a, b in zip(plain, fused))


def test_the_release_trims_glibc_heaps_for_a_model_on_the_cpu(monkeypatch) -> None:
    import seed_core.trainer.optim as optim

    assert optim._malloc_trim() is not None  # this machine's glibc has it: the real call is reachable
    calls: list[int] = []
    monkeypatch.setattr(optim, "_malloc_trim", lambda: calls.append)
    optim.release_host_memory(torch.nn.Linear(2, 2))
    assert calls == [0]
