"""The annotation cache: finished annotations, one JSON line each, so a killed Stage 1 resumes.

Key = sha256 of (trajectory content, prompt version, analyzer identity incl. the endpoint): a rerun on the
same trajectories with the same analyzer finds every annotation it already paid for and sends only the
missing ones; another endpoint (a fixed OPENAI_BASE_URL) is another analyzer.
The file is append-only; each entry is one whole line written with a single ``write`` and fsynced, so
a kill can at worst leave a torn last line, which reading ignores and the next append cuts off.
Only parsed annotations are kept: a call that got no answer at all (endpoint down, retries spent) and an
answer that never parsed (wrong model, endpoint or prompt) are left out, so that the next run asks again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from seed_core.types import AnnotationRecord, StepRecord

if TYPE_CHECKING:
    from seed_core.config import AnnotateConfig

CACHE_FORMAT = 2
"""Bump when the entry layout or the key recipe changes: old entries then simply stop matching."""

log = logging.getLogger(__name__)


def trajectory_key(records: Sequence[StepRecord], prompt_version: str, analyzer: dict[str, Any]) -> str:
    """sha256 hex of the canonical JSON of (format, the trajectory's step records in step order,
    prompt version, analyzer identity such as client, model and sampling settings)."""
    steps = [dataclasses.asdict(r) for r in sorted(records, key=lambda r: r.step)]
    blob = json.dumps({"format": CACHE_FORMAT, "trajectory": steps, "prompt_version": prompt_version,
                       "analyzer": analyzer}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def analyzer_identity(cfg: "AnnotateConfig", identity: tuple[str, str], endpoint: str = "") -> dict[str, Any]:
    """What decides an annotation besides the trajectory: the client's (name, model), its endpoint (a
    credential-free URL; the same model name on another server is another analyzer) and the settings
    that change its answer or its record (temperature, token budget, parse attempts)."""
    return {"client": identity[0], "model": identity[1], "endpoint": endpoint, "temperature": cfg.temperature,
            "max_tokens": cfg.max_tokens, "parse_attempts": cfg.parse_attempts}


def is_final(record: AnnotationRecord) -> bool:
    """Parsed. A failure is never final: without answer text it was a call failure (timeouts, 5xx,
    refused), with it the answer never parsed (often a wrong model or endpoint); a rerun asks again."""
    return record.ok


def answered(record: AnnotationRecord) -> bool:
    """The endpoint answered (parsed or not), as opposed to a call that failed."""
    return record.ok or bool(record.raw_output.strip())


class AnnotationCache:
    """``load()`` the entries on disk; ``append(key, record)`` from any thread (one line, fsynced)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd: int | None = None

    def load(self) -> dict[str, AnnotationRecord]:
        """key -> record for every complete line; a torn last line (no newline) is ignored and a
        garbled line is skipped with a warning (its trajectory is annotated again)."""
        if not self.path.is_file():
            return {}
        data = self.path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        found: dict[str, AnnotationRecord] = {}
        for number, line in enumerate(complete.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                found[entry["key"]] = AnnotationRecord(**entry["record"])
            except (ValueError, KeyError, TypeError) as err:
                log.warning("%s:%d is not an annotation cache entry (%s); that trajectory is annotated again",
                            self.path, number, err)
        return found

    def append(self, key: str, record: AnnotationRecord) -> None:
        line = json.dumps({"key": key, "record": dataclasses.asdict(record)}, ensure_ascii=False) + "\n"
        data = line.encode()
        with self._lock:  # one writer at a time keeps lines whole
            fd = self._open()
            written = 0
            while written < len(data):  # os.write may write less than asked (rare for regular files)
                written += os.write(fd, data[written:])
        os.fsync(fd)  # outside the lock: concurrent fsyncs share one disk flush instead of queueing

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> "AnnotationCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> int:
        """Open for appending once; first cut off a torn last line left by a killed writer."""
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.is_file():
                data = self.path.read_bytes()
                if data and not data.endswith(b"\n"):
                    os.truncate(self.path, data.rfind(b"\n") + 1)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd
