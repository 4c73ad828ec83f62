"""README.md and docs/results.md are rendered from measurements, so a changed result cannot leave a stale number.

``scripts/render_docs.py`` writes both pages from ``docs/templates/*.j2`` and the committed results
(``benchmarks/results/*.json``, ``reports/table.*``). These tests fail when a committed page differs from a fresh
render (a result changed and nobody re-rendered, or a page was edited by hand), when a template's own text holds a
number (it must come through the render), when README uses a measurement other than the two commands' times, and
when README stops being a short guide (issue 41: at most 150 lines, CI's test command verbatim, links that resolve).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import jinja2
import jinja2.meta
import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "docs" / "templates"


def _load_render():
    """scripts/render_docs.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("render_docs", ROOT / "scripts" / "render_docs.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


render_docs = _load_render()

ALLOWED_LITERALS = (
    "Table 2", "Stage 1", "Stage 2", "Stage-1", "round-0",      # names of the paper's table and of the stages
    "Seed 0",                                                    # the sweep cell of random seed 0 (a name)
    "# 1.", "# 2.",                                              # the numbered two commands
    "Python 3.11+", "2 CPU cores", "2-core",                     # the supported machine (pyproject, .ci/run)
    "95%",                                                       # the confidence level of every interval
    "--seeds 5", "--seeds 10", "rl.opd_coef=0.02", "opd-0.02",   # example command lines, not results
    "127.0.0.1:8000/v1", "127.0.0.1", "qwen2.5-3b", "Qwen2", "AVX2",   # addresses and names
    "README.md.j2", "results.md.j2", "rehearsals.md.j2",        # the templates' own names
    "SmolLM2",                                                   # the package-shipped model's name
)
"""Digits a template's own text may hold: names, example commands and the machine, never a measured value."""

README_VARIABLES = {"time", "params", "episodes"}
"""What README.md's template may read: the two commands' measured times and the default's settings."""


def _literal_text(name: str) -> str:
    """A template's own text: everything outside Jinja's ``{{ }}``, ``{% %}`` and ``{# #}``."""
    return re.sub(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", " ", (TEMPLATES / name).read_text(), flags=re.S)


@pytest.fixture(scope="module")
def fresh() -> dict[str, str]:
    """Each page as the render writes it now."""
    return render_docs.render()


def test_committed_pages_equal_a_fresh_render(fresh: dict[str, str]) -> None:
    assert set(fresh) == {"README.md", "docs/results.md", "docs/rehearsals.md"}
    for page, text in fresh.items():
        committed = (ROOT / page).read_text()
        assert committed == text, (f"{page} differs from its render (a result changed or the page was edited by "
                                   "hand): run `.venv/bin/python scripts/render_docs.py` and commit the page")


@pytest.mark.parametrize("name", sorted(render_docs.PAGES))
def test_a_template_types_no_number(name: str) -> None:
    text = _literal_text(name)
    for allowed in sorted(ALLOWED_LITERALS, key=len, reverse=True):
        text = text.replace(allowed, " ")
    typed = sorted({m.group(0) for m in re.finditer(r"\S*\d\S*", text)})
    assert not typed, (f"docs/templates/{name} types {typed} by hand: fill it from benchmarks/results/ in "
                       "scripts/render_docs.py (or, for a name or an example command, add it to ALLOWED_LITERALS)")


def test_readme_reads_only_the_two_commands_times_and_the_settings() -> None:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES))
    used = jinja2.meta.find_undeclared_variables(env.parse((TEMPLATES / "README.md.j2").read_text()))
    assert used <= README_VARIABLES, f"README.md shows results beyond the two commands' times: {used - README_VARIABLES}"


def test_readme_is_a_short_guide_with_ci_test_command(fresh: dict[str, str]) -> None:
    readme = fresh["README.md"]
    assert len(readme.splitlines()) <= 150
    assert "bash scripts/setup.sh && .venv/bin/pytest -q\n" in readme, ".ci/run runs README's test command"
    assert "bash scripts/setup.sh && .venv/bin/seed run\n" in readme


@pytest.mark.parametrize("page", ["README.md", "docs/results.md", "docs/rehearsals.md"])
def test_relative_links_resolve(fresh: dict[str, str], page: str) -> None:
    base = (ROOT / page).parent
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", fresh[page])
    assert targets
    missing = [t for t in targets if not (base / t).exists()]
    assert not missing, f"{page} links to files that do not exist: {missing}"


def test_table2_drop_is_row_minus_seed_as_in_the_paper() -> None:
    rows = [{"method": "seed", "label": "SEED", "success_rate": 0.5, "success": "50.0"},
            {"method": "seed_no_sft", "label": "w/o SFT", "success_rate": 0.4, "success": "40.0"},
            {"method": "seed_no_opd", "label": "w/o OPD", "success_rate": 0.55, "success": "55.0"}]
    drops = {r["label"]: r["drop"] for r in render_docs.table2(rows)}
    assert drops == {"SEED": "-", "w/o SFT": "-10.0", "w/o OPD": "+5.0"}


def test_rehearsals_count_only_passes_at_the_campaign_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/rehearsals.md's headline: a pass at another commit, or a failure at the campaign's, is not counted; a
    row's parse rate and coverage span the rows that analyse, its log-prob gap is the largest row mean."""
    analysing = {"analysis/parse_ok_rate": 0.5, "rl/teacher_coverage": 0.25, "rollout/sampling_logp_diff_mean": 2e-5}
    record = {"commit": "c", "outcome": "passed", "seconds": 120.0, "stages": {"sft": {}},
              "rl_rows": {"grpo": {"rollout/sampling_logp_diff_mean": 3e-5}, "seed": analysing,
                          "seed_no_sft": {**analysing, "analysis/parse_ok_rate": 1.0}}}
    data = {"campaign": {"commit": "c"}, "defects": [{"fixed_in": "f"}],
            "presets": {"a": record, "b": {**record, "commit": "old"}, "d": {**record, "outcome": "failed"}}}
    monkeypatch.setattr(render_docs, "_json", lambda name: data)
    got = render_docs.rehearsals()
    assert got["campaign"] == "c" and got["passed"] == 1 and got["defects"] == [{"fixed_in": "f"}]
    row = got["rows"][0]
    assert (row["parse"], row["coverage"], row["logp"], row["minutes"]) == ("0.50-1.00", "0.25", "3.0e-05", "2")


def test_check_names_a_stale_page_and_writes_nothing(monkeypatch: pytest.MonkeyPatch, capsys, fresh) -> None:
    stale = dict(fresh, **{"docs/results.md": fresh["docs/results.md"].replace("|", "I", 1)})
    monkeypatch.setattr(render_docs, "render", lambda: stale)
    before = (ROOT / "docs" / "results.md").read_text()
    assert render_docs.main(["--check"]) == 1
    assert "docs/results.md differs from its render" in capsys.readouterr().err
    assert (ROOT / "docs" / "results.md").read_text() == before


def test_gpu_pages_engine_figures_are_the_measured_ones() -> None:
    """docs/gpu.md is written by hand, but its engine memory and start figures are the committed measurements
    (``benchmarks/engine_memory.py``, ``benchmarks/vllm_cpu_startup.py``) rounded as the page states them: a new
    measurement that moves one fails here until the page follows."""
    import json

    page = (ROOT / "docs" / "gpu.md").read_text()
    results = ROOT / "benchmarks" / "results"
    roles = json.loads((results / "engine_memory_rehearsal.json").read_text())["roles"]
    starts = json.loads((results / "vllm_cpu_startup.json").read_text())["variants"]["seed_cpu_engine_env"]["starts"]
    assert f"so its ~{roles['annotator-stand-in']['uss_gib_max_per_engine']:.1f} GiB" in page
    assert f"(~{roles['seed_core.stages.rl']['pss_gib_max_per_engine']:.1f} GiB for SmolLM2 with 1 GiB of KV" in page
    switch = round(starts["another_directory"]["startup_s"], -1)
    assert f"(~{switch:.0f} s on 2 cores with the compile cache warm" in page
