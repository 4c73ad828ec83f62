"""The static skill library of one environment: SDAR's teacher context (seed-algorithm.md §2.6).

Format (a directory; write your own and point ``rl.static_skills_dir`` at it):

    general_skills.md      skills for every task (may be empty)
    <file>.md              one text per task type
    skill_mapping.json     {"<task type or task-id substring>": "<file>.md", ...}

The skill of a task = ``general_skills.md`` + blank line + the file its type maps to: first an exact
match of the task type, else the first key (in sorted order) that is a substring of the task id (SDAR's
gamefile-substring rule), else the general skills alone.

Default: ``aggregate`` builds it deterministically from the Stage-1 annotations (written by the annotate
stage to ``data/annotate/static_skills``), so it exists for every environment without hand-writing:
per task type, the ``per_type`` most frequent episode skills of parsed annotations (ties by text);
general = the ``general`` skills that occur under the most task types (at least two).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from seed_core.config import SeedConfig, project_root
from seed_core.io import DataFileError, atomic_write_text

GENERAL_FILE = "general_skills.md"
MAPPING_FILE = "skill_mapping.json"


@dataclass(frozen=True)
class StaticSkills:
    general: str = ""
    texts: dict[str, str] = field(default_factory=dict)
    """file name -> skill text of one task type."""
    mapping: dict[str, str] = field(default_factory=dict)
    """task type (or task-id substring) -> file name in ``texts``."""

    def skill_for(self, task_type: str, task_id: str = "") -> str:
        """general + the text of the task's type (module docstring); '' when both are empty."""
        name = self.mapping.get(task_type)
        if name is None:
            name = next((self.mapping[k] for k in sorted(self.mapping) if k and k in task_id), None)
        parts = [self.general.strip(), self.texts.get(name, "").strip() if name else ""]
        return "\n\n".join(p for p in parts if p)

    def write(self, out_dir: str | Path) -> Path:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / GENERAL_FILE, self.general.strip() + "\n")
        for name, text in sorted(self.texts.items()):
            atomic_write_text(out / name, text.strip() + "\n")
        atomic_write_text(out / MAPPING_FILE, json.dumps(self.mapping, indent=2, sort_keys=True) + "\n")
        return out


def load(skills_dir: str | Path) -> StaticSkills:
    """Read a library directory; a clear error names what is missing."""
    root = Path(skills_dir)
    mapping_path = root / MAPPING_FILE
    if not mapping_path.is_file():
        raise DataFileError(f"{mapping_path} does not exist; a static skill library needs {GENERAL_FILE}, "
                            f"{MAPPING_FILE} and one .md per task type (seed_core/static_skills.py)")
    try:
        mapping = json.loads(mapping_path.read_text())
    except json.JSONDecodeError as err:
        raise DataFileError(f"{mapping_path} is not valid JSON ({err})") from None
    if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
        raise DataFileError(f"{mapping_path} must map task types to file names, got {mapping!r}")
    texts = {}
    for name in sorted(set(mapping.values())):
        path = root / name
        if not path.is_file():
            raise DataFileError(f"{mapping_path} names {name}, which is not in {root}")
        texts[name] = path.read_text()
    general = (root / GENERAL_FILE).read_text() if (root / GENERAL_FILE).is_file() else ""
    return StaticSkills(general=general, texts=texts, mapping={str(k): v for k, v in mapping.items()})


def _file_name(task_type: str) -> str:
    return (re.sub(r"[^A-Za-z0-9_.-]+", "_", task_type).strip("._") or "task") + ".md"


def _bullets(skills: Iterable[str]) -> str:
    return "\n".join(f"- {s.strip()}" for s in skills)


def aggregate(skills_by_type: dict[str, Sequence[str]], per_type: int = 3, general: int = 3) -> StaticSkills:
    """Deterministic library from episode skills grouped by task type (module docstring)."""
    texts, mapping = {}, {}
    spread: dict[str, set[str]] = defaultdict(set)
    counts: Counter[str] = Counter()
    for task_type in sorted(skills_by_type):
        cleaned = [s.strip() for s in skills_by_type[task_type] if s.strip()]
        ranked = sorted(Counter(cleaned).items(), key=lambda kv: (-kv[1], kv[0]))
        name = _file_name(task_type)
        texts[name] = _bullets(s for s, _ in ranked[:per_type])
        mapping[task_type] = name
        for s in cleaned:
            spread[s].add(task_type)
            counts[s] += 1
    shared = sorted((s for s in spread if len(spread[s]) >= 2), key=lambda s: (-len(spread[s]), -counts[s], s))
    return StaticSkills(general=_bullets(shared[:general]), texts=texts, mapping=mapping)


def resolve(static_skills_dir: str, default_dir: str | Path) -> StaticSkills:
    """The user's library when ``rl.static_skills_dir`` is set, else the aggregated one in ``default_dir``."""
    return load(static_skills_dir or default_dir)


def default_dir(cfg: SeedConfig) -> Path:
    """Where the annotate stage writes the aggregated library: ``<data_dir>/annotate/static_skills``."""
    return project_root() / cfg.project.data_dir / "annotate" / "static_skills"


def for_config(cfg: SeedConfig) -> StaticSkills:
    """``rl.static_skills_dir`` when set, else the aggregated library of this project's annotate stage."""
    return resolve(cfg.rl.static_skills_dir, default_dir(cfg))
