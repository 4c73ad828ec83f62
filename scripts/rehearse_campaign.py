"""Rehearse the paper presets one after another at one commit, resumable across sessions (issue 44).

    .venv/bin/python scripts/rehearse_campaign.py --commit C [--workdir DIR] [PRESET ...]

A rehearsal (``seed run --preset P --rehearse``, ``seed_app/rehearsal.py``) of a paper preset takes an hour or more
on a 2-core machine, and fourteen of them do not fit one session; "all presets passed at one commit" therefore means
one clone at commit ``C`` that every session runs in. This script:

- clones this checkout at ``C`` into ``DIR`` (default ``.tmp/rehearsal-<C>``) once, linking this checkout's
  ``.venv``, ``.venv-vllm`` and ``models/smollm2-135m-instruct`` into it (the clone's DVC cache and MLflow store stay
  its own, so a second session continues where the first stopped);
- orders the presets so that those with the same ``settings_digest`` (after the rehearsal's replacements the
  1.5B and 3B ALFWorld presets compute the same thing) run one after another: DVC finds the first one's stages up
  to date in the clone's workspace and skips them, and the second's record names the stages it ran. Its *run
  cache* restores none of them: DVC saves no run-cache entry for a stage with a ``cache: false`` output, and every
  pipeline stage from ``collect`` on has one (the git-tracked ``resolved_config.json``). So a preset rerun after
  another preset ran in the clone (a failed one, say) runs every stage again;
- skips a preset whose record in this checkout's ``benchmarks/results/preset_rehearsal.json`` already passed at
  ``C``; runs the others one at a time (never beside each other: two rehearsals on 24 GB ran out of memory), each
  with its own log in ``DIR/logs``, and copies each record into this checkout's results file as soon as it is
  written, keeping the preset's earlier record under ``earlier_runs``.

A failed preset does not stop the campaign: its record says what failed, and the next preset runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path("benchmarks/results/preset_rehearsal.json")
LINKED = (".venv", ".venv-vllm", "models/smollm2-135m-instruct")
QUIET_ENV = {"DO_NOT_TRACK": "1", "MLFLOW_DISABLE_TELEMETRY": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
             "DVC_NO_ANALYTICS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
             "TOKENIZERS_PARALLELISM": "false", "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90"}
"""Set for each rehearsal unless the environment has them: no telemetry, no hub, and the slower ephemeral Prefect
start-up of a loaded 2-core machine."""
DROPPED_ENV = ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")
"""A rehearsal keeps its Prefect and MLflow records in its clone, not in a server the shell points at."""


def short(commit: str, repo: Path = ROOT) -> str:
    """The first 7 hex digits of ``commit``, as a record's ``commit`` (``seed_core.tracking.git_commit()[:7]``)."""
    return subprocess.run(["git", "rev-parse", commit], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()[:7]


def write_results(data: dict) -> None:
    """This checkout's results file, in the layout ``seed_app.rehearsal.record`` writes."""
    (ROOT / RESULTS).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def paper_presets(root: Path) -> dict[str, str]:
    """Each paper preset's stem -> its rehearsal's ``settings_digest``, read from ``root`` (the clone)."""
    sys.path.insert(0, str(root))
    from seed_app import rehearsal
    from seed_core.loader import load_config

    out = {}
    for path in sorted((root / "presets").glob("*.yaml")):
        cfg = load_config(path)
        try:
            out[path.stem] = rehearsal.settings_digest(load_config(path, rehearsal.overrides(cfg)))
        except rehearsal.NotAPaperPreset:
            continue
    return out


def plan(digests: dict[str, str], records: dict[str, dict], commit: str, wanted: list[str]) -> list[str]:
    """The presets still to rehearse at ``commit``, twins (same digest) next to each other, in first-seen order;
    a preset that already passed at ``commit`` is left out."""
    unknown = sorted(set(wanted) - set(digests))
    if unknown:
        raise SystemExit(f"rehearse_campaign: not paper presets: {', '.join(unknown)} (choose from "
                         f"{', '.join(digests)})")
    todo = [p for p in (wanted or digests) if not (records.get(p, {}).get("commit") == commit
                                                  and records[p].get("passed"))]
    order = list(dict.fromkeys(digests[p] for p in todo))
    return sorted(todo, key=lambda p: order.index(digests[p]))


def merged(old: dict | None, new: dict) -> dict:
    """``new`` with ``old`` (a record of an earlier run, itself without its history) appended to ``earlier_runs``."""
    if not old or old == new:
        return new
    history = old.pop("earlier_runs", [])
    return {**new, "earlier_runs": [*history, old]}


def copy_record(clone: Path, preset: str, twins: list[str] = ()) -> dict | None:
    """The clone's record of ``preset`` into this checkout's results file; returns it (None when none was written).
    ``twins``: presets with the same settings digest that passed at this commit before it, recorded as
    ``same_settings_as`` (DVC skipped the stages they share as up to date, so ``stages`` lists only what ran)."""
    theirs = json.loads((clone / RESULTS).read_text()).get("presets", {}) if (clone / RESULTS).is_file() else {}
    if theirs.get(preset, {}).get("commit") != short("HEAD", clone):  # none written: the clone's file is older
        return None
    ours = json.loads((ROOT / RESULTS).read_text())
    new = {k: v for k, v in theirs[preset].items() if k != "earlier_runs"}
    if twins:
        new["same_settings_as"] = list(twins)
    ours["presets"][preset] = merged(ours["presets"].get(preset), new)
    write_results(ours)
    return new


def prepare(commit: str, workdir: Path) -> Path:
    """``workdir``: a clone of this checkout at ``commit`` with the environments and model linked in."""
    if not (workdir / ".git").is_dir():
        subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(workdir)], check=True)
        subprocess.run(["git", "checkout", "--quiet", commit], cwd=workdir, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=workdir, check=True, capture_output=True,
                          text=True).stdout.strip()
    if not head.startswith(commit):
        raise SystemExit(f"rehearse_campaign: {workdir} is at {head[:7]}, not {commit}: choose another --workdir")
    for rel in LINKED:
        link, target = workdir / rel, ROOT / rel
        if not target.exists():
            raise SystemExit(f"rehearse_campaign: {target} is missing: run scripts/setup.sh and "
                             "scripts/setup_vllm.sh --cpu first")
        if not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target)
    return workdir


def rehearse(clone: Path, preset: str) -> int:
    """One ``seed run --preset P --rehearse`` in ``clone``, its output in ``clone/.tmp/logs/P.log``."""
    env = {**QUIET_ENV, **{k: v for k, v in os.environ.items() if k not in DROPPED_ENV},
           "PREFECT_HOME": str(clone / ".prefect"), "DVC_SITE_CACHE_DIR": str(clone / ".dvc/tmp/site-cache"),
           "PYTHONPATH": str(clone)}
    log = clone / ".tmp" / "logs" / f"{preset}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.run([str(clone / ".venv/bin/seed"), "run", "--preset", f"presets/{preset}.yaml",
                               "--rehearse"], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", default="HEAD", help="the commit every rehearsal runs at (default: HEAD)")
    parser.add_argument("--workdir", type=Path, help="the clone (default: .tmp/rehearsal-<commit>)")
    parser.add_argument("presets", nargs="*", help="preset stems (default: every paper preset)")
    args = parser.parse_args()
    commit = short(args.commit)
    clone = prepare(commit, args.workdir or ROOT / ".tmp" / f"rehearsal-{commit}")
    results = json.loads((ROOT / RESULTS).read_text())
    if results.get("campaign", {}).get("commit") != commit:  # the commit docs/rehearsals.md counts passes at
        results["campaign"] = {"commit": commit}
        write_results(results)
    records = results["presets"]
    digests = paper_presets(clone)
    todo = plan(digests, records, commit, args.presets)
    print(f"rehearse_campaign: {len(todo)} to rehearse at {commit} in {clone}: {', '.join(todo) or 'none'}",
          flush=True)
    for preset in todo:
        start = time.monotonic()
        code = rehearse(clone, preset)
        records = json.loads((ROOT / RESULTS).read_text())["presets"]
        twins = [p for p, r in records.items() if p != preset and digests.get(p) == digests[preset]
                 and r.get("commit") == commit and r.get("passed")]
        entry = copy_record(clone, preset, twins)
        outcome = entry["outcome"] if entry else "no record"
        print(f"rehearse_campaign: {preset} {outcome} (exit {code}) in {time.monotonic() - start:.0f} s",
              flush=True)


if __name__ == "__main__":
    main()
