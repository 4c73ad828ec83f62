"""``seed preflight``: the go/no-go of SEED's mechanism on the Stage-1 checkpoint, before any RL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from seed_app.cli_base import SetOption, command, one_line, parse_overrides
from seed_core import loader
from seed_core.config import ConfigError, project_root


@command(short_help="Check before any RL whether the teacher can teach: exit 0 go, 1 no-go, 2 bad input.")
def preflight(preset: Annotated[Optional[Path], typer.Option(metavar="FILE", help="A params file from presets/.")]
              = None, set_: SetOption = None,
              checkpoint: Annotated[Optional[Path], typer.Option(
                  metavar="DIR", help="The policy RL starts from; the default is the workspace's "
                                      "data/sft/checkpoint.")] = None,
              heldout: Annotated[int, typer.Option(max=4096, metavar="N", help="Held-out tasks for P(expert action) "
                                                                               "and the performance gap (at least "
                                                                               "2).")] = 32,
              tasks: Annotated[int, typer.Option(max=4096, metavar="N", help="Round-0 train tasks for the skills, "
                                                                             "gradients and advantages (at least "
                                                                             "1).")] = 8,
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
    (seed_core.analyzer.mechanism), one line each with its threshold and PASS or FAIL, then the verdict. The arguments
    are checked before the model loads.
    """
    from seed_core.runtime.io import KnownError
    from seed_core.analyzer.mechanism import THRESHOLDS, check_preflight_args, override_thresholds, run_preflight

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
