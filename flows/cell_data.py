"""A sweep cell's outputs between machines, through the project's default DVC remote.

A worker on another machine than the sweep computes the cell in its own clone (``data/sweep_pool/seed_<s>``), then
``publish`` runs ``dvc add`` and ``dvc push`` on it and returns the cell's DVC md5 (of its ``.dir`` manifest). The
sweep gets that md5 from the cell's flow run (label ``CELL_MD5_LABEL``), and ``fetch`` writes the cell's ``.dvc``
file into its own clone and runs ``dvc pull`` on it: the same files, from the remote, without a shared disk. On one
machine (or when the sweep and the worker share the cells directory) nothing moves: the worker writes the sweep's
directory.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import yaml

CELL_MD5_LABEL = "seed.cell.dvc_md5"
DVC_LOCK_RETRIES = 10
"""``dvc`` refuses to run while another ``dvc`` holds the repository's lock: retried every second this often."""


def _dvc(args: list[str], root: Path) -> str:
    """Run ``dvc <args>`` in ``root`` (a busy repository lock is retried); returns stdout, raises with its output."""
    for attempt in range(DVC_LOCK_RETRIES + 1):
        done = subprocess.run(["dvc", *args], cwd=root, capture_output=True, text=True)
        if done.returncode == 0:
            return done.stdout
        if "lock" not in (done.stderr + done.stdout).lower() or attempt == DVC_LOCK_RETRIES:
            raise RuntimeError(f"`dvc {' '.join(args)}` in {root} failed: {(done.stderr or done.stdout).strip()}")
        time.sleep(1.0)
    raise AssertionError("unreachable")


def default_remote(root: Path) -> str | None:
    """The name of the DVC remote ``dvc push`` uses in ``root`` (``dvc remote add -d``), None without one."""
    done = subprocess.run(["dvc", "remote", "default"], cwd=root, capture_output=True, text=True)
    name = done.stdout.strip()
    return name if done.returncode == 0 and name else None


def publish(cell: Path, root: Path) -> str:
    """``dvc add`` + ``dvc push`` the finished cell directory ``cell`` (inside the clone ``root``); returns its md5.
    Without a default remote it is an error naming the fix."""
    if default_remote(root) is None:
        raise RuntimeError(f"this worker runs on another machine than the sweep and {root} has no default DVC remote "
                           f"to send the cell through: `dvc remote add -d NAME URL` (the same remote as the sweep's "
                           f"clone; commit .dvc/config), then start the worker again")
    rel = Path(cell).resolve().relative_to(Path(root).resolve())
    _dvc(["add", "-q", str(rel)], root)
    _dvc(["push", "-q", f"{rel}.dvc"], root)
    return str(yaml.safe_load(Path(f"{cell}.dvc").read_text())["outs"][0]["md5"])


def fetch(md5: str, cell: Path, root: Path) -> Path:
    """Write ``<cell>.dvc`` for the directory with DVC md5 ``md5`` and ``dvc pull`` it into ``cell`` (in the clone
    ``root``, from its default remote); returns ``cell``."""
    cell = Path(cell)
    cell.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{cell}.dvc").write_text(yaml.safe_dump({"outs": [{"md5": md5, "path": cell.name, "hash": "md5"}]}))
    rel = Path(f"{cell}.dvc").resolve().relative_to(Path(root).resolve())
    _dvc(["pull", "-q", "--force", str(rel)], root)
    return cell
