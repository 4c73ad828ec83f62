"""The numerics golden check behind ``seed doctor``: the tiny testbed and RL round of ``seed_core.repro.golden_build``,
built under the pinned numerics (``seed_core.repro.numerics``), hashed, and compared with the hashes committed in
``benchmarks/results/numerics.json``.

A machine whose CPU numerics differ from the committed reference machine's then says so up front, instead of
silently producing another table (the testbed amplifies a last-bit difference through pretraining and RL).

- ``python -m seed_core.repro.golden --out DIR`` runs ``golden_build.build`` in a fresh interpreter, numerics pinned
  before torch loads, and prints ``machine_record``.
- The hashes hold only for the same numerics code and libraries: a record carries ``key`` (``key()``: the code of
  ``numerics_files`` without docstrings, comments or layout, plus the torch and transformers versions), and records
  are compared only under the same key. A key's reference is its first record on the reference CPU model (the first
  record's), or one bridged from an earlier key (``reference``). ``numerics_files``
  is the build's import closure under its own config's selection (the ezpoints env, the hf backend, seed's losses:
  not alfworld's or vLLM's code) less ``NOT_NUMERICS``, so an edit to the CLI, the flows, a docstring or another
  environment keeps the key, and an edit to a loss or the rollout makes a new one.
  ``tests/unit/test_doctor.py`` fails when the committed file has no reference record of today's key (re-record:
  ``seed doctor --record`` on the reference CPU, then commit the file), and, on the reference CPU, when today's
  build does not give that record's hashes (code left out of the key that changes the bits).
- ``verdict(record, records)``: (exit code, lines): ``MATCH`` (0) the hashes equal the reference's, ``DIFFERS``
  (1) they do not, ``NO_RECORD`` (3) no record of this key is committed (``seed doctor --record`` on the reference
  machine makes one). ``seed doctor`` adds 2 (bad input) and 4 (the build failed).
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from seed_core.lineage.code_closure import ROOT, reachable
from seed_core.lineage.stage_code import RL_STAGE, selection
from seed_core.repro import numerics
from seed_core.repro.golden_build import build, golden_config, weights_sha256

__all__ = ["MATCH", "DIFFERS", "NO_RECORD", "RESULTS", "append", "build", "golden_config", "key", "reference",
           "verdict", "weights_sha256"]

RESULTS = Path("benchmarks") / "results" / "numerics.json"
"""Under the project root: every machine the check was recorded on (``{"machines": [record, ...]}``)."""
MATCH, DIFFERS, NO_RECORD = 0, 1, 3
"""``verdict``'s exit codes (``seed doctor``'s 2 and 4 are bad input and a failed build)."""
BUILD = "seed_core.repro.golden_build"
"""The module whose import closure is the numerics (``numerics_files``)."""
NOT_NUMERICS = {
    "seed_core/lineage/code_closure.py": "the static import scan behind code fingerprints: reads files, computes no float",
    "seed_core/runtime/logs.py": "logging set-up: where lines go, not what is computed",
    "seed_core/tracking.py": "MLflow logging, off in the golden config (tracking.enabled: false)",
    "seed_core/runtime/endpoints.py": "service URLs and the project root from the environment",
    "seed_core/lineage/stage_params.py": "which params keys each DVC stage reads (dvc.yaml's params lists)",
    "seed_core/lineage/stage_code.py": "which registry entries a stage's code fingerprint reaches",
    "seed_core/runtime/parent_watch.py": "process lifetime: a launched rank ends when its launcher is gone",
}
"""Files of the build's closure that cannot change a weight (why, each): an edit to them keeps the key. Only code
that is plainly bookkeeping goes here; on the reference CPU a test rebuilds and compares, which catches a wrong
entry."""


def numerics_files() -> list[Path]:
    """The files whose code the golden hashes depend on: what ``golden_build`` can run under ``golden_config``'s
    selection of the registries (``seed_core.lineage.stage_code``, as the ``rl`` stage), less ``NOT_NUMERICS``; sorted."""
    files = reachable(BUILD, select=selection(RL_STAGE, golden_config()))
    return sorted((f for f in files if f.relative_to(ROOT).as_posix() not in NOT_NUMERICS),
                  key=lambda f: f.relative_to(ROOT).as_posix())


def code_digest(path: Path) -> str:
    """sha256 of the file's code without docstrings, comments and layout (``ast.unparse`` of the docstring-free
    tree): an edit to what the module says about itself keeps the digest, an edit to what it does changes it."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.unparse(tree).encode()).hexdigest()


def key() -> str:
    """What the hashes depend on besides the CPU: the numerics code (``numerics_files``, by ``code_digest``) and
    the torch and transformers versions."""
    import torch
    import transformers

    text = "".join(f"{code_digest(f)}  {f.relative_to(ROOT).as_posix()}\n" for f in numerics_files())
    text += f"torch {torch.__version__}\ntransformers {transformers.__version__}\n"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def machine_record(hashes: dict[str, str], seconds: float) -> dict[str, Any]:
    """This process's record: the CPU, the numerics it ran under (``numerics.record``), the key and the hashes."""
    import torch
    import transformers

    rec = numerics.record()
    return {"cpu_model": rec["cpu_model"], "isa": rec["isa"], "cpus": os.cpu_count(),
            "platform": platform.platform(), "settings": rec["settings"], "sources": rec["sources"],
            "cpu_capability": rec.get("cpu_capability"), "torch_threads": rec.get("torch_threads"),
            "torch": str(torch.__version__), "transformers": str(transformers.__version__), "key": key(),
            "hashes": hashes, "seconds": round(seconds, 1), "recorded": time.strftime("%Y-%m-%d")}


def reference(records: Sequence[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """The reference record of ``key`` among ``records``: its first record on the reference CPU model (the first
    record's); else one bridged to it; else its first record (None when it has none).

    A bridge, for a key recorded only away from the reference CPU: a record R of ``key`` on CPU model C, and records of
    an earlier key K' on C with R's hashes and on the reference CPU. The edit from K' to ``key`` left C's bits as they
    were, so the reference is taken to keep its own: the result is K''s reference-CPU record under ``key``, with
    ``bridged`` = {"from_key": K', "via_cpu": C}. That is an inference, and the reference CPU checks it: there
    ``tests/unit/test_doctor.py`` rebuilds and compares with these hashes, so an edit that moved the reference's bits
    fails there (then record on that CPU). Made for sessions on another CPU model (an Intel Xeon, 2026-12-06) that
    change bookkeeping inside the closure: the Xeon gave one set of hashes at 273d59def979b310 and 7196b473fcb8db61."""
    if not records:
        return None
    cpu = records[0]["cpu_model"]
    same_key = [r for r in records if r.get("key") == key]
    direct = [r for r in same_key if r["cpu_model"] == cpu]
    if direct:
        return direct[0]
    for mine in same_key:
        for earlier in records:
            if (earlier.get("key") != key and earlier["cpu_model"] == mine["cpu_model"]
                    and earlier["hashes"] == mine["hashes"]):
                refs = [r for r in records if r.get("key") == earlier["key"] and r["cpu_model"] == cpu]
                if refs:
                    return {**refs[0], "key": key,
                            "bridged": {"from_key": earlier["key"], "via_cpu": mine["cpu_model"]}}
    return same_key[0] if same_key else None


def verdict(record: dict[str, Any], records: Sequence[dict[str, Any]]) -> tuple[int, list[str]]:
    """``record`` against the committed ``records``: (``MATCH``, ``DIFFERS`` or ``NO_RECORD``, lines)."""
    lines = [f"seed doctor: {record['cpu_model'] or 'unknown CPU'}, {len(record['isa'])} SIMD flags "
             f"({'avx512f' if 'avx512f' in record['isa'] else 'no avx512f'}), torch {record['torch']} at "
             f"{record['cpu_capability']} with {record['torch_threads']} threads, "
             + ", ".join(f"{k}={v or '(native)'} ({record['sources'][k]})" for k, v in record["settings"].items()),
             *(f"  {name}: {digest}" for name, digest in record["hashes"].items())]
    same_key = [r for r in records if r.get("key") == record["key"]]
    ref = reference(records, record["key"])
    if ref is None:
        return NO_RECORD, [*lines, f"seed doctor: NO RECORD for this numerics code and these libraries (key "
                                   f"{record['key']}): nothing to compare with; `seed doctor --record` on the "
                                   f"reference machine makes one ({len(records)} records of other keys are committed)"]
    others = ", ".join(f"{r['cpu_model']} ({'match' if r['hashes'] == ref['hashes'] else 'differs'})"
                       for r in same_key if r is not ref)
    seen = f"; also recorded with this key: {others}" if others else ""
    if "bridged" in ref:
        seen += (f"; the reference's hashes are those of key {ref['bridged']['from_key']}, bridged by "
                 f"{ref['bridged']['via_cpu']}'s equal records of both keys")
    if record["hashes"] == ref["hashes"]:
        return MATCH, [*lines, f"seed doctor: MATCH: the same bits as the reference machine ({ref['cpu_model']}, "
                               f"{ref['recorded']}){seen}; runs here are expected to reproduce tables made there with "
                               f"this code bit for bit"]
    differ = ", ".join(name for name, digest in record["hashes"].items() if ref["hashes"].get(name) != digest)
    return DIFFERS, [*lines, f"seed doctor: DIFFERS ({differ}) from the reference machine ({ref['cpu_model']} "
                             "under " + ", ".join(f"{k}={v or '(native)'}" for k, v in ref["settings"].items())
                             + f"){seen}; this machine's tables will not be bit-identical to the committed ones: "
                             "judge them by `seed run`'s statistical verdict"]


def append(path: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Add ``record`` to the results file at ``path`` (created when missing) with ``match``: whether its hashes
    equal its key's reference (itself when it is the first); returns the stored record."""
    data = json.loads(path.read_text()) if path.is_file() else {"machines": []}
    ref = reference(data["machines"], record["key"])  # None: the record is its key's first
    stored = {**record, "match": ref is None or ref["hashes"] == record["hashes"]}
    data["machines"].append(stored)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return stored


def main(argv: list[str] | None = None) -> None:
    numerics.pin()  # before torch loads (this module imports none at its top)
    parser = argparse.ArgumentParser(description="Build the golden testbed and RL round; print the record (JSON).")
    parser.add_argument("--out", type=Path, required=True, help="an empty working directory")
    args = parser.parse_args(argv)

    logging.getLogger("seed_core").setLevel(logging.WARNING)
    start = time.perf_counter()
    hashes = build(args.out)
    print(json.dumps(machine_record(hashes, time.perf_counter() - start)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
