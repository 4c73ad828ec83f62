"""Resuming RL: finished rounds are reused only when they were made from the same inputs (``rl_fingerprint``: the
stage's params but ``rl.rounds``, its code, its starting checkpoint and data); the flows check the same fingerprint
before they reuse a round."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from seed_core.algorithms import ALGORITHMS
from seed_core.config import SeedConfig, project_root
from seed_core.lineage.inputs import stage_inputs
from seed_core.lineage.stage_code import RL_STAGE
from seed_core.lineage.stage_params import FOREACH_KEYS, algorithm_keys, project
from seed_core.runtime.io import DataFileError, atomic_write_text
from seed_core.skills.static import default_dir

RESUME_FILE = ".resume_key"
"""In an RL output directory: the fingerprint (``rl_fingerprint``) its finished rounds were made from."""


class StaleRoundsError(RuntimeError):
    """An RL output directory holds finished rounds made from other inputs (config, code, checkpoint, data)."""


def rl_code(cfg: SeedConfig) -> str:
    """``sha256sum`` lines of the code ``rl@<cfg.rl.algorithm>`` can reach under ``cfg``
    (``seed_core.lineage.inputs.stage_inputs``: the same lines DVC's code stage writes to
    ``data/code/rl/<algorithm>.sha256``)."""
    return stage_inputs(RL_STAGE, cfg).fingerprint()


def resume_keys(algorithm: str) -> tuple[str, ...]:
    """The config keys finished rounds of ``algorithm`` depend on: the keys ``rl@<algorithm>`` reads
    (``seed_core.lineage.stage_params.algorithm_keys``, ``stage_inputs``' keys) less ``rl.rounds`` (raising it
    extends a run), plus ``rl.algorithm`` (the stage's foreach item)."""
    return tuple(k for k in algorithm_keys(algorithm) if k != "rl.rounds") + FOREACH_KEYS["rl"]


def rl_inputs(cfg: SeedConfig) -> dict[str, Path]:
    """The data the rounds read besides the starting checkpoint (the rl stage's other DVC data deps): the ALFWorld
    training games, and for an algorithm that reads it the static skill library (``rl.static_skills_dir``, else
    the annotate stage's)."""
    inputs = {"alfworld_games": project_root() / cfg.env.alfworld.generated_dir}
    if ALGORITHMS.get(cfg.rl.algorithm).skill_source == "static":
        inputs["static_skills"] = Path(cfg.rl.static_skills_dir or default_dir(cfg))
    return inputs


def _hash_tree(digest: "hashlib._Hash", label: str, path: Path) -> None:
    """Names and contents of every file under ``path`` (a file: itself; missing: a marker) into ``digest``."""
    digest.update(f"\0{label}\0".encode())
    if not path.exists():
        digest.update(b"(absent)")
        return
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        digest.update(file.relative_to(path).as_posix().encode() if file != path else b".")
        with open(file, "rb") as fh:
            digest.update(hashlib.file_digest(fh, "sha256").digest())


def rl_fingerprint(cfg: SeedConfig, init_checkpoint: Path, code: str | None = None) -> str:
    """What finished RL rounds depend on, i.e. every input of the rl stage but ``rl.rounds`` (raising it extends a
    run): sha256 over the keys the algorithm reads (``resume_keys``), its code (``code``:
    ``sha256sum`` lines, default ``rl_code(cfg)``), the files of the starting checkpoint and of ``rl_inputs``. So an
    edit to a loss, a changed skill library or another SFT checkpoint starts the rounds over, as DVC reruns the
    stage; an unchanged stage resumes."""

    init_checkpoint = Path(init_checkpoint)
    if not init_checkpoint.is_dir():
        raise DataFileError(f"the starting checkpoint {init_checkpoint} does not exist (--init; in the pipeline: "
                            "the sft stage's data/sft/checkpoint)")
    digest = hashlib.sha256()
    data = project(cfg.model_dump(mode="json"), resume_keys(cfg.rl.algorithm))
    digest.update(json.dumps(data, sort_keys=True).encode())
    digest.update(b"\0code\0" + (rl_code(cfg) if code is None else code).encode())
    _hash_tree(digest, "init", init_checkpoint)
    for label, path in rl_inputs(cfg).items():
        _hash_tree(digest, label, path)
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
            f"other inputs: their fingerprint is {saved[:16] if saved else '(none recorded)'}, "
            f"this run's is {fingerprint[:16]} (the keys the rl stage reads less rl.rounds, its code, the files "
            f"of --init and its data). Delete {out_dir} (or pass another --out) to start over, or rerun with the "
            "code, config, --init and data those rounds were made with")
    atomic_write_text(marker, fingerprint)
