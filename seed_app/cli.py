"""The ``seed`` command line: run the pipeline, one stage, the UIs, the served deployment, the table.

    seed run                                   # dvc repro under an MLflow parent run, then the table
    seed run --preset presets/sokoban-qwen2.5-1.5b.yaml -S rl.opd_coef=0.02 --name opd-0.02
    seed sweep --seeds 5                       # the methods table over seeds, with confidence intervals
    seed sweep --methods vanilla,sft,grpo,skill_grpo,skill_grpo*,sdar,seed   # "*": with the static skills
    seed stage rl@seed                         # one DVC stage (dvc repro --single-item)
    seed ui / seed ui --stop                   # Prefect + MLflow servers on 127.0.0.1
    seed init                                  # the project's Prefect and MLflow stores (setup.sh runs it)
    seed serve                                 # the Prefect UI deployment (needs `seed ui`)
    seed table                                 # print reports/table.md
    seed preflight                             # go/no-go of SEED's mechanism on the Stage-1 checkpoint (exit 0/1)
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Annotated, Any, Iterator, Optional

import typer

from seed_core import loader, timing
from seed_core.config import ConfigError, endpoint_env, project_root

app = typer.Typer(help="seed: SEED pipeline (DVC stages, Prefect flows, MLflow tracking).", no_args_is_help=True,
                  add_completion=False)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["rl.opd_coef=0.02"]`` -> ``{"rl.opd_coef": 0.02}`` (the engine's one parser; a typer error here)."""
    try:
        return loader.parse_overrides(items, origin="--set")
    except ConfigError as err:
        raise typer.BadParameter(str(err), param_hint="--set") from None


def parse_methods(text: str) -> list[str]:
    """``"grpo,skill_grpo*"`` -> ``["grpo", "skill_grpo_star"]``: the paper's "*" (evaluated with the static
    skills in the prompt) is the method key's ``_star`` (``seed_core.methods``)."""
    from seed_core.methods import STAR

    names = [m.strip() for m in text.split(",") if m.strip()]
    return [m[:-1] + STAR if m.endswith("*") else m for m in names]


@contextlib.contextmanager
def pipeline_errors() -> Iterator[None]:
    """A bad config or a busy workspace (``seed_app.workspace``) exits 2 with its message; a failed DVC command exits
    with its code (no traceback)."""
    from seed_app.workspace import Busy

    try:
        yield
    except (ConfigError, Busy) as err:
        typer.echo(f"seed: {err}", err=True)
        raise typer.Exit(2) from None
    except subprocess.CalledProcessError as err:
        typer.echo(f"seed: `{' '.join(err.cmd)}` failed with exit code {err.returncode}", err=True)
        raise typer.Exit(err.returncode) from None


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


@app.command()
def run(preset: Annotated[Optional[Path], typer.Option(help="a params file from presets/ (an experiment)")] = None,
        set_: Annotated[Optional[list[str]], typer.Option("--set", "-S", help="KEY=VALUE (an experiment)")] = None,
        name: Annotated[Optional[str], typer.Option(help="DVC experiment name")] = None) -> None:
    """Run the whole pipeline through DVC (only stale stages rerun), then print the table and the UI links. A run
    holds the workspace (``seed_app.workspace``) before it writes params.yaml or starts a server; a second one
    exits 2 at once naming it (``workspace.check`` first). The "every stage is up to date" path only reads, and
    takes no lock."""
    from seed_app import workspace

    timing.mark("cli_run")
    overrides = parse_overrides(set_ or [])
    with pipeline_errors():
        workspace.check()  # read-only, at once: not after the config load (~1 s) or DVC's lock wait (3 s)
        loader.load_config(preset or project_root() / "params.yaml", overrides or None)  # stop before any server starts
        links = None  # nothing stale: no run, so no links
        if not (preset or overrides or name) and up_to_date(project_root()):
            typer.echo("seed: every stage is up to date (dvc status), nothing to run; no new MLflow or Prefect run "
                       "is recorded (the runs that made these outputs hold them). The table:")
        else:
            with workspace.hold():  # before params.yaml is written, a server starts or Prefect is imported
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
    import json

    path = root / SWEEP_DIR / "learning.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    out = {f"{m}/mean": s["mean"] for m, s in data["methods"].items()}
    return out | {f"{name}/mean_diff": c["mean_diff"] for name, c in data["comparisons"].items()}


@app.command()
def sweep(seeds: Annotated[int, typer.Option(min=1, help="seeds 0..N-1, one DVC foreach cell each")] = 5,
          methods: Annotated[Optional[str], typer.Option(
              help="comma-separated: vanilla, sft, any RL algorithm, and any of them with * (skill_grpo*: evaluated "
                   "with the static skills in the prompt) (default: sweep.methods)")] = None,
          preset: Annotated[Optional[Path], typer.Option(help="a params file from presets/")] = None,
          set_: Annotated[Optional[list[str]], typer.Option("--set", "-S", help="KEY=VALUE")] = None) -> None:
    """The methods table over seeds (sweep/dvc.yaml): mean ± 95% CI, IQM, P(SEED > GRPO); finished cells are
    reused, so a killed sweep reruns only the missing ones. It holds the workspace (``seed_app.workspace``)."""
    from seed_app import workspace

    overrides = parse_overrides(set_ or [])
    with pipeline_errors():
        workspace.check()  # read-only, at once: not after the config load (~1 s)
    current = loader.load_config(preset or project_root() / "params.yaml")
    if list(range(seeds)) != current.sweep.seeds:
        overrides["sweep.seeds"] = list(range(seeds))
    if methods and parse_methods(methods) != current.sweep.methods:
        overrides["sweep.methods"] = parse_methods(methods)
    with pipeline_errors(), workspace.hold():  # before params.yaml is written, a server starts or Prefect is imported
        from seed_app.dvc_run import run_pipeline

        run_pipeline(preset, overrides, targets=("sweep/dvc.yaml",), run_name="sweep", summary=sweep_metrics,
                     artifacts=("params.yaml", "sweep/dvc.lock", f"{SWEEP_DIR}/table.md",
                                f"{SWEEP_DIR}/learning.json", f"{SWEEP_DIR}/curve_success.png"), reports=None)
    typer.echo((project_root() / SWEEP_DIR / "table.md").read_text())


@app.command()
def stage(name: Annotated[str, typer.Argument(help="a dvc.yaml stage: prepare_model, collect, annotate, sft, "
                                                    "rl@<algorithm>, evaluate@<method>, report")]) -> None:
    """Run one DVC stage (its inputs must be up to date; `seed run` runs what is stale), holding the workspace
    (``seed_app.workspace``; dvc inherits the lock)."""
    from seed_app import workspace

    with pipeline_errors(), workspace.hold():
        from seed_app.dvc_run import stage_env

        code = subprocess.run(["dvc", "repro", "--single-item", name], cwd=project_root(), env=stage_env(None),
                              pass_fds=workspace.inherited_fds()).returncode
    raise typer.Exit(code)


@app.command()
def init() -> None:
    """Create the project's Prefect database and MLflow tables (once per clone; `scripts/setup.sh` runs it), so
    that the first `seed run` does not wait for their migrations; harmless to repeat (an upgrade)."""
    from seed_app import services

    try:
        seconds = services.init_stores()
    except RuntimeError as err:
        typer.echo(f"seed: {err}", err=True)
        raise typer.Exit(1) from None
    for name, taken in seconds.items():
        typer.echo(f"{name}: store ready ({taken:.1f} s)")
    if not seconds:
        typer.echo("seed: Prefect and MLflow are configured servers ($PREFECT_API_URL, $MLFLOW_TRACKING_URI); "
                   "nothing to create here")


@app.command()
def ui(prefect_port: int = 4200, mlflow_port: int = 5000,
       stop: Annotated[bool, typer.Option("--stop", help="stop the servers `seed ui` started")] = False,
       auth: Annotated[bool, typer.Option("--auth", help="basic auth on both servers (shared machines): user seed, "
                                                         "password $SEED_UI_PASSWORD or a random one, printed "
                                                         "once")] = False) -> None:
    """Start the Prefect and MLflow UIs on 127.0.0.1 (detached) and print their URLs and PIDs; `seed run`
    and `dvc repro` then report to this Prefect server (else they record into the same database, .prefect/).
    Both accept web requests from their own origin only (CORS, CSRF, allowed hosts); `--auth` adds the servers'
    basic auth, whose credentials seed's own processes read from .tmp/ui/auth.json (mode 0600)."""
    from flows import servers
    from seed_app import services

    if stop:
        for server in ("prefect", "mlflow"):
            typer.echo(f"{server}: stopped PID {servers.stop(server)}")
        services.forget_credentials()
        return
    commands = services.server_commands(prefect_port, mlflow_port, auth)
    if auth and (running := [name for name, (_, health, _) in commands.items() if servers.healthy(health)]):
        typer.echo(f"seed: {' and '.join(running)} already running; `seed ui --stop` first (an --auth start sets "
                   "a new password)", err=True)
        raise typer.Exit(1)
    try:
        credentials = services.new_credentials() if auth else None
        if not auth and not any(servers.healthy(health) for _, health, _ in commands.values()):
            services.forget_credentials()  # an earlier `--auth` start's, not these servers'
        pids = services.start_all(commands, services.auth_env(*credentials[:2]) if credentials else None)
    except RuntimeError as err:
        if auth:
            services.forget_credentials()
        typer.echo(f"seed: {err}", err=True)
        raise typer.Exit(1) from None
    for server, (command, health, url) in commands.items():
        typer.echo(f"{server}: {url}  (PID {pids[server]}, log .tmp/ui/{server}.log)")
    if credentials:
        user, password, generated = credentials
        shown = f"password {password}  (shown once; also in .tmp/ui/auth.json, mode 0600)" if generated else \
            f"password from ${services.PASSWORD_VAR}"
        typer.echo(f"basic auth: user {user}, {shown}; Prefect's UI asks for {user}:<password>")
    typer.echo(f"export PREFECT_API_URL=http://127.0.0.1:{prefect_port}/api   # flows then show in the Prefect UI")
    typer.echo("stop with: seed ui --stop")


@app.command()
def serve() -> None:
    """Serve the `seed-pipeline/ui` deployment (trigger and schedule runs from the Prefect UI). Each run holds the
    workspace (``seed_app.workspace``) like `seed run`; one that finds it in use fails naming the holder."""
    from flows.servers import client_auth_env, healthy
    from seed_app.dvc_run import serve_deployment

    url = endpoint_env("PREFECT_API_URL") or "http://127.0.0.1:4200/api"
    if not healthy(f"{url}/health"):
        typer.echo(f"seed: no Prefect server at {url}; start one with `seed ui` (or set PREFECT_API_URL)", err=True)
        raise typer.Exit(2)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    os.environ["PREFECT_API_URL"] = url  # served runs report to that server
    os.environ.update(client_auth_env(url, None))  # with `seed ui --auth`'s credentials
    with temporary_settings({PREFECT_API_URL: url}):  # reads the environment again: Prefect is imported already
        serve_deployment()


@app.command()
def preflight(preset: Annotated[Optional[Path], typer.Option(help="a params file from presets/")] = None,
              set_: Annotated[Optional[list[str]], typer.Option("--set", "-S", help="KEY=VALUE")] = None,
              checkpoint: Annotated[Optional[Path], typer.Option(
                  help="the policy RL starts from (default: the workspace's data/sft/checkpoint)")] = None,
              heldout: Annotated[int, typer.Option(help="held-out tasks (P(expert action), perf gap)")] = 32,
              tasks: Annotated[int, typer.Option(help="round-0 train tasks (skills, gradients, advantages)")] = 8,
              algorithm: Annotated[str, typer.Option(help="whose lambda, beta and teacher the round-0 measures use")]
              = "seed",
              threshold: Annotated[Optional[list[str]], typer.Option(
                  help="NAME=VALUE: judge by another threshold than the issue's (the line says so)")] = None,
              json_out: Annotated[Optional[Path], typer.Option("--json", help="write the preflight block here")]
              = None) -> None:
    """Before any RL: can the teacher teach? Measures the matched / mismatched skill's effect on P(expert action),
    the teacher-student success gap, self-skill correctness, the distillation-to-PG gradient ratio and the share
    of zero-advantage groups (``seed_core.mechanism``), one line each with its threshold and PASS/FAIL, then the
    verdict. Exit 0 when every threshold passes, 1 when one fails, 2 on bad input."""
    import json

    from seed_core.io import KnownError
    from seed_core.mechanism import THRESHOLDS, override_thresholds, run_preflight

    overrides = parse_overrides(set_ or [])
    try:
        cfg = loader.load_config(preset or project_root() / "params.yaml", overrides or None)
        from flows.common import stage_paths

        table_ = override_thresholds(THRESHOLDS, threshold or [])
        report = run_preflight(cfg, checkpoint or stage_paths(cfg).sft / "checkpoint", heldout=heldout, tasks=tasks,
                               algorithm=algorithm, thresholds=table_)
    except (ConfigError, KnownError) as err:
        typer.echo(f"seed: {err}", err=True)
        raise typer.Exit(2) from None
    for line in report.lines():
        typer.echo(line)
    if threshold:
        typer.echo(f"(thresholds overridden: {', '.join(threshold)})")
    if json_out:
        json_out.write_text(json.dumps(report.block(), indent=2) + "\n")
    raise typer.Exit(0 if report.passed else 1)


@app.command()
def table() -> None:
    """Print reports/table.md (written by the report stage)."""
    path = project_root() / "reports" / "table.md"
    if not path.is_file():
        typer.echo("seed: reports/table.md does not exist yet; run `seed run` first", err=True)
        raise typer.Exit(1)
    typer.echo(path.read_text())


if __name__ == "__main__":
    app()
