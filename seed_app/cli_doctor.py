"""``seed doctor``: whether this machine's CPU numerics give the committed reference machine's bits."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from seed_app.cli_base import command, one_line
from seed_core.config import project_root


def run_golden() -> dict[str, Any]:
    """``python -m seed_core.repro.golden`` in a fresh interpreter (numerics pinned before torch loads) in a temporary
    directory; its record. A failed build raises with the end of its output."""
    with tempfile.TemporaryDirectory(prefix="seed-doctor-") as tmp:
        done = subprocess.run([sys.executable, "-m", "seed_core.repro.golden", "--out", tmp], cwd=project_root(),
                              capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the golden build failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def read_records(path: Path, record: bool) -> list[dict[str, Any]]:
    """The committed records in ``path``; a missing file is no records only with ``--record`` (it is created)."""
    if not path.is_file():
        if record:
            return []
        raise ValueError(f"--results {path} does not exist; use the committed benchmarks/results/numerics.json, "
                         f"or --record to create it")
    try:
        machines = json.loads(path.read_text())["machines"]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"--results {path} is not a numerics results file ({{\"machines\": [...]}}): {err}") from None
    return list(machines)


VENDOR_HINT = ("seed doctor: one known cause is the CPU vendor: under the pinned MKL_CBWR=AVX2, MKL runs other GEMM, "
               "GEMV, exp and sqrt code on Intel than on AMD CPUs (emulated models, "
               "benchmarks/results/numerics_emulated.json), so an Intel machine cannot give an AMD reference's bits. "
               "MKL_CBWR=COMPATIBLE gave emulated Intel and AMD one set of bits, at several times the GEMM time; a "
               "reference meant for both vendors must be made and rerun with it set (unconfirmed on real silicon)")
"""Printed under a DIFFERS verdict made under another MKL_CBWR than COMPATIBLE."""


def same_cpu(record: dict[str, Any], reference: dict[str, Any]) -> bool:
    """Whether two records were made on one CPU model. Not the SIMD flags: machines of the reference's model
    without its avx_vnni and avx512_vp2intersect gave its bits (2026-12-03), the pins keep every library at AVX2."""
    return record["cpu_model"] == reference["cpu_model"]


def doctor_main(results: Path, record: bool, golden: Callable[[], dict[str, Any]] | None = None) -> int:
    """Check the arguments, build and hash (``golden``, default ``run_golden``), print the verdict, append with
    ``record``; the exit code."""
    from seed_core.repro.golden import DIFFERS, NO_RECORD, append, verdict

    records = read_records(results, record)
    typer.echo("seed doctor: building the golden testbed and one RL round under the pinned numerics (~1 min)")
    mine = (golden or run_golden)()
    code, lines = verdict(mine, records)
    for line in lines:
        typer.echo(line)
    if code == DIFFERS and mine["settings"].get("MKL_CBWR") != "COMPATIBLE":
        typer.echo(VENDOR_HINT)
    if record and code == NO_RECORD and records and not same_cpu(mine, records[0]):
        typer.echo(f"seed doctor: WARNING: this machine ({mine['cpu_model']}) becomes the reference of key "
                   f"{mine['key']}, but the reference CPU is {records[0]['cpu_model']} (the first record): record "
                   "there instead, or machines like the reference will read DIFFERS; or bridge it: record here the "
                   "code of a key the reference has too (`git worktree add DIR <that commit>`, then this command "
                   "from DIR with --results pointing here), and when both give this machine the same hashes the "
                   "reference's carry over (seed_core/repro/golden.py, reference)", err=True)
    if record:
        stored = append(results, mine)
        typer.echo(f"seed doctor: recorded this machine in {results} (match: {stored['match']}); commit it")
    return code


BAD_INPUT, BUILD_FAILED = 2, 4
"""``seed doctor``'s exit codes besides the verdict's (``seed_core.repro.golden``: 0 MATCH, 1 DIFFERS, 3 NO RECORD)."""


@command(short_help="Check whether this CPU reproduces the committed numerics: exit 0 match, 1 differs, 2 bad input, "
                    "3 no record for this code, 4 the build failed.")
def doctor(record: Annotated[bool, typer.Option("--record", help="Append this machine's record to the results "
                                                                  "file (commit it).")] = False,
           results: Annotated[Optional[Path], typer.Option(
               metavar="FILE", help="The committed records; the default is benchmarks/results/numerics.json.")]
           = None) -> None:
    """Check whether this CPU reproduces the committed numerics.

    It builds a tiny testbed (a few pretraining steps) and one RL round in a temporary directory under the
    pinned CPU numerics (seed_core/repro/numerics.py), hashes their weights and compares them with the first committed
    record of the same key: the numerics code (what the build runs, seed_core/repro/golden.py) and the torch and
    transformers versions. A match means this machine can reproduce the committed tables bit for bit; otherwise
    `seed run`'s statistical verdict is the one to go by. --record appends this machine (CPU model, SIMD flags,
    settings, hashes, match) to the results file.

    Exit codes: 0 MATCH; 1 DIFFERS (this CPU gives other bits than the reference machine); 2 bad input (--results);
    3 NO RECORD (no committed record of this code and these libraries: nothing to compare with; `seed doctor
    --record` on the reference machine makes one); 4 the build itself failed.
    """
    from seed_core.repro.golden import RESULTS

    path = results or project_root() / RESULTS
    try:
        code = doctor_main(path, record)
    except ValueError as err:  # bad input: before anything is built
        typer.echo(f"seed doctor: {one_line(str(err))}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    except RuntimeError as err:  # the build itself failed: nothing to compare
        typer.echo(f"seed doctor: {one_line(str(err))}", err=True)
        raise typer.Exit(BUILD_FAILED) from None
    raise typer.Exit(code)
