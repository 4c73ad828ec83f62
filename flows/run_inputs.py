"""The inputs a pipeline run started from, checked again by each of its stages (issue 43 item 4).

``seed run`` records what ``params.yaml`` and ``dvc.yaml`` held when it started DVC (``snapshot``, in
``$SEED_RUN_INPUTS``); every stage process of that run (``flows/__init__``, before it hands itself to the warm stage
server) compares them with the files as they are now and, when one changed, exits in one line before it reads or
writes anything (``check_stage``); the run checks once more after DVC has ended (``changed``). So a stage never runs
on parameters that changed under the run: DVC removed the stage's outputs before starting it and nothing new is
written, the next ``seed run`` reruns what the new values change. DVC itself cannot change them meanwhile (the run
holds DVC's lock, ``seed_app.dvc_lock``); this catches everything else (an editor, a ``git checkout``).

``params.yaml`` is compared by its values, not its bytes, less the keys the run's own ``dvc exp run -S`` sets (DVC
writes those into the file after the snapshot), read as DVC and seed's config read them (YAML 1.2: DVC's rewrite
drops the quotes of ``"no"``, which a YAML 1.1 reader would then see as ``False``); ``dvc.yaml`` by its bytes. The message names the file, when it
changed and, if one can be seen, the process that has it open or a ``dvc`` command running in the project outside
this run.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Iterable

import psutil

INPUTS_VAR = "SEED_RUN_INPUTS"
"""Run-context variable: the ``snapshot`` JSON of the run the stage process belongs to."""
WATCHED = ("params.yaml", "dvc.yaml")
"""The files a run starts from, relative to the project root."""


def _without(data: Any, keys: Iterable[str]) -> Any:
    """``data`` (parsed YAML) less the dotted ``keys``."""
    for key in keys:
        *path, last = key.split(".")
        node = data
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return data


def digest(path: Path, ignore: Iterable[str] = ()) -> str | None:
    """sha256 of ``path``'s values (a params file: parsed, less ``ignore``) or bytes (anything else); None when it
    is missing or not YAML."""
    from ruamel.yaml import YAML  # YAML 1.2, as DVC and seed_core.loader.parse_yaml read params
    from ruamel.yaml.error import YAMLError

    try:
        raw = path.read_bytes()
        if path.name == "params.yaml":
            values = YAML(typ="safe", pure=True).load(raw)
            raw = json.dumps(_without(values, ignore), sort_keys=True, default=str).encode()
    except (OSError, YAMLError):
        return None
    return hashlib.sha256(raw).hexdigest()


def snapshot(root: Path, ignore: Iterable[str] = ()) -> str:
    """The JSON for ``$SEED_RUN_INPUTS``: the run's root, PID, start time and each watched file's ``digest``
    (``ignore``: the params keys DVC sets for this run, ``dvc exp run -S``)."""
    ignore = sorted(ignore)
    return json.dumps({"root": str(root), "pid": os.getpid(), "since": time.time(), "ignore": ignore,
                       "digests": {name: digest(root / name, ignore) for name in WATCHED}})


def changed(record: dict[str, Any]) -> list[str]:
    """The watched files whose digest differs from the snapshot ``record``'s."""
    root = Path(record["root"])
    return [name for name, value in record["digests"].items() if digest(root / name, record["ignore"]) != value]


def who(path: Path, run_pid: int) -> str:
    """``, open in PID n (command)`` / ``; DVC command PID n (command) runs in the project`` when such a process is
    visible now (outside the run ``run_pid``), else ``""``."""
    for proc in psutil.process_iter(["pid", "cmdline", "cwd"]):
        try:
            if proc.pid == os.getpid() or run_pid in {p.pid for p in proc.parents()} or proc.pid == run_pid:
                continue
            cmdline = proc.info["cmdline"] or []
            command = " ".join(cmdline)
            if any(f.path == str(path) for f in proc.open_files()):
                return f", open in PID {proc.pid} ({command})"
            if proc.info["cwd"] == str(path.parent) and any(Path(part).name == "dvc" for part in cmdline[:2]):
                return f"; a DVC command runs in the project: PID {proc.pid} ({command})"
        except (psutil.Error, OSError):
            continue
    return ""


def message(record: dict[str, Any], names: list[str]) -> str:
    """One line: which file changed since the run began, when, who if visible, and what to do."""
    root = Path(record["root"])
    began = time.strftime("%H:%M:%S", time.localtime(record["since"]))
    parts = []
    for name in names:
        try:
            when = f"changed at {time.strftime('%H:%M:%S', time.localtime((root / name).stat().st_mtime))}"
        except OSError:
            when = "removed"
        parts.append(f"{name} ({when}{who(root / name, int(record['pid']))})")
    return (f"{' and '.join(parts)} changed since this run began at {began}, so it stops before running on other "
            "inputs than it started with; nothing of this stage was written; run `seed run` again to run on them "
            "(stages that finished are kept)")


def check_stage() -> None:
    """In a DVC stage process of a ``seed run`` (``$DVC_STAGE`` and ``$SEED_RUN_INPUTS`` set): exit in one line
    when a watched file changed since the run began."""
    raw, stage = os.environ.get(INPUTS_VAR), os.environ.get("DVC_STAGE")
    if not raw or not stage:
        return
    record = json.loads(raw)
    if names := changed(record):
        raise SystemExit(f"seed stage {stage}: {message(record, names)}")
