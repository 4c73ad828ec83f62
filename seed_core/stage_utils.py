"""Small pieces shared by the stage modules: the ``--config`` CLI, prompt encoding, tasks files, metrics files."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Sequence

from seed_core.config import SeedConfig, load_config
from seed_core.io import DataFileError, atomic_write_text, write_json
from seed_core.types import Task


def make_encoder(tokenizer: Any, chat_template_kwargs: dict[str, Any], max_prompt_tokens: int) -> Callable[[str], list[int]]:
    """text -> chat-templated prompt ids, cut from the left to ``max_prompt_tokens`` (OPID truncation=left)."""
    from seed_core.models import encode_prompt

    def encode(text: str) -> list[int]:
        ids = encode_prompt(tokenizer, text, chat_template_kwargs)
        return ids[-max_prompt_tokens:] if len(ids) > max_prompt_tokens else ids

    return encode


def write_tasks(tasks: Sequence[Task], path: Path) -> Path:
    return write_json(path, [asdict(t) for t in tasks])


def read_tasks(path: Path) -> dict[str, Task]:
    if not Path(path).is_file():
        raise DataFileError(f"{path} does not exist; rerun the collect stage")
    try:
        rows = json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise DataFileError(f"{path} is not valid JSON ({err}); rerun the collect stage") from None
    return {row["task_id"]: Task(**row) for row in rows}


def require_tasks(tasks: Sequence[Task], cfg: SeedConfig, split: str, wanted: int) -> Sequence[Task]:
    """A stage never plays zero tasks: an empty split stops it naming the environment and the split."""
    if not tasks and wanted > 0:
        raise DataFileError(f"env {cfg.env.name!r} has no tasks in split {split!r} (asked for {wanted}); "
                            "check its data (env.* in params.yaml) or the split name")
    return tasks


def read_metrics(path: Path) -> dict[str, float]:
    return json.loads(Path(path).read_text()) if Path(path).is_file() else {}


def stage_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", default="params.yaml", help="params.yaml, a preset, or a resolved_config.json")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config value, e.g. --set rl.opd_coef=0.02 (YAML-typed)")
    return parser


def config_from_args(args: argparse.Namespace) -> SeedConfig:
    import yaml

    overrides: dict[str, Any] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set expects KEY=VALUE, got {item!r}")
        overrides[key.strip()] = yaml.safe_load(value)
    return load_config(args.config, overrides or None, origin="--set")


RESUME_FILE = ".resume_key"
"""In an RL output directory: the fingerprint (``rl_fingerprint``) its finished rounds were made from."""


class StaleRoundsError(RuntimeError):
    """An RL output directory holds finished rounds made from another config or starting checkpoint."""


def rl_fingerprint(cfg: SeedConfig, init_checkpoint: Path) -> str:
    """What finished RL rounds depend on: the keys the rl stage reads (``seed_core.stage_params.fingerprint_keys``:
    the DVC params of the stage less ``rl.rounds``, so raising it extends a run) and the content of the starting
    checkpoint."""
    import hashlib

    from seed_core.stage_params import fingerprint_keys, project

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


def task_seed(cfg: SeedConfig, stage: str, index: int = 0) -> int:
    """Deterministic, stage-separated task seeds (collect, rl round i, eval never share tasks by accident)."""
    offsets = {"collect": 0, "rl": 100_000, "eval": 900_000}
    return cfg.project.seed * 1_000_003 + offsets[stage] + index * 1_000
