"""Which CPU numerics settings change training's bits, and what each costs in wall time (issue 28 item 1).

    python benchmarks/numerics_probe.py [--repeats 3] [--steps 20] [--threads N] [--only A,B] [--out FILE.json]
    python benchmarks/numerics_probe.py --golden 3 --threads 1 --out benchmarks/results/numerics_golden_cost.json

Each setting runs in a fresh interpreter (ATen, MKL and oneDNN read their variables when torch loads or on
their first call), the settings taking turns, ``--repeats`` times. A run builds a 4-layer Qwen2 from its config
the way ``seed_core.modeling.testbed`` does (hidden 128, 4 heads / 2 KV heads, tied embeddings, vocab 1024, seed 0), takes
``--steps`` AdamW steps of next-token cross-entropy on fixed random tokens (8 x 64), then one forward/backward of
an RL-shaped loss (advantage-weighted token log-probabilities through ``selective_log_softmax``, the RL step's
head, plus a KL term to a detached teacher pass with another prompt). Reported per setting: the sha256 of the
weights after the steps and of the RL gradients (the same in every repeat, or the list), whether each equals the
baseline's (nothing set), the median wall time of the steps and of the RL step, and its ratio to the baseline's,
and the same for the steps' CPU time (user + system of the process; it counts OpenMP's spinning threads); and
the load average before and after (the machine may be shared: read the ratios with it). On a loaded machine
two threads' times mostly measure OpenMP waiting for a core: ``--threads 1`` times the kernels themselves.
``--golden N`` instead times ``seed doctor``'s golden build (the real testbed pretraining and one RL round) pinned
against native (``SEED_NUMERICS=native``), N turns each. JSON in benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

SETTINGS: dict[str, dict[str, Any]] = {
    "baseline": {},
    "aten=default": {"env": {"ATEN_CPU_CAPABILITY": "default"}},
    "aten=avx2": {"env": {"ATEN_CPU_CAPABILITY": "avx2"}},
    "aten=avx512": {"env": {"ATEN_CPU_CAPABILITY": "avx512"}},
    "mkl_cbwr=COMPATIBLE": {"env": {"MKL_CBWR": "COMPATIBLE"}},
    "mkl_cbwr=AVX2": {"env": {"MKL_CBWR": "AVX2"}},
    "mkl_cbwr=AVX512": {"env": {"MKL_CBWR": "AVX512"}},
    "mkl_cbwr=AVX2,STRICT": {"env": {"MKL_CBWR": "AVX2,STRICT"}},
    "onednn=AVX2": {"env": {"ONEDNN_MAX_CPU_ISA": "AVX2"}},
    "threads=1": {"threads": 1},
    "threads=2": {"threads": 2},
    "OMP_NUM_THREADS=1": {"env": {"OMP_NUM_THREADS": "1"}},
    "deterministic": {"deterministic": True},
    "pinned(aten+mkl+onednn avx2)": {"env": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2",
                                             "ONEDNN_MAX_CPU_ISA": "AVX2"}},
    "pinned, threads=1": {"env": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
                          "threads": 1},
    "pinned+STRICT, threads=1": {"env": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT",
                                         "ONEDNN_MAX_CPU_ISA": "AVX2"}, "threads": 1},
    "pinned+STRICT, threads=2": {"env": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT",
                                         "ONEDNN_MAX_CPU_ISA": "AVX2"}, "threads": 2},
}
"""Setting name -> the environment variables set before torch loads, ``torch.set_num_threads`` and
``torch.use_deterministic_algorithms``; anything not named is left as the process finds it."""
VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def child(steps: int, threads: int | None, deterministic: bool) -> dict[str, Any]:
    """One run in this process (the variables are already in its environment): hashes and wall times."""
    import hashlib

    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from seed_core.trainer.logprobs import selective_log_softmax

    if threads:
        torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic)
    config = Qwen2Config(vocab_size=1024, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         tie_word_embeddings=True)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 1024, (8, 64), generator=gen)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    steps_s, steps_cpu_s = time.perf_counter() - start, time.process_time() - cpu_start

    def digest(tensors: list[torch.Tensor]) -> str:
        h = hashlib.sha256()
        for t in tensors:
            h.update(t.detach().contiguous().numpy().tobytes())
        return h.hexdigest()

    weights = digest([p for _, p in sorted(model.state_dict().items())])
    start = time.perf_counter()
    advantages = torch.randn(8, generator=gen)
    hidden = model.model(input_ids=tokens).last_hidden_state[:, :-1].reshape(-1, 128)
    logp, _ = selective_log_softmax(hidden, model.lm_head.weight, None, tokens[:, 1:].reshape(-1))
    with torch.no_grad():
        teacher = model(input_ids=torch.roll(tokens, 3, dims=1)).logits[:, :-1].log_softmax(-1)
    student = model(input_ids=tokens).logits[:, :-1].log_softmax(-1)
    kl = (student.exp() * (student - teacher)).sum(-1).mean()
    rl_loss = -(logp.view(8, -1).mean(-1) * advantages).mean() + 0.01 * kl
    rl_loss.backward()
    rl_s = time.perf_counter() - start
    grads = digest([p.grad for _, p in sorted(model.named_parameters()) if p.grad is not None])
    return {"weights_sha256": weights, "rl_grad_sha256": grads, "steps_s": steps_s, "steps_cpu_s": steps_cpu_s,
            "rl_s": rl_s,
            "torch_threads": torch.get_num_threads(), "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def run_setting(name: str, steps: int, threads: int = 0) -> dict[str, Any]:
    """One fresh interpreter under setting ``name``; ``threads``: torch threads where the setting names none."""
    spec = SETTINGS[name]
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES} | spec.get("env", {})
    cmd = [sys.executable, __file__, "--child", "--steps", str(steps),
           "--threads", str(spec.get("threads", threads)), *(["--deterministic"] if spec.get("deterministic") else [])]
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def golden_cost(repeats: int, threads: int) -> dict[str, Any]:
    """``python -m seed_core.repro.golden`` (the testbed's pretraining and one RL round, as ``seed doctor`` builds them)
    pinned and native (``SEED_NUMERICS=native``), taking turns: each one's build seconds and hashes."""
    import tempfile

    env = {k: v for k, v in os.environ.items() if k not in (*VARIABLES, "SEED_NUMERICS", "SEED_NUMERICS_PINNED")}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    runs: dict[str, list[dict[str, Any]]] = {"pinned": [], "native": []}
    for _ in range(repeats):
        for name in runs:
            with tempfile.TemporaryDirectory() as tmp:
                done = subprocess.run([sys.executable, "-m", "seed_core.repro.golden", "--out", tmp], cwd=ROOT,
                                      env=env | ({"SEED_NUMERICS": "native"} if name == "native" else {}),
                                      capture_output=True, text=True, check=True)
            rec = json.loads(done.stdout.strip().splitlines()[-1])
            runs[name].append({"seconds": rec["seconds"], "hashes": rec["hashes"], "capability": rec["cpu_capability"]})
            print("golden", name, runs[name][-1], file=sys.stderr, flush=True)
    out = {name: {"seconds_median": statistics.median(r["seconds"] for r in rs),
                  "seconds_all": [r["seconds"] for r in rs], "capability": rs[0]["capability"],
                  "hashes": sorted({json.dumps(r["hashes"], sort_keys=True) for r in rs})} for name, rs in runs.items()}
    out["pinned_to_native_time"] = round(out["pinned"]["seconds_median"] / out["native"]["seconds_median"], 3)
    return out


def cpu_info() -> dict[str, Any]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), [])
    return {"model": model or platform.processor(), "cpus": os.cpu_count(),
            "isa": sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "sse4")))}


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    base = runs["baseline"][0]
    base_steps = statistics.median(r["steps_s"] for r in runs["baseline"])
    base_cpu = statistics.median(r["steps_cpu_s"] for r in runs["baseline"])
    out: dict[str, Any] = {}
    for name, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        if not ok:
            out[name] = {"error": rs[0]["error"]}
            continue
        weights = sorted({r["weights_sha256"] for r in ok})
        grads = sorted({r["rl_grad_sha256"] for r in ok})
        steps_s = statistics.median(r["steps_s"] for r in ok)
        cpu_s = statistics.median(r["steps_cpu_s"] for r in ok)
        out[name] = {"env": SETTINGS[name].get("env", {}), "threads": ok[0]["torch_threads"],
                     "cpu_capability": ok[0]["cpu_capability"],
                     "weights_sha256": weights[0][:16] if len(weights) == 1 else [w[:16] for w in weights],
                     "rl_grad_sha256": grads[0][:16] if len(grads) == 1 else [g[:16] for g in grads],
                     "weights_equal_baseline": weights == [base["weights_sha256"]],
                     "rl_grad_equal_baseline": grads == [base["rl_grad_sha256"]],
                     "steps_s_median": round(steps_s, 3), "steps_s_all": [round(r["steps_s"], 3) for r in ok],
                     "steps_cpu_s_median": round(cpu_s, 3),
                     "rl_s_median": round(statistics.median(r["rl_s"] for r in ok), 3),
                     "time_ratio_to_baseline": round(steps_s / base_steps, 3),
                     "cpu_time_ratio_to_baseline": round(cpu_s / base_cpu, 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--only", default="", help="comma-separated setting names (default: all)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads for every setting that names none (default: torch's own); 1 times the "
                             "kernels without OpenMP's spinning on a loaded machine")
    parser.add_argument("--golden", type=int, default=0, metavar="N",
                        help="instead: N turns of seed doctor's golden build, pinned and native (SEED_NUMERICS=native)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "numerics_probe.json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--deterministic", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(ROOT))
        print(json.dumps(child(args.steps, args.threads or None, args.deterministic)))
        return
    if args.golden:
        load_before = os.getloadavg()
        result = {"cpu": cpu_info(), "threads": args.threads or "torch's default", "repeats": args.golden,
                  "load_before": [round(x, 2) for x in load_before], "golden": golden_cost(args.golden, args.threads),
                  "load_after": [round(x, 2) for x in os.getloadavg()]}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result["golden"], indent=1))
        return
    names = [n for n in SETTINGS if not args.only or n in args.only.split(",") or n == "baseline"]
    load_before = os.getloadavg()
    start = time.perf_counter()
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for _ in range(args.repeats):  # the settings take turns, so a burst of load hits them alike
        for name in names:
            runs[name].append(run_setting(name, args.steps, args.threads))
            print(name, runs[name][-1], file=sys.stderr, flush=True)
    result = {"cpu": cpu_info(), "torch_wall_s": round(time.perf_counter() - start, 1), "repeats": args.repeats,
              "steps": args.steps, "threads": args.threads or "torch's default",
              "load_before": [round(x, 2) for x in load_before],
              "load_after": [round(x, 2) for x in os.getloadavg()], "settings": summarize(runs)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["settings"], indent=1))


if __name__ == "__main__":
    main()
