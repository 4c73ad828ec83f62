"""``seed sweep`` takes its seeds from the params file or preset unless ``--seeds N`` is given (issue 39): the
confirmatory preset's study seeds are 10-19, and a default of ``--seeds 5`` silently ran 0-4 instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from seed_app import cli
from seed_core import loader
from seed_core.config import ConfigError

PRESET = Path(__file__).resolve().parents[2] / "presets" / "testbed-mechanism-confirmatory.yaml"


@pytest.mark.parametrize("args, seeds", [([], list(range(10, 20))), (["--seeds", "3"], [0, 1, 2])])
def test_the_sweep_runs_the_presets_seeds_unless_told(monkeypatch, args: list[str], seeds: list[int]) -> None:
    seen: list[dict] = []
    real = loader.load_config

    def load(path, overrides=None, *rest, **kw):
        cfg = real(path, overrides, *rest, **kw)
        seen.append({"seeds": cfg.sweep.seeds, "overrides": dict(overrides or {})})
        if len(seen) == 2:  # the sweep's config: stop before anything runs
            raise ConfigError("stop here")
        return cfg

    monkeypatch.setattr("seed_app.workspace.check", lambda *a, **k: None)
    monkeypatch.setattr(loader, "load_config", load)
    result = CliRunner().invoke(cli.app, ["sweep", "--preset", str(PRESET), *args])
    assert "stop here" in result.output, result.output
    assert seen[-1]["seeds"] == seeds
