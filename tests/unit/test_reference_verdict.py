"""`seed run` ends with two verdicts on its table (issue 28 item 2): per method, inside or outside the committed
multi-seed reference's 95% range of one run (and by how much; a method the reference lacks is said so), and
bit-identity with the committed table, with whether that was to be expected on this machine's numerics."""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
import pytest
from typer.testing import CliRunner

from flows import results
from flows.results import REFERENCE_NUMERICS, REFERENCE_SWEEP, reference_verdict
from seed_core.repro import numerics
from seed_core.repro.reference import judge, prediction_range, verdict_lines

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
       "PATH": "/usr/bin:/bin"}
REFERENCE = {"setting": {"episodes": 128, "preset": "tiny"},
             "methods": {"grpo": {"per_seed": [0.2, 0.3, 0.4]}, "seed": {"per_seed": [0.30, 0.30]}}}


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, env=ENV, check=True, capture_output=True)


def test_the_range_is_the_t_prediction_interval_with_a_binomial_floor() -> None:
    low, high = prediction_range([0.2, 0.3, 0.4], 128)  # m 0.3, s 0.1, t(0.975, 2) = 4.3027
    half = 4.302653 * 0.1 * math.sqrt(1 + 1 / 3)
    assert low == 0.0 and high == pytest.approx(0.3 + half, abs=1e-5)
    floor = 1.959964 * math.sqrt(0.3 * 0.7 / 128)  # seeds that agree: one evaluation's own noise
    assert prediction_range([0.3, 0.3], 128) == pytest.approx((0.3 - floor, 0.3 + floor), abs=1e-6)
    assert prediction_range([0.3], 128) == pytest.approx((0.3 - floor, 0.3 + floor), abs=1e-6)
    assert prediction_range([0.3, 0.3], 32)[1] > prediction_range([0.3, 0.3], 128)[1]  # fewer episodes: wider


def test_each_row_is_inside_outside_by_how_much_or_missing() -> None:
    rows = [{"method": "grpo", "label": "GRPO", "success_rate": 0.5}, {"method": "seed", "success_rate": 0.45},
            {"method": "seed", "success_rate": 0.10}, {"method": "seed_star", "label": "SEED*", "success_rate": 0.3}]
    inside, above, below, missing = judge(rows, REFERENCE)
    assert (inside.status, above.status, below.status, missing.status) == ("inside", "outside", "outside", "missing")
    assert inside.by == 0.0 and above.by == pytest.approx(0.45 - above.high) and above.by > 0
    assert below.by == pytest.approx(0.10 - below.low) and below.by < 0
    lines = verdict_lines([inside, above, below, missing], "ref.json", "tiny")
    assert lines[0].startswith("seed: your table against the committed 3-seed reference (ref.json; tiny)")
    assert "inside [0.0, " in lines[1] and f"OUTSIDE [{100 * above.low:.1f}, {100 * above.high:.1f}] by " \
        f"{100 * above.by:+.1f} points" in lines[2]
    assert "not in the reference" in lines[4] and "'seed_star'" in lines[4]
    assert lines[5].startswith("seed: 2 of 3 methods outside the reference's range: seed (+")
    assert lines[6] == "seed: not in the reference: SEED*"
    assert verdict_lines(judge(rows[:1], REFERENCE), "r")[-1] == "seed: all 1 methods the reference has lie inside " \
                                                                 "its range"


def write_project(root: Path, seed_rate: float, committed_numerics: dict[str, Any] | None) -> None:
    """A git project whose committed reference is REFERENCE, reports/table.{csv,md} (grpo 0.3, seed ``seed_rate``,
    seed_star 0.2) and, when given, the committed run's numerics record."""
    git(root, "init", "-q")
    (root / REFERENCE_SWEEP).parent.mkdir(parents=True)
    (root / REFERENCE_SWEEP).write_text(json.dumps(REFERENCE))
    (root / "reports").mkdir()
    pd.DataFrame({"method": ["grpo", "grpo", "seed", "seed_star"], "label": ["GRPO", "GRPO", "SEED", "SEED*"],
                  "split": ["test"] * 4, "task_type": ["ezpoints", "all", "all", "all"],
                  "success_rate": [0.9, 0.3, seed_rate, 0.2]}).to_csv(root / "reports" / "table.csv", index=False)
    (root / "reports" / "table.md").write_text(f"| Method | Avg |\n| GRPO | 30.0 |\n| SEED | {100 * seed_rate} |\n")
    if committed_numerics is not None:
        (root / REFERENCE_NUMERICS).parent.mkdir(parents=True)
        (root / REFERENCE_NUMERICS).write_text(json.dumps({"project": {}, numerics.RECORD_KEY: committed_numerics}))
    git(root, "add", ".")
    git(root, "commit", "-qm", "reference")


def test_inside_outside_and_identical_on_a_tiny_project(tmp_path: Path) -> None:
    here = {"settings": numerics.effective(), **numerics.cpu()}
    write_project(tmp_path, 0.3, here)
    lines = reference_verdict(tmp_path).splitlines()
    assert lines[1].split() == ["GRPO", "30.0", "inside", "[0.0,", "79.7]"]  # the overall row, not the task type's
    assert "SEED" in lines[2] and "inside" in lines[2] and "not in the reference" in lines[3]
    assert lines[-1] == ("seed: bit-identity: reports/table.md is identical to the committed one (same CPU model "
                         f"({here['cpu_model']}) and pinned numerics as the committed run)")
    pd.read_csv(tmp_path / "reports" / "table.csv").assign(success_rate=[0.9, 0.3, 0.6, 0.2]).to_csv(
        tmp_path / "reports" / "table.csv", index=False)
    (tmp_path / "reports" / "table.md").write_text("| Method | Avg |\n| GRPO | 30.0 |\n| SEED | 60.0 |\n")
    lines = reference_verdict(tmp_path).splitlines()
    assert "OUTSIDE" in lines[2] and "seed: 1 of 2 methods outside the reference's range: SEED (+" in lines[4]
    assert lines[-1].startswith("seed: bit-identity: reports/table.md differs from the committed one (`git diff "
                                "reports/table.md`); same CPU model") and "`dvc params diff`" in lines[-1]


@pytest.mark.parametrize("committed, expected", [
    (None, "the committed run records no numerics: it predates their pinning"),
    ({"settings": {"ATEN_CPU_CAPABILITY": "avx512"}, "cpu_model": "Other CPU"},
     "the committed run ran on Other CPU under ATEN_CPU_CAPABILITY=avx512, this machine is "),
])
def test_a_difference_on_other_numerics_points_at_the_statistical_verdict(tmp_path: Path, committed: Any,
                                                                          expected: str) -> None:
    write_project(tmp_path, 0.3, committed)
    (tmp_path / "reports" / "table.md").write_text("another run\n")
    last = reference_verdict(tmp_path).splitlines()[-1]
    assert expected in last and last.endswith("the statistical verdict above is the one to act on"), last


def test_no_reference_says_so(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    assert reference_verdict(tmp_path).splitlines() == [
        f"seed: no committed multi-seed reference {REFERENCE_SWEEP} (a `seed sweep`'s reports/sweep/learning.json, "
        f"copied there and committed) to judge the table by",
        "seed: bit-identity: no committed reference reports/table.md to compare with (commit it with dvc.lock to "
        "make this run the reference)"]


def test_seed_run_ends_with_the_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from seed_app import cli, cli_pipeline, dvc_run, inputs, workspace
    from seed_core.config import project_root

    (tmp_path / "params.yaml").write_text((project_root() / "params.yaml").read_text())
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "table.md").write_text("# the table\n")

    @contextlib.contextmanager
    def hold(*args: object, **kwargs: object) -> Iterator[Path]:
        yield tmp_path

    monkeypatch.setattr(cli_pipeline, "project_root", lambda: tmp_path)
    monkeypatch.setattr(workspace, "check", lambda *a, **k: None)
    monkeypatch.setattr(workspace, "hold", hold)
    monkeypatch.setattr(inputs, "check_run", lambda cfg: None)
    monkeypatch.setattr(dvc_run, "run_in_flow", lambda *a: dvc_run.PipelineRun({}, links={}))
    monkeypatch.setattr(results, "reference_verdict", lambda root: f"VERDICT OF {root}")
    result = CliRunner().invoke(cli.app, ["run", "-S", "rl.opd_coef=0.02"])
    assert result.exit_code == 0, result.output
    assert f"VERDICT OF {tmp_path}" in result.output.splitlines()


def _lock(md5: str) -> str:
    return (f"schema: '2.0'\nstages:\n  prepare_model:\n    cmd: x\n    outs:\n    - path: data/models/base\n"
            f"      hash: md5\n      md5: {md5}.dir\n")


def test_another_base_model_than_the_references_is_said_under_the_verdict(tmp_path: Path) -> None:
    (tmp_path / "dvc.lock").write_text(_lock("992a57d1aaaa"))
    write_project(tmp_path, 0.3, {"settings": numerics.effective(), **numerics.cpu()})
    assert not [ln for ln in reference_verdict(tmp_path).splitlines() if "base model" in ln]  # the committed one
    (tmp_path / "dvc.lock").write_text(_lock("aa9f31aabbbb"))
    lines = reference_verdict(tmp_path).splitlines()
    caveat = [ln for ln in lines if "base model" in ln]
    assert caveat == [lines[-2]] and "md5 aa9f31aa) is not the reference's (992a57d1)" in caveat[0]
    assert "the reference's seeds vary the RL seed on one base model" in caveat[0]
