"""Resuming RL: finished rounds are reused only when they were made from the same config and starting
checkpoint (``rl_fingerprint``); the flows check the same fingerprint before they skip a stage."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from seed_core.config import SeedConfig
from seed_core.io import DataFileError, atomic_write_text
from seed_core.stage_params import fingerprint_keys, project

RESUME_FILE = ".resume_key"
"""In an RL output directory: the fingerprint (``rl_fingerprint``) its finished rounds were made from."""


class StaleRoundsError(RuntimeError):
    """An RL output directory holds finished rounds made from another config or starting checkpoint."""


def rl_fingerprint(cfg: SeedConfig, init_checkpoint: Path) -> str:
    """What finished RL rounds depend on: the keys the rl stage reads (``seed_core.stage_params.fingerprint_keys``:
    the DVC params of the stage less ``rl.rounds``, so raising it extends a run) and the content of the starting
    checkpoint."""

    init_checkpoint = Path(init_checkpoint)
    if not init_checkpoint.is_dir():
        raise DataFileError(f"the starting checkpoint {init_checkpoint} does not exist (--init; in the pipeline: "
                            "the sft stage's data/sft/checkpoint)")
    digest = hashlib.sha256()
    data = project(cfg.model_dump(mode="json"), fingerprint_keys())
    digest.update(json.dumps(data, sort_keys=True).encode())
    for file in sorted(p for p in init_checkpoint.rglob("*") if p.is_file()):
        digest.update(file.relative_to(init_checkpoint).as_posix().encode())
        with open(file, "rb") as fh:
            digest.update(hashlib.file_digest(fh, "sha256").digest())
    return digest.hexdigest()


def check_rounds(out_dir: Path, fingerprint: str) -> None:
    """Refuse to reuse finished rounds of ``out_dir`` made from another fingerprint (or none recorded);
    record ``fingerprint`` when the directory holds no finished round yet."""
    out_dir = Path(out_dir)
    marker = out_dir / RESUME_FILE
    saved = marker.read_text().strip() if marker.is_file() else None
    if saved == fingerprint:
        return
    finished = sorted(p.parent.name for p in out_dir.glob("round_*/DONE"))
    if finished:
        raise StaleRoundsError(
            f"{out_dir} holds {len(finished)} finished RL round(s) ({finished[0]}..{finished[-1]}) made from "
            f"another config or starting checkpoint: their fingerprint is {saved[:16] if saved else '(none recorded)'}, "
            f"this run's is {fingerprint[:16]} (the keys the rl stage reads, less rl.rounds, plus the files "
            f"of --init). Delete {out_dir} (or pass another --out) to start over, or rerun with the "
            "config and --init those rounds were made with")
    atomic_write_text(marker, fingerprint)
