"""What a DVC stage reads, answered in one place: ``stage_inputs(stage, cfg)``.

    keys  = the params.yaml keys it reads: ``STAGE_PARAMS[stage]``; ``rl``: ``algorithm_keys(cfg.rl.algorithm)``
            (``seed_core.lineage.stage_params``, from the registries' declarations)
    files = the project files its entry module can import under ``cfg``: ``code_closure.reachable`` through the
            table entries ``seed_core.lineage.stage_code.selection`` allows (its environment, backend, losses,
            analyzer)

Every user asks it: DVC's ``code`` stage writes ``data/params/<stage>.yaml`` (the values of ``keys``) and
``data/code/<stage>.sha256`` (``StageInputs.fingerprint``) from it (``scripts/dvc_deps.py``), the RL resume key
hashes the same keys and lines (``seed_core.lineage.resume``), and ``scripts/lineage_snapshot.py`` records it. So
DVC, the resume check and the recording test cannot disagree on what a stage reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from seed_core.config import SeedConfig
from seed_core.lineage import code_closure
from seed_core.lineage.stage_code import RL_STAGE, selection
from seed_core.lineage.stage_params import STAGE_PARAMS, algorithm_keys

ENTRIES = ("flows.{stage}", "seed_core.stages.{stage}")
"""A stage's entry module: its flow (``python -m flows.<stage>``, dvc.yaml's command) in a project checkout, else
(the engine installed alone) its engine module."""


@dataclass(frozen=True)
class StageInputs:
    stage: str
    keys: tuple[str, ...]
    """The params.yaml keys the stage reads (a section covers its leaves)."""
    files: tuple[Path, ...]
    """The files its entry module can import under the config, sorted by their path under ``root``."""
    root: Path

    def fingerprint(self) -> str:
        """``sha256sum`` lines of ``files`` (``sha256sum -c`` checks them): ``data/code/<stage>.sha256``."""
        return code_closure.sha256_lines(self.files, self.root)


def stage_keys(stage: str, cfg: SeedConfig) -> tuple[str, ...]:
    """The params.yaml keys ``stage`` reads under ``cfg`` (the rl stage: those of ``cfg.rl.algorithm``)."""
    if stage not in STAGE_PARAMS:
        raise KeyError(f"unknown stage {stage!r}; stages: {', '.join(STAGE_PARAMS)}")
    return algorithm_keys(cfg.rl.algorithm) if stage == RL_STAGE else STAGE_PARAMS[stage]


def entry_module(stage: str, root: Path = code_closure.ROOT) -> str:
    """The first of ``ENTRIES`` that exists under ``root``."""
    for pattern in ENTRIES:
        if code_closure.module_file(name := pattern.format(stage=stage), root) is not None:
            return name
    raise FileNotFoundError(f"stage {stage!r} has no entry module under {root} (tried {', '.join(ENTRIES)})")


def stage_inputs(stage: str, cfg: SeedConfig, root: Path = code_closure.ROOT) -> StageInputs:
    """What ``stage`` reads under ``cfg`` (module docstring); the rl stage as ``rl@<cfg.rl.algorithm>``."""
    files = code_closure.reachable(entry_module(stage, root), root, selection(stage, cfg))
    return StageInputs(stage, stage_keys(stage, cfg),
                       tuple(sorted(files, key=lambda p: p.relative_to(root).as_posix())), root)
