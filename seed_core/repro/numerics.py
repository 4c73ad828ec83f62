"""CPU numerics pinned in every stage process, so a run's floats do not depend on which x86 CPU it ran on.

Float results of training depend on the kernels torch picks for the CPU: ATen's vectorized kernels
(``ATEN_CPU_CAPABILITY``: AVX-512 where the CPU has it, else AVX2), MKL's GEMM code path (``MKL_CBWR``) and
oneDNN's (``ONEDNN_MAX_CPU_ISA``); the testbed then amplifies a difference in the last bit chaotically through
its pretraining and RL (issue 28). ``PINNED`` holds the settings that cost little (measured by
``benchmarks/numerics_probe.py`` on a 2-core AMD EPYC with AVX-512, ``benchmarks/results/numerics_probe*.json``;
each ``Pin.why`` has its numbers, CPU time of 20 AdamW steps of a 4-layer Qwen2 on one thread against native),
chosen so every x86-64 CPU with AVX2 (Intel since 2013, AMD since 2015) can take the same code paths.
Not pinned, as they changed no bits there: the torch thread count (1 vs 2, also ``OMP_NUM_THREADS``) and
``torch.use_deterministic_algorithms`` (CPU kernels are deterministic already).

``pin`` applies them at the start of a process, before torch loads (the libraries read them when they load or on
their first call): ``flows/__init__`` (every ``python -m flows.<stage>``, the warm stage server and its forks,
sweep cells and pool workers' flow runs), ``seed_core/stages/__init__`` (the engine entry points, ``accelerate
launch``'s processes) and ``seed_app/__init__`` (the ``seed`` command's own process: ``seed preflight``, the
pipeline run's MLflow params).

Contract:
- A variable already in the environment wins (the user's choice, recorded as ``user``); ``SEED_NUMERICS=native``
  pins none of them (each library's own choice for the CPU; ``VAR=`` does so for one, ATen warning about it).
  ``pin`` sets only the others and names them in ``MARKER_VAR``, so a child process inheriting them tells a
  pinned value from a user's.
- ``pin`` does nothing once torch is imported (a value set then may or may not take effect, and the record
  would claim it did); ``record`` then reads ``unpinned`` and torch's actual capability.
- ``record`` (JSON, the ``numerics`` section of every stage's ``resolved_config.json``, ``write_resolved``) and
  ``mlflow_params`` (``numerics.*`` params of every MLflow run, ``seed_core.tracking.open_run``) say what a
  process ran under. Standard library only: importable before torch.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, MutableMapping

from seed_core.runtime.io import atomic_write_text

if TYPE_CHECKING:
    from seed_core.config import SeedConfig


@dataclass(frozen=True)
class Pin:
    """One pinned variable: its value and why (what it changes, what it costs, as measured)."""

    value: str
    why: str


PINNED: dict[str, Pin] = {
    "ATEN_CPU_CAPABILITY": Pin("avx2", "ATen's vectorized kernels (softmax, norms, elementwise, reductions): the one "
                                       "that changed the probe's weights on an AVX-512 CPU (avx2 and default each "
                                       "give other bits than the native avx512); CPU time x0.99 of native "
                                       "(default, no SIMD: x1.20)"),
    "MKL_CBWR": Pin("AVX2", "MKL's GEMM code path: AVX2 on every CPU that has it. On the AMD probe machine MKL takes "
                            "that path anyway (AVX2 and AVX512 gave native's bits, x0.95 CPU time); MKL's dispatch "
                            "takes AVX-512 code on Intel CPUs that have it (not measurable here). COMPATIBLE (SSE2) "
                            "changes the bits and costs x1.91: not pinned"),
    "ONEDNN_MAX_CPU_ISA": Pin("AVX2", "oneDNN at most AVX2: no change on the probe (its fp32 linear layers go "
                                      "through MKL), x0.98; pinned for the ops that do use oneDNN"),
}
"""Variable -> the value every stage process runs under unless the user set it."""
SWITCH_VAR = "SEED_NUMERICS"
"""``SEED_NUMERICS=native``: pin nothing (each library's own choice for this CPU, e.g. AVX-512 kernels)."""
MARKER_VAR = "SEED_NUMERICS_PINNED"
"""Run-context variable: the comma-separated names ``pin`` set (a child inherits both them and this list)."""
RECORD_KEY = "numerics"
"""The section of ``resolved_config.json`` that holds ``record()`` (not a setting: the loader drops it)."""


def _pinned_names(environ: MutableMapping[str, str]) -> set[str]:
    return {n for n in environ.get(MARKER_VAR, "").split(",") if n}


def source(name: str, environ: MutableMapping[str, str] | None = None) -> str:
    """``pinned`` (set by ``pin`` here or in a parent), ``user`` (in the environment otherwise: it wins), or
    ``unpinned`` (not set at all: the library's own choice, e.g. torch was loaded before ``pin``)."""
    env = os.environ if environ is None else environ
    if name not in env:
        return "unpinned"
    pin_ = PINNED.get(name)
    return "pinned" if pin_ and name in _pinned_names(env) and env[name] == pin_.value else "user"


def pin(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set each ``PINNED`` variable the environment does not have; returns what was set (name -> value). Nothing
    once torch is imported (see the module contract)."""
    env = os.environ if environ is None else environ
    if (environ is None and "torch" in sys.modules) or env.get(SWITCH_VAR) == "native":
        return {}
    chosen = {name: p.value for name, p in PINNED.items() if name not in env}
    env.update(chosen)
    if chosen:
        env[MARKER_VAR] = ",".join(sorted(_pinned_names(env) | set(chosen)))
    return chosen


def effective(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """What a fresh stage process started from this environment runs under: the user's value where set, else
    the pinned one (``""``: the library's native choice; all of them under ``SEED_NUMERICS=native``)."""
    env = os.environ if environ is None else environ
    native = env.get(SWITCH_VAR) == "native"
    return {name: env.get(name, "" if native else p.value) for name, p in PINNED.items()}


def cpu() -> dict[str, Any]:
    """This machine's CPU model and its SIMD flags (``/proc/cpuinfo``; empty elsewhere)."""
    path = Path("/proc/cpuinfo")
    lines = path.read_text().splitlines() if path.is_file() else []
    model = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in lines if ln.startswith("flags")), [])
    return {"cpu_model": model, "isa": sorted(f for f in set(flags) if f.startswith(("avx", "amx", "fma")))}


def record(environ: MutableMapping[str, str] | None = None) -> dict[str, Any]:
    """What this process runs under: each pinned variable's value and source, the CPU, and, when torch is loaded,
    its version, thread count and the ATen capability actually in use."""
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {"settings": {n: env.get(n, "") for n in PINNED},
                           "sources": {n: source(n, env) for n in PINNED}, **cpu()}
    torch = sys.modules.get("torch")
    if torch is not None:
        out |= {"torch": str(torch.__version__), "torch_threads": int(torch.get_num_threads()),
                "cpu_capability": str(torch.backends.cpu.get_cpu_capability())}
    return out


def mlflow_params(rec: dict[str, Any] | None = None) -> dict[str, str]:
    """``record()`` as flat MLflow params: ``numerics.<VAR>`` = ``"<value> (<source>)"``, ``numerics.cpu_model``, ..."""
    rec = record() if rec is None else rec
    out = {f"{RECORD_KEY}.{n}": f"{v or '-'} ({rec['sources'][n]})" for n, v in rec["settings"].items()}
    for key in ("cpu_model", "torch", "torch_threads", "cpu_capability"):
        if key in rec:
            out[f"{RECORD_KEY}.{key}"] = str(rec[key])
    out[f"{RECORD_KEY}.isa"] = " ".join(rec["isa"])
    return out


def write_resolved(cfg: SeedConfig, path: str | Path) -> Path:
    """``resolved_config.json``: the resolved config (``seed_core.config.dump_resolved``) plus the ``numerics``
    section of this process (``record()``), atomically."""
    data = {**cfg.model_dump(mode="json"), RECORD_KEY: record()}
    return atomic_write_text(Path(path), json.dumps(data, indent=2, sort_keys=True))
