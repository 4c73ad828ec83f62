"""`seed run` says whether the user's results table matches the committed reference (reports/table.md in git)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from flows.results import reference_verdict

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
       "PATH": "/usr/bin:/bin"}


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, env=ENV, check=True, capture_output=True)


def test_match_difference_and_no_reference(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    table = tmp_path / "reports" / "table.md"
    table.parent.mkdir()
    table.write_text("| Method | Avg |\n|---|---|\n| seed | 50.0 |\n")
    (tmp_path / "README").write_text("x")
    git(tmp_path, "add", "README")
    git(tmp_path, "commit", "-qm", "no reference yet")
    assert "no committed reference reports/table.md" in reference_verdict(tmp_path)
    git(tmp_path, "add", "reports/table.md")
    git(tmp_path, "commit", "-qm", "reference")
    assert reference_verdict(tmp_path) == "seed: reports/table.md matches the committed reference"
    table.write_text("| Method | Avg |\n|---|---|\n| seed | 62.5 |\n")  # a rerun with another result
    assert "differs from the committed reference" in reference_verdict(tmp_path)
    assert "dvc metrics diff" in reference_verdict(tmp_path)
