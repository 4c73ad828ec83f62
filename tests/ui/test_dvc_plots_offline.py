"""``dvc plots show`` renders offline (issue 16): the project's ``.dvc/config`` points ``plots.html_template`` at
``configs/dvc/plots_offline.html`` (Vega, Vega-Lite and vega-embed inline, scripts/vendor_vega.py), so the page
DVC writes draws its charts in Debian's ``chromium`` with every network request refused.

Skipped, with that reason, only without a ``chromium`` binary (``scripts/setup.sh`` installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "ui"
CHROMIUM = os.environ.get("SEED_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
DVC = str(Path(sys.executable).with_name("dvc"))
DVC_YAML = """\
plots:
  - rl_success:
      title: Training success rate per RL round
      x: round
      y:
        grpo/curve.csv: rollout/success_rate
        seed/curve.csv: rollout/success_rate
"""


def dvc_project(tmp_path: Path) -> Path:
    """A DVC project with this repository's ``.dvc/config`` and template (same relative layout) and two curves."""
    project = tmp_path / "project"
    (project / ".dvc").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    shutil.copy(ROOT / ".dvc" / "config", project / ".dvc" / "config")
    (project / "configs" / "dvc").mkdir(parents=True)
    shutil.copy(ROOT / "configs" / "dvc" / "plots_offline.html", project / "configs" / "dvc")
    (project / "dvc.yaml").write_text(DVC_YAML)
    for method, rates in {"grpo": (0.1, 0.3, 0.4), "seed": (0.1, 0.35, 0.5)}.items():
        (project / method).mkdir()
        rows = "".join(f"{i},{r}\n" for i, r in enumerate(rates))
        (project / method / "curve.csv").write_text("round,rollout/success_rate\n" + rows)
    return project


def test_template_is_configured_and_replaces_the_cdn(tmp_path: Path) -> None:
    project = dvc_project(tmp_path)
    out = subprocess.run([DVC, "config", "plots.html_template"], cwd=project, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert (project / ".dvc" / out).resolve() == (project / "configs/dvc/plots_offline.html").resolve()
    subprocess.run([DVC, "plots", "show", "-o", "plots"], cwd=project, check=True, capture_output=True,
                   env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    page = (project / "plots" / "index.html").read_text()
    assert "cdn.jsdelivr" not in page and "<script src=" not in page
    assert "vegaEmbed" in page and "Training success rate per RL round" in page


@pytest.mark.ui
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary: apt-get install chromium (scripts/setup.sh) "
                                               "or set SEED_CHROMIUM")
def test_dvc_plots_show_draws_the_chart_with_the_network_refused(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    project = dvc_project(tmp_path)
    subprocess.run([DVC, "plots", "show", "-o", "plots"], cwd=project, check=True, capture_output=True,
                   env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    refused: list[str] = []
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page()
            page.route("http*://**", lambda route: (refused.append(route.request.url), route.abort()))
            errors: list[str] = []
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.goto((project / "plots" / "index.html").as_uri())
            chart = page.locator(".vega-embed canvas, .vega-embed svg").first
            chart.wait_for(state="visible", timeout=30_000)
            box = chart.bounding_box()
            page.screenshot(path=str(SHOTS / "dvc_plots_offline.png"), full_page=True)
        finally:
            browser.close()
    assert not errors, errors
    assert refused == [], f"the page asked the network for {refused}"
    assert box is not None and box["width"] > 100 and box["height"] > 100, box
