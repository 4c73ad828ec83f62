"""The ``seed`` command line: run the pipeline, one stage, the UIs, the served deployment, the table.

    seed run                                   # dvc repro under an MLflow parent run, then the table
    seed run --preset presets/sokoban-qwen2.5-1.5b.yaml -S rl.opd_coef=0.02 --name opd-0.02
    seed sweep --seeds 5                       # the methods table over random seeds, with confidence intervals
    seed sweep --methods vanilla,sft,grpo,skill_grpo,skill_grpo*,sdar,seed   # "*": with the static skills
    seed stage rl@seed                         # one DVC stage (dvc repro --single-item)
    seed ui / seed ui --stop                   # Prefect + MLflow servers on 127.0.0.1
    seed init                                  # the project's Prefect and MLflow stores (setup.sh runs it)
    seed serve                                 # the Prefect UI deployment (needs `seed ui`)
    seed table                                 # print reports/table.md
    seed preflight                             # go/no-go of SEED's mechanism on the Stage-1 checkpoint (exit 0/1)

Bad input ends in one line, ``seed <command>: <what was wrong, what is allowed, the fix>``, and exit code 2,
never a traceback: a usage error (``SeedGroup``), a bad config or preset, a missing model or data directory or an
endpoint that does not answer (``seed_app.inputs``, checked before any server or stage starts), a busy
workspace (``pipeline_errors``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Iterator, Optional, Sequence

import typer
from typer.core import TyperCommand, TyperGroup

from seed_core import loader, timing
from seed_core.config import ConfigError, endpoint_env, project_root

try:  # typer 0.2x vendors click (typer._click) and re-exports only BadParameter; older typers use click itself
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover
    from click import exceptions as click_errors  # type: ignore[no-redef]


def one_line(text: str) -> str:
    """A message on one line: its lines joined, the first by a space (``invalid config:``), the rest by ``; ``."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return " ".join(lines[:1] + (["; ".join(lines[1:])] if lines[1:] else []))


class SeedGroup(TyperGroup):
    """The ``seed`` group: a usage error (an unknown command or option, a bad or missing value) prints one line
    naming the value, what is allowed and where the help is, then exits 2 (click's own is a usage block)."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(argv, "seed", complete_var, standalone_mode=False, **extra)
        except click_errors.NoArgsIsHelpError as err:  # plain `seed`: the help, as click prints it
            typer.echo(err.format_message())
            code = 2
        except click_errors.UsageError as err:
            typer.echo(usage_line(err, argv, self), err=True)
            code = 2
        except click_errors.ClickException as err:
            typer.echo(f"seed: {one_line(err.format_message())}", err=True)
            code = err.exit_code
        except (click_errors.Abort, typer.Abort):
            typer.echo("seed: aborted", err=True)
            code = 1
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


class SeedCommand(TyperCommand):
    """A ``seed`` subcommand whose help names an argument without typer's ``<str>`` type."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        for kind, title in (("argument", "Arguments"), ("option", "Options")):
            rows = [row for param in self.get_params(ctx) if param.param_type_name == kind
                    and (row := param.get_help_record(ctx)) is not None]
            rows = [(name.split(" <", 1)[0], text) for name, text in rows] if kind == "argument" else rows
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def usage_line(err: Any, argv: list[str], group: Any) -> str:
    """``seed <command>: <the problem and the given value>; <what is allowed>; see `seed <command> --help```."""
    ctx = err.ctx
    if ctx is not None and ctx.command is not group:
        where = " ".join(["seed", *ctx.command_path.split()[1:]])
    else:  # an error of the option parser carries no context: the command is the first word
        where = f"seed {argv[0]}" if argv and argv[0] in group.commands else "seed"
    message = lower_first(one_line(err.format_message()).rstrip("."))
    if isinstance(err, click_errors.NoSuchOption) and ctx is not None:
        options = option_names(ctx.command)
        message = f"no option {err.option_name}{did_you_mean(err.option_name, options)}; the options of `{where}` " \
                  f"are {', '.join(options)}"
    elif isinstance(err, click_errors.MissingParameter) and err.param is not None:
        message += f" ({lower_first(err.param.help.rstrip('.'))})" if getattr(err.param, "help", None) else ""
    elif isinstance(err, click_errors.BadParameter) and err.param is not None:
        name, given = param_name(err.param), given_value(argv, err.param)
        message = f"{name} {given!r}" if given is not None else name
        message += f" is invalid: {lower_first(one_line(err.message).rstrip('.'))}"
        message += f" ({name}: {lower_first(err.param.help.rstrip('.'))})" if getattr(err.param, "help", None) else ""
    elif ctx is not None and hasattr(ctx.command, "list_commands") and message.startswith("no such command"):
        message += f"; the commands are {', '.join(ctx.command.list_commands(ctx))}"
    elif ctx is not None and message.startswith("got unexpected extra argument"):
        takes = [param_name(p) for p in ctx.command.params if p.param_type_name == "argument"]
        message += f"; `{where}` takes {'the argument ' + ', '.join(takes) if takes else 'no arguments'}"
    return f"{where}: {message}; see `{where} --help`"


def lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def did_you_mean(word: str, names: list[str]) -> str:
    """`` (did you mean --name?)`` when a name is close to ``word``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(word, names, n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def option_names(command: Any) -> list[str]:
    """``--preset``, ``--set/-S``, ... of ``command``."""
    return ["/".join(param.opts) for param in command.params if param.param_type_name == "option"] + ["--help"]


def param_name(param: Any) -> str:
    """``--seeds`` for an option, ``NAME`` for an argument."""
    return param.opts[0] if param.param_type_name == "option" else (param.metavar or param.name.upper())


def given_value(argv: list[str], param: Any) -> str | None:
    """What the command line gave ``param`` (an option's value after ``--opt`` or in ``--opt=value``)."""
    for i, arg in enumerate(argv):
        for opt in param.opts:
            if arg == opt and i + 1 < len(argv) and opt.startswith("-"):
                return argv[i + 1]
            if arg.startswith(f"{opt}=") and opt.startswith("--"):
                return arg.split("=", 1)[1]
    return None


app = typer.Typer(cls=SeedGroup, rich_markup_mode=None, no_args_is_help=True, add_completion=False,
                  help="Run the SEED pipeline (DVC stages, Prefect flows, MLflow tracking) and show its results. "
                       "Every command's --help says what it does and takes.")

PresetOption = Annotated[Optional[Path], typer.Option(
    metavar="FILE", help="A params file from presets/, run as a DVC experiment.")]
SetOption = Annotated[Optional[list[str]], typer.Option(
    "--set", "-S", metavar="KEY=VALUE", help="Override one params.yaml value, e.g. -S rl.opd_coef=0.02; repeat it "
                                             "for more.")]


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["rl.opd_coef=0.02"]`` -> ``{"rl.opd_coef": 0.02}`` (the engine's one parser; a ``ConfigError`` here)."""
    return loader.parse_overrides(items, origin="--set")


def parse_methods(text: str) -> list[str]:
    """``"grpo,skill_grpo*"`` -> ``["grpo", "skill_grpo_star"]``: the paper's "*" (evaluated with the static
    skills in the prompt) is the method key's ``_star`` (``seed_core.methods``)."""
    from seed_core.methods import STAR

    names = [m.strip() for m in text.split(",") if m.strip()]
    return [m[:-1] + STAR if m.endswith("*") else m for m in names]


@contextlib.contextmanager
def pipeline_errors() -> Iterator[None]:
    """A bad config, a missing outside input (``seed_app.inputs``) or a busy workspace (``seed_app.workspace``)
    exits 2 with its message on one line; a failed DVC command exits with its code (no traceback)."""
    from seed_app.workspace import Busy

    try:
        yield
    except (ConfigError, Busy) as err:
        typer.echo(f"seed: {one_line(str(err))}", err=True)
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


@app.command(short_help="Run the whole pipeline (only stale stages rerun) and print the results table.")
def run(preset: PresetOption = None, set_: SetOption = None,
        name: Annotated[Optional[str], typer.Option(metavar="NAME", help="The DVC experiment's name.")] = None) -> None:
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
        links = None  # nothing stale: no run, so no links
        if not (preset or overrides or name) and up_to_date(project_root()):
            typer.echo("seed: every stage is up to date (dvc status), nothing to run; no new MLflow or Prefect run "
                       "is recorded (the runs that made these outputs hold them). The table:")
        else:
            with workspace.hold():  # before params.yaml is written, a server starts or Prefect is imported
                from seed_app import inputs

                inputs.check_run(cfg)  # model directory, data, endpoints: before Prefect or a server starts
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


@app.command(short_help="Run the methods table over several random seeds, with confidence intervals.")
def sweep(seeds: Annotated[int, typer.Option(min=1, metavar="N", help="Run random seeds 0..N-1, one DVC foreach "
                                                                       "cell each.")] = 5,
          methods: Annotated[Optional[str], typer.Option(
              metavar="LIST", help="Comma-separated methods: vanilla, sft, any RL algorithm, and any of them with * "
                                   "(skill_grpo*: evaluated with the static skills in the prompt); the default is "
                                   "sweep.methods.")] = None,
          preset: PresetOption = None, set_: SetOption = None) -> None:
    """Run the methods table over several random seeds, with confidence intervals.

    Each method gets its mean with a 95% CI, the IQM and P(SEED > GRPO) (sweep/dvc.yaml). Finished cells are
    reused, so a killed sweep reruns only the missing ones. The config and what the run needs from outside are
    checked before anything starts; the sweep holds the workspace like `seed run`.
    """
    from seed_app import workspace

    with pipeline_errors():
        overrides = parse_overrides(set_ or [])
        workspace.check()  # read-only, at once: not after the config load (~1 s)
        current = loader.load_config(preset or project_root() / "params.yaml")
        if list(range(seeds)) != current.sweep.seeds:
            overrides["sweep.seeds"] = list(range(seeds))
        if methods and parse_methods(methods) != current.sweep.methods:
            overrides["sweep.methods"] = parse_methods(methods)
        cfg = loader.load_config(preset or project_root() / "params.yaml", overrides)
        with workspace.hold():  # before params.yaml is written, a server starts or Prefect is imported
            from seed_app import inputs

            inputs.check_run(cfg)  # model directory, data, endpoints: before Prefect or a server starts
            from seed_app.dvc_run import run_pipeline

            run_pipeline(preset, overrides, targets=("sweep/dvc.yaml",), run_name="sweep", summary=sweep_metrics,
                         artifacts=("params.yaml", "sweep/dvc.lock", f"{SWEEP_DIR}/table.md",
                                    f"{SWEEP_DIR}/learning.json", f"{SWEEP_DIR}/curve_success.png"), reports=None)
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


@app.command(cls=SeedCommand, short_help="Run one DVC stage of the pipeline.")
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


@app.command(short_help="Create the project's Prefect database and MLflow tables.")
def init() -> None:
    """Create the project's Prefect database and MLflow tables.

    Once per clone (scripts/setup.sh runs it), so that the first `seed run` does not wait for their
    migrations. It is harmless to repeat: it upgrades them.
    """
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


def port_option(server: str) -> Any:
    return typer.Option(min=1, max=65535, metavar="PORT", help=f"The {server} UI's port on 127.0.0.1.")


def running_as(server: str, url: str) -> str:
    """``PID 123, port 4200`` of the ``server`` that answers at ``url``: the PID ``seed ui`` recorded when it
    started that server, else a note that another program started it."""
    from flows import servers

    port = url.rsplit(":", 1)[1]
    pid = servers.recorded_pid(server) if servers.recorded_url(server) == url else None
    who = f"PID {pid}" if pid else f"not started by `seed ui` in this project (no live .tmp/ui/{server}.pid)"
    return f"{who}, port {port}"


def stop_ui() -> None:
    """``seed ui --stop``: stop the servers ``seed ui`` started, one line each naming the PID and port, or why
    there was nothing to stop."""
    from flows import servers
    from seed_app import services

    for server in ("prefect", "mlflow"):
        url, alive = servers.recorded_url(server), servers.recorded_pid(server)
        port = f", port {url.rsplit(':', 1)[1]}" if url else ""
        pid = servers.stop(server)
        if pid is not None and alive:
            typer.echo(f"{server}: stopped PID {pid}{port}")
        elif pid is not None:
            typer.echo(f"{server}: PID {pid}{port} had already exited; its PID file is removed")
        elif (live := servers.ui_url(server)) is not None:
            typer.echo(f"{server}: {live} answers, but `seed ui` did not start it here (no .tmp/ui/{server}.pid), "
                       "so it keeps running; stop it where it was started")
        else:
            typer.echo(f"{server}: not running (no .tmp/ui/{server}.pid), nothing to stop")
    services.forget_credentials()


@app.command(short_help="Start the Prefect and MLflow UIs on 127.0.0.1, or stop them.")
def ui(prefect_port: Annotated[int, port_option("Prefect")] = 4200,
       mlflow_port: Annotated[int, port_option("MLflow")] = 5000,
       stop: Annotated[bool, typer.Option("--stop", help="Stop the servers that `seed ui` started.")] = False,
       auth: Annotated[bool, typer.Option("--auth", help="Protect both servers with basic auth (shared machines): "
                                                         "user seed, password $SEED_UI_PASSWORD or a random one, "
                                                         "printed once.")] = False) -> None:
    """Start the Prefect and MLflow UIs on 127.0.0.1, or stop them.

    The servers run detached; each line names the URL, the PID and the port (a server that is already up is
    kept and named). `seed run` and `dvc repro` then report to this Prefect server; without it they record into
    the same database (.prefect/). Both servers accept web requests from their own origin only (CORS, CSRF,
    allowed hosts); --auth adds basic auth, whose credentials seed's own processes read from .tmp/ui/auth.json
    (mode 0600).
    """
    from flows import servers
    from seed_app import services

    if stop:
        return stop_ui()
    commands = services.server_commands(prefect_port, mlflow_port, auth)
    if auth and (running := [f"{name} ({running_as(name, url)})" for name, (_, health, url) in commands.items()
                             if servers.healthy(health)]):
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
        typer.echo(f"seed: {one_line(str(err))}", err=True)
        raise typer.Exit(1) from None
    for server, (_, _, url) in commands.items():
        state = f"already running, {running_as(server, url)}" if pids[server] == "already running" else \
            f"PID {pids[server]}, port {url.rsplit(':', 1)[1]}"
        typer.echo(f"{server}: {url}  ({state}; log .tmp/ui/{server}.log)")
    if credentials:
        user, password, generated = credentials
        shown = f"password {password}  (shown once; also in .tmp/ui/auth.json, mode 0600)" if generated else \
            f"password from ${services.PASSWORD_VAR}"
        typer.echo(f"basic auth: user {user}, {shown}; Prefect's UI asks for {user}:<password>")
    typer.echo(f"export PREFECT_API_URL=http://127.0.0.1:{prefect_port}/api   # flows then show in the Prefect UI")
    typer.echo("stop with: seed ui --stop")


@app.command(short_help="Serve the Prefect UI deployment that triggers pipeline runs (needs `seed ui`).")
def serve() -> None:
    """Serve the Prefect UI deployment that triggers pipeline runs (needs `seed ui`).

    Runs of the seed-pipeline/ui deployment are triggered and scheduled from the Prefect UI. Each run holds the
    workspace like `seed run`; one that finds it in use fails naming the holder.
    """
    from flows import servers
    from seed_app.dvc_run import serve_deployment

    url = endpoint_env("PREFECT_API_URL") or "http://127.0.0.1:4200/api"
    if not servers.healthy(f"{url}/health"):
        typer.echo(f"seed: no Prefect server at {url}; start one with `seed ui` (or set PREFECT_API_URL)", err=True)
        raise typer.Exit(2)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    os.environ["PREFECT_API_URL"] = url  # served runs report to that server
    os.environ.update(servers.client_auth_env(url, None))  # with `seed ui --auth`'s credentials
    with temporary_settings({PREFECT_API_URL: url}):  # reads the environment again: Prefect is imported already
        serve_deployment()


@app.command(short_help="Check before any RL whether the teacher can teach: exit 0 go, 1 no-go, 2 bad input.")
def preflight(preset: Annotated[Optional[Path], typer.Option(metavar="FILE", help="A params file from presets/.")]
              = None, set_: SetOption = None,
              checkpoint: Annotated[Optional[Path], typer.Option(
                  metavar="DIR", help="The policy RL starts from; the default is the workspace's "
                                      "data/sft/checkpoint.")] = None,
              heldout: Annotated[int, typer.Option(metavar="N", help="Held-out tasks for P(expert action) and the "
                                                                     "performance gap (at least 2).")] = 32,
              tasks: Annotated[int, typer.Option(metavar="N", help="Round-0 train tasks for the skills, gradients "
                                                                   "and advantages (at least 1).")] = 8,
              algorithm: Annotated[str, typer.Option(metavar="NAME", help="The distilling algorithm whose lambda, "
                                                                          "beta and teacher the round-0 measures "
                                                                          "use.")] = "seed",
              threshold: Annotated[Optional[list[str]], typer.Option(
                  metavar="NAME=VALUE", help="Judge by another threshold than the issue's; the output says so.")]
              = None,
              json_out: Annotated[Optional[Path], typer.Option(
                  "--json", metavar="FILE", help="Write the preflight block of mechanism.json here.")] = None) -> None:
    """Check before any RL whether the teacher can teach: exit 0 go, 1 no-go, 2 bad input.

    It measures the matched and mismatched skill's effect on P(expert action), the teacher-student success
    gap, self-skill correctness, the distillation-to-PG gradient ratio and the share of zero-advantage groups
    (seed_core.mechanism), one line each with its threshold and PASS or FAIL, then the verdict. The arguments
    are checked before the model loads.
    """
    import json

    from seed_core.io import KnownError
    from seed_core.mechanism import THRESHOLDS, check_preflight_args, override_thresholds, run_preflight

    try:
        table_ = override_thresholds(THRESHOLDS, threshold or [])
        overrides = parse_overrides(set_ or [])
        cfg = loader.load_config(preset or project_root() / "params.yaml", overrides or None)
        from flows.common import stage_paths

        start = checkpoint or stage_paths(cfg).sft / "checkpoint"
        check_preflight_args(start, heldout=heldout, tasks=tasks, algorithm=algorithm)
        report = run_preflight(cfg, start, heldout=heldout, tasks=tasks, algorithm=algorithm, thresholds=table_)
    except (ConfigError, KnownError) as err:
        typer.echo(f"seed: {one_line(str(err))}", err=True)
        raise typer.Exit(2) from None
    for line in report.lines():
        typer.echo(line)
    if threshold:
        typer.echo(f"(thresholds overridden: {', '.join(threshold)})")
    if json_out:
        json_out.write_text(json.dumps(report.block(), indent=2) + "\n")
    raise typer.Exit(0 if report.passed else 1)


@app.command(short_help="Print the results table of the last run (reports/table.md).")
def table() -> None:
    """Print the results table of the last run (reports/table.md).

    The report stage writes it; `seed run` prints it at its end.
    """
    path = project_root() / "reports" / "table.md"
    if not path.is_file():
        typer.echo("seed: reports/table.md does not exist yet; run `seed run` first", err=True)
        raise typer.Exit(1)
    typer.echo(path.read_text())


if __name__ == "__main__":
    app()
