"""Are the golden check's bits the same on other x86 CPU models? Answered on one machine by emulating them.

    python benchmarks/numerics_emulated.py [--models EPYC-Milan Haswell-v4 Cascadelake-Server-v5]
                                           [--cbwr AVX2 COMPATIBLE] [--out benchmarks/results/numerics_emulated.json]

Each (CPU model, ``MKL_CBWR``) pair runs ``python -m seed_core.repro.golden`` (the tiny pinned testbed and one RL round
behind ``seed doctor``) in a fresh process at one torch thread: ``native`` on this machine's CPU, every other model
under ``qemu-x86_64 -cpu MODEL`` (QEMU user mode, TCG). TCG executes every instruction in software and answers
CPUID as the named model does, so each library that dispatches on CPUID (MKL, oneDNN, ATen) takes the code path it
takes on that model, vendor included (``GenuineIntel`` for the Intel models). The other pins stay as
``seed_core.repro.numerics`` sets them; ``MKL_CBWR`` is set per run (``AVX2`` is the pinned value).

The control that would expose an emulator artefact: an emulated model of the native CPU's own vendor (``EPYC-Milan``
on an AMD EPYC) against native. Where the two differ, emulation departs from this silicon (measured: float sqrt,
not correctly rounded on either, softmax and log-softmax at 256 columns, and AdamW through sqrt), so golden hashes
are compared between emulated models (the same emulator, other CPUID answers), never an emulated model with a real
one. The emulator computes each instruction the same way whatever model it answers as, so agreement between emulated
models shows the same code paths, not the same bits on real silicon of both vendors. ``ops`` hashes single ops
(MKL's GEMM and GEMV, exp, sqrt, softmax, AdamW, ...) so a difference can be traced to the library that makes it.

Record per run: model, vendor (by QEMU's model name; ``native``: /proc/cpuinfo), settings, hashes, ``ops``,
seconds, ``same_as_native`` and ``same_as_first_emulated`` (hashes equal to native's / to the first emulated
model's under the same ``MKL_CBWR``), ``ops_differing_from_native`` / ``ops_differing_from_first_emulated``, and
``same_as_reference`` (equal to the first committed ``benchmarks/results/numerics.json`` record of the code key).
Emulation is 20-60x slower than the CPU: each emulated run takes minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QEMU = "qemu-x86_64"
OPS = """
import hashlib, json, torch
import torch.nn.functional as F
h = lambda t: hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()[:16]
torch.manual_seed(0)
a, b = torch.randn(256, 256), torch.randn(256, 256)
out = {"gemm_256": h(a @ b), "gemm_64": h(a[:64, :64] @ b[:64, :64]), "gemv_256": h(a @ b[:, 0]), "exp": h(a.exp()),
       "sqrt": h(a.abs().sqrt()), "rsqrt": h(a.abs().add(0.1).rsqrt()), "softmax": h(a.softmax(-1)),
       "log_softmax": h(a.log_softmax(-1)), "rms_norm": h(F.rms_norm(a, (256,))), "silu": h(F.silu(a)),
       "sum": h(a.sum(-1))}
p = torch.nn.Parameter(torch.randn(64, 64))
opt = torch.optim.AdamW([p], lr=1e-3)
for _ in range(3):
    opt.zero_grad()
    (p @ p).square().mean().backward()
    opt.step()
out["adamw_3_steps"] = h(p)
print(json.dumps(out))
"""
"""The single-op probe: MKL's sgemm at two sizes and its gemv, exp, sqrt, rsqrt, softmax, log-softmax, RMSNorm,
SiLU, row sums, and three AdamW steps."""


def vendor(model: str) -> str:
    """The CPU vendor of a QEMU model name (``native``: this machine's /proc/cpuinfo ``vendor_id``)."""
    if model == "native":
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
        return "unknown"
    return "AuthenticAMD" if model.upper().startswith(("EPYC", "OPTERON", "PHENOM")) else "GenuineIntel"


def command(model: str, args: list[str]) -> list[str]:
    """``python ARGS``, under ``qemu-x86_64 -cpu MODEL`` unless ``model`` is ``native``."""
    python = [sys.executable, *args]
    return python if model == "native" else [QEMU, "-cpu", model, *python]


def run_one(model: str, cbwr: str) -> dict[str, Any]:
    """The golden build and the op probe of one (model, MKL_CBWR) pair, each in a fresh process."""
    env = {**os.environ, "MKL_CBWR": cbwr, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.pop("SEED_NUMERICS", None)
    with tempfile.TemporaryDirectory(prefix="seed-numerics-emulated-") as tmp:
        start = time.perf_counter()
        golden = subprocess.run(command(model, ["-m", "seed_core.repro.golden", "--out", tmp]), cwd=ROOT, env=env,
                                capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
    if golden.returncode != 0:
        raise RuntimeError(f"{model} MKL_CBWR={cbwr}: the golden build failed: {golden.stderr.strip()[-1500:]}")
    record = json.loads(golden.stdout.strip().splitlines()[-1])
    ops = subprocess.run(command(model, ["-c", OPS]), cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return {"model": model, "vendor": vendor(model), "emulated": model != "native", "settings": record["settings"],
            "sources": record["sources"], "cpu_capability": record["cpu_capability"], "key": record["key"],
            "hashes": record["hashes"], "ops": json.loads(ops.stdout.strip().splitlines()[-1]),
            "seconds": round(seconds, 1)}


def reference_hashes(key: str) -> dict[str, str] | None:
    """The hashes of the first committed numerics.json record with this code key (the reference machine's)."""
    path = ROOT / "benchmarks" / "results" / "numerics.json"
    records = json.loads(path.read_text())["machines"] if path.is_file() else []
    same = [r for r in records if r.get("key") == key]
    return same[0]["hashes"] if same else None


def qemu_version() -> str:
    done = subprocess.run([QEMU, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.splitlines()[0] if done.returncode == 0 and done.stdout else "not installed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["EPYC-Milan", "Haswell-v4", "Cascadelake-Server-v5"])
    parser.add_argument("--cbwr", nargs="+", default=["AVX2", "COMPATIBLE"])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "numerics_emulated.json")
    args = parser.parse_args()
    load_before = os.getloadavg()
    runs = []
    for cbwr in args.cbwr:
        for model in ["native", *args.models]:
            runs.append(run_one(model, cbwr))
            print(json.dumps({k: runs[-1][k] for k in ("model", "settings", "hashes", "seconds")}), flush=True)
    native = {r["settings"]["MKL_CBWR"]: r for r in runs if r["model"] == "native"}
    first = {}
    for r in runs:
        if r["emulated"]:
            first.setdefault(r["settings"]["MKL_CBWR"], r)
    for r in runs:
        for name, base in (("native", native), ("first_emulated", first)):
            other = base.get(r["settings"]["MKL_CBWR"])
            r[f"same_as_{name}"] = None if other is None else r["hashes"] == other["hashes"]
            r[f"ops_differing_from_{name}"] = None if other is None else sorted(
                k for k in r["ops"] if r["ops"][k] != other["ops"].get(k))
        ref = reference_hashes(r["key"])
        r["same_as_reference"] = None if ref is None else r["hashes"] == ref
    out = {"what": __doc__.splitlines()[0], "qemu": qemu_version(), "host_cpu": vendor("native"),
           "load_avg_before": load_before, "load_avg_after": os.getloadavg(), "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
