"""The pipeline's commands: ``seed run`` (the whole pipeline, then the table), ``seed sweep`` (the methods table
over random seeds), ``seed stage`` (one DVC stage) and ``seed table`` (the last run's table)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from seed_app.cli_base import PresetOption, SeedCommand, SetOption, command, did_you_mean, parse_overrides, \
    pipeline_errors
from seed_core import loader
from seed_core.config import ConfigError, project_root
from seed_core.runtime import timing


def parse_methods(text: str) -> list[str]:
    """``"grpo,skill_grpo*"`` -> ``["grpo", "skill_grpo_star"]``: the paper's "*" (evaluated with the static
    skills in the prompt) is the method key's ``_star`` (``seed_core.methods``)."""
    from seed_core.methods import STAR

    names = [m.strip() for m in text.split(",") if m.strip()]
    return [m[:-1] + STAR if m.endswith("*") else m for m in names]


def up_to_date(root: Path, targets: tuple[str, ...] = ("dvc.yaml",)) -> bool:
    """Whether ``dvc repro`` would run nothing: DVC's own status of ``targets`` (outputs, code and data deps,
    params against dvc.lock) through its Python API, before Prefect, MLflow or a server start (~1 s).
    False when DVC cannot tell (e.g. another DVC process holds the lock): the full run then reports it."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(str(root)) as repo:
            return not repo.status(targets=[str(root / t) for t in targets])
    except DvcException:
        return False


@command(short_help="Run the whole pipeline (only stale stages rerun) and print the results table.")
def run(preset: PresetOption = None, set_: SetOption = None,
        name: Annotated[Optional[str], typer.Option(metavar="NAME", help="The DVC experiment's name.")] = None,
        rehearse: Annotated[bool, typer.Option(help="Rehearse a paper preset on CPU: its stages and code path with "
                                               "SmolLM2, vLLM's CPU build and small budgets; prints what it "
                                               "replaces (seed_app.rehearsal).")] = False) -> None:
    """Run the whole pipeline (only stale stages rerun) and print the results table.

    The stages run through DVC under one MLflow parent run; afterwards the table, the verdict against the
    committed reference and the links to the Prefect and MLflow UIs are printed. Before anything starts, the
    config, the model directory, the data and the endpoints the run needs are checked: a problem ends in one
    line and exit code 2. A run holds the workspace, so a second seed command in this project exits 2 at once
    naming it. When every stage is up to date, nothing runs and the table is printed.
    """
    from seed_app import workspace

    timing.mark("cli_run")
    with pipeline_errors():
        overrides = parse_overrides(set_ or [])
        workspace.check()  # read-only, at once: not after the config load (~1 s) or DVC's lock wait (3 s)
        cfg = loader.load_config(preset or project_root() / "params.yaml", overrides or None)
        checked = cfg  # what the run's inputs are checked against
        if rehearse:  # a paper preset's run on CPU: what it replaces, checked before anything starts
            from seed_app import rehearsal

            checked = rehearsal.checked_config(preset, cfg, overrides)
        from seed_app.preset_card import provenance_line

        if preset and (line := provenance_line(preset)):  # a paper preset: its values against the paper, one line
            typer.echo(line)
        links = None  # nothing stale: no run, so no links
        if not (preset or overrides or name) and up_to_date(project_root()):
            typer.echo("seed: every stage is up to date (dvc status), nothing to run; no new MLflow or Prefect run "
                       "is recorded (the runs that made these outputs hold them). The table:")
        else:
            from seed_app.interrupt import reported

            # the workspace before params.yaml is written, a server starts or Prefect is imported; Ctrl-C: one line
            with workspace.hold(), reported("seed run", workspace.command_line()):
                from seed_app import inputs

                inputs.check_run(checked)  # model directory, data, endpoints: before Prefect or a server starts
                if rehearse and preset is not None:
                    links = rehearsal.rehearse(preset, cfg, overrides, name, typer.echo).links
                else:
                    from seed_app.dvc_run import run_in_flow

                    links = run_in_flow(preset, overrides, name).links
    table()
    from flows.results import reference_verdict

    typer.echo(reference_verdict(project_root()))
    for label, url in (links or {}).items():
        typer.echo(f"{label}: {url}")
    if links == {}:
        typer.echo("seed: `seed ui` shows this run in Prefect and MLflow")


SWEEP_DIR = "reports/sweep"


def sweep_metrics(root: Path, cfg: Any) -> dict[str, float]:
    """``<method>/mean`` and the comparisons' mean differences from the sweep's learning.json."""
    path = root / SWEEP_DIR / "learning.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    out = {f"{m}/mean": s["mean"] for m, s in data["methods"].items()}
    return out | {f"{name}/mean_diff": c["mean_diff"] for name, c in data["comparisons"].items()}


@command(short_help="Run the methods table over several random seeds, with confidence intervals.")
def sweep(seeds: Annotated[Optional[int], typer.Option(
              min=1, max=1000, metavar="N", help="Run random seeds 0..N-1, one DVC foreach cell each (default: the "
                                                 "params file's or preset's sweep.seeds, e.g. 0..4).")] = None,
          methods: Annotated[Optional[str], typer.Option(
              metavar="LIST", help="Comma-separated methods: vanilla, sft, any RL algorithm, and any of them with * "
                                   "(skill_grpo*: evaluated with the static skills in the prompt); the default is "
                                   "sweep.methods.")] = None,
          preset: PresetOption = None, set_: SetOption = None,
          pool: Annotated[Optional[str], typer.Option(
              metavar="NAME", help="Fan the cells out to the `seed worker`s of this Prefect work pool instead of "
                                   "running them here one by one.")] = None) -> None:
    """Run the methods table over several random seeds, with confidence intervals.

    Each method gets its mean with a 95% CI, the IQM and P(SEED > GRPO) (sweep/dvc.yaml). Finished cells are
    reused, so a killed sweep reruns only the missing ones. The config and what the run needs from outside are
    checked before anything starts; the sweep holds the workspace like `seed run`. With --pool, each cell is a
    run of a Prefect deployment that any worker of the pool takes (seed_app/pool.py, docs/experiments.md).
    """
    from seed_app import workspace

    with pipeline_errors():
        overrides = parse_overrides(set_ or [])
        if pool:
            from seed_app.cli_pool import check_pool_name

            check_pool_name(pool)
        workspace.check()  # read-only, at once: not after the config load (~1 s)
        current = loader.load_config(preset or project_root() / "params.yaml")
        if seeds is not None and list(range(seeds)) != current.sweep.seeds:  # else the preset's (study seeds 10-19)
            overrides["sweep.seeds"] = list(range(seeds))
        if methods and parse_methods(methods) != current.sweep.methods:
            overrides["sweep.methods"] = parse_methods(methods)
        cfg = loader.load_config(preset or project_root() / "params.yaml", overrides)
        from seed_app.interrupt import reported

        # the workspace before params.yaml is written, a server starts or Prefect is imported; Ctrl-C: one line
        with workspace.hold(), reported("seed sweep", workspace.command_line()):
            from seed_app import inputs

            inputs.check_run(cfg)  # model directory, data, endpoints: before Prefect or a server starts
            if pool:
                from seed_app.pool import run_pool_sweep

                run_pool_sweep(cfg, pool, sweep_metrics)
            else:
                from seed_app.dvc_run import run_pipeline

                run_pipeline(preset, overrides, targets=("sweep/dvc.yaml",), run_name="sweep", summary=sweep_metrics,
                             artifacts=("params.yaml", "sweep/dvc.lock", f"{SWEEP_DIR}/table.md",
                                        f"{SWEEP_DIR}/learning.json", f"{SWEEP_DIR}/curve_success.png"),
                             reports=None)
    typer.echo((project_root() / SWEEP_DIR / "table.md").read_text())


def stage_names(root: Path) -> list[str] | None:
    """Every stage DVC knows in this project (``rl@seed``, ``sweep/dvc.yaml:cell@0``, ...), read through its
    Python API (~1 s); None when DVC cannot read the pipeline (``dvc repro`` then says why)."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(str(root)) as repo:
            return [stage.addressing for stage in repo.index.stages]
    except DvcException:
        return None


def check_stage_name(name: str, root: Path) -> None:
    """A ``ConfigError`` naming the known stages unless ``dvc repro`` knows ``name``: a stage, a foreach group
    (``rl``), ``dvc.yaml:<stage>`` or a dvc.yaml file."""
    known = stage_names(root)
    if known is None or (root / name).is_file():
        return
    accepted = set(known) | {n.split("@", 1)[0] for n in known} | {f"dvc.yaml:{n}" for n in known}
    if name not in accepted:
        raise ConfigError(f"stage {name!r} is not in dvc.yaml{did_you_mean(name, known)}; the stages are "
                          f"{', '.join(known)}; run `seed stage NAME` with one of them (`seed run` runs every "
                          "stale one)")


@command(cls=SeedCommand, short_help="Run one DVC stage of the pipeline.")
def stage(name: Annotated[str, typer.Argument(
        metavar="NAME", help="A stage of dvc.yaml: prepare_model, collect, annotate, sft, rl@<algorithm>, "
                             "evaluate@<method> or report (`dvc stage list` names them all).")]) -> None:
    """Run one DVC stage of the pipeline.

    Its inputs must be up to date (`seed run` runs whatever is stale). An unknown name ends in one line that
    lists the stages. The stage holds the workspace like `seed run`, and dvc inherits the lock.
    """
    from seed_app import workspace

    with pipeline_errors():
        workspace.check()  # read-only, at once: before DVC reads the pipeline (~1 s)
        check_stage_name(name, project_root())
        with workspace.hold():
            from seed_app.dvc_run import stage_env

            code = subprocess.run(["dvc", "repro", "--single-item", name], cwd=project_root(),
                                  env=stage_env(None), pass_fds=workspace.inherited_fds()).returncode
    raise typer.Exit(code)


@command(short_help="Print the results table of the last run (reports/table.md).")
def table() -> None:
    """Print the results table of the last run (reports/table.md).

    The report stage writes it; `seed run` prints it at its end.
    """
    path = project_root() / "reports" / "table.md"
    if not path.is_file():
        typer.echo("seed: reports/table.md does not exist yet; run `seed run` first", err=True)
        raise typer.Exit(1)
    typer.echo(path.read_text())
