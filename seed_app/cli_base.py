"""What every ``seed`` command shares: bad input on one line, the common options, and the declaration of a command.

A usage error (``SeedGroup``), a bad config or preset and a busy workspace (``pipeline_errors``) end in one line,
``seed <command>: <what was wrong, what is allowed, the fix>``, and exit code 2, never a traceback. Any other
exception ends in one line too, ``seed <command>: unexpected <type>: <message> (at <our innermost file:line>);
traceback in <log>``, and exit code 1 (``seed_app.crash``: the log's place and what it holds). A command
module (``seed_app/cli_*.py``) declares its commands with ``command(...)``; ``seed_app/cli.py`` registers them.
"""

from __future__ import annotations

import contextlib
import difflib
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Iterator, Optional, Sequence, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

from seed_core import loader
from seed_core.config import ConfigError
from seed_core.runtime.endpoints import project_root

try:  # typer 0.2x vendors click (typer._click) and re-exports only BadParameter; older typers use click itself
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover
    from click import exceptions as click_errors  # type: ignore[no-redef]

F = TypeVar("F", bound=Callable[..., Any])


def command(**settings: Any) -> Callable[[F], F]:
    """Declare a ``seed`` subcommand: ``settings`` (``short_help=``, ``cls=``) are what ``app.command`` gets when
    ``seed_app/cli.py`` registers the function (``register``); the function itself is unchanged."""
    def declare(func: F) -> F:
        func.seed_command = settings  # type: ignore[attr-defined]
        return func
    return declare


def register(app: typer.Typer, commands: Sequence[Callable[..., Any]]) -> None:
    """Register ``commands`` on ``app`` in this order (the order of ``seed --help``)."""
    for func in commands:
        app.command(**func.seed_command)(func)  # type: ignore[attr-defined]


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
            if not {"--help", "-h"} & set(argv):
                check_project_of_cwd(Path.cwd(), project_root())
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
        except typer.Abort:  # typer's own (typer >= 0.2x), or click's re-exported by older typers
            typer.echo("seed: aborted", err=True)
            code = 1
        except Exception as err:  # noqa: BLE001 - the one error path of the unforeseen (seed_app.crash)
            from seed_app.crash import report

            typer.echo(report(err, argv, argv[0] if argv and argv[0] in self.commands else ""), err=True)
            code = 1
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


def enclosing_project(cwd: Path) -> Path | None:
    """The nearest directory at or above ``cwd`` that is a checkout of this project (``params.yaml`` beside
    ``seed_core/``), or None."""
    for folder in (cwd, *cwd.parents):
        if (folder / "params.yaml").is_file() and (folder / "seed_core").is_dir():
            return folder
    return None


def check_project_of_cwd(cwd: Path, root: Path) -> None:
    """Refuse to run when the current directory is inside another checkout than the one ``seed_core`` is imported
    from: an editable install maps ``seed`` to its own checkout, so from a clone it would run (and overwrite the
    stage outputs of) that other workspace. Outside any checkout the command runs on ``root`` as usual."""
    here = enclosing_project(cwd.resolve())
    if here is not None and here != root.resolve():
        err = click_errors.ClickException(
            f"this `seed` runs the project at {root} (its seed_core is imported from there), but the current "
            f"directory is inside the checkout {here}; run that checkout's own code with "
            f"`PYTHONPATH={here} python -m seed_app.cli ...`, or `pip install -e {here}` into its environment")
        err.exit_code = 2
        raise err


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


PresetOption = Annotated[Optional[Path], typer.Option(
    metavar="FILE", help="A params file from presets/, run as a DVC experiment.")]
SetOption = Annotated[Optional[list[str]], typer.Option(
    "--set", "-S", metavar="KEY=VALUE", help="Override one params.yaml value, e.g. -S rl.opd_coef=0.02; repeat it "
                                             "for more.")]


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["rl.opd_coef=0.02"]`` -> ``{"rl.opd_coef": 0.02}`` (the engine's one parser; a ``ConfigError`` here)."""
    return loader.parse_overrides(items, origin="--set")


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
