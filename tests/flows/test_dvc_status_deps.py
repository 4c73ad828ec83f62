"""In a tiny DVC copy: editing a file in each seed_core subpackage marks changed the ``code`` stage and, once
it has rewritten the fingerprints (``scripts/dvc_deps.py``), exactly the stages whose import graph reaches the
file (issue 14), through the name-table entries their config selects (issue 28: an edit of a distillation loss
marks only the rl stages of the algorithms that distill; of the WebShop environment, nothing in an ezpoints or
sokoban pipeline). Outputs are placeholders recorded with ``dvc commit``; no stage flow runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dvc.repo import Repo

from tests.unit.test_dvc_deps import ROOT, dvc_deps

EDITED = ["seed_core/webshop/reward.py", "seed_core/retrieval/bm25.py", "seed_core/alfworld/generator.py",
          "seed_core/trainer/sft.py", "seed_core/trainer/rl_step.py", "seed_core/analyzer/cache.py",
          "seed_core/rollout/expert.py", "seed_core/rollout/vllm_worker.py", "seed_core/stages/report.py",
          "seed_core/losses/policy.py", "seed_core/data_gen/names.py", "seed_core/envs/sokoban.py",
          "seed_core/envs/ezpoints.py", "seed_core/trainer/shapings.py"]


def _dvc(cwd: Path, *args: str) -> str:
    dvc = [sys.executable, "-m", "dvc"]
    result = subprocess.run([*dvc, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                            env={"DVC_NO_ANALYTICS": "1", "PATH": "/usr/bin:/bin", "HOME": str(cwd)})
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def fingerprints(root: Path) -> None:
    """The ``code`` stage's command, run in the copy."""
    subprocess.run([sys.executable, "scripts/dvc_deps.py", "--fingerprints", "data"], cwd=root, check=True)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dvcdeps")
    for name in (*dvc_deps.PACKAGES, "scripts", "data/panels"):  # data/panels: a committed input of evaluate
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, root / name)
    _dvc(root, "init", "--no-scm", "-q")
    _dvc(root, "config", "core.analytics", "false")
    fingerprints(root)
    for stage in Repo(str(root)).index.stages:  # placeholder outputs (foreach and ${...} resolved by DVC)
        for out in stage.outs if stage.name != dvc_deps.CODE_STAGE else []:
            path = root / out.def_path
            if path.suffix:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("step,loss,round,rollout/success_rate\n" if path.suffix == ".csv" else "{}")
            else:
                path.mkdir(parents=True, exist_ok=True)
                (path / "placeholder").write_text("x")
    _dvc(root, "commit", "-f", "-q")
    assert json.loads(_dvc(root, "status", "--json")) == {}
    return root


def stage_names(root: Path) -> list[str]:
    """Every DVC stage of the copy, foreach items resolved (``rl@grpo``, ``evaluate@seed_star``)."""
    return [stage.name for stage in Repo(str(root)).index.stages]


def reaching(root: Path, edited: str) -> set[str]:
    """The stages of the copy whose fingerprint, under the copy's params.yaml, lists ``edited`` (``rl@<a>``: its
    algorithm's own)."""
    cfg = dvc_deps.load_params(root / "params.yaml")
    out = set()
    for name in stage_names(root):
        base, _, key = name.partition("@")
        if base != dvc_deps.CODE_STAGE:
            entry = dvc_deps.stages()[base][0]
            select = dvc_deps.stage_select(base, cfg, key if base == dvc_deps.PER_ALGORITHM else None)
            out |= {name} if ROOT / edited in dvc_deps.reachable(entry, select) else set()
    return out


def edit_marks(root: Path, edited: str) -> set[str]:
    """The stages ``dvc status`` marks after ``edited`` is changed and the code stage has run."""
    path = root / edited
    original = path.read_text()
    path.write_text(original + "\n# edited\n")
    try:
        assert set(json.loads(_dvc(root, "status", "--json"))) == {dvc_deps.CODE_STAGE}
        fingerprints(root)  # what `dvc repro` runs first: the code stage
        return set(json.loads(_dvc(root, "status", "--json"))) - {dvc_deps.CODE_STAGE}
    finally:
        path.write_text(original)
        fingerprints(root)


@pytest.mark.parametrize("edited", EDITED)
def test_an_edit_marks_exactly_the_stages_that_import_the_file(project: Path, edited: str) -> None:
    assert edit_marks(project, edited) == reaching(project, edited)


def test_an_edited_distillation_loss_marks_only_the_rl_stages_of_algorithms_that_distill(project: Path) -> None:
    """Their evaluations and the report follow through their data deps when ``dvc repro`` reruns them."""
    from seed_core.algorithms import ALGORITHMS

    changed = edit_marks(project, "seed_core/losses/distill.py")
    rl = {name for name in stage_names(project) if name.startswith("rl@")}
    assert changed == {name for name in rl if ALGORITHMS.get(name.partition("@")[2]).distill}
    assert {"rl@seed", "rl@seed_static"} <= changed and not {"rl@grpo", "rl@seed_no_opd"} & changed


@pytest.mark.parametrize("env", ["ezpoints", "sokoban"])
def test_an_edited_webshop_environment_marks_no_stage_of_another_environment(project: Path, env: str) -> None:
    params = project / "params.yaml"
    original = params.read_text()
    if yaml.safe_load(original)["env"]["name"] != env:
        values = yaml.safe_load(original)
        values["env"]["name"] = env
        params.write_text(yaml.safe_dump(values, sort_keys=False))
        fingerprints(project)
        _dvc(project, "commit", "-f", "-q")  # this pipeline's outputs, up to date
    try:
        assert edit_marks(project, "seed_core/envs/webshop.py") == set()
        assert edit_marks(project, f"seed_core/envs/{env}.py") >= {"prepare_model", "collect", "rl@grpo"}
    finally:
        if params.read_text() != original:
            params.write_text(original)
            fingerprints(project)
            _dvc(project, "commit", "-f", "-q")


@pytest.mark.parametrize(("key", "value"), [("rl.lr", 2e-6), ("generation.eval_temperature", 0.5), ("sft.lr", 3e-5),
                                            ("annotate.concurrency", 3), ("model.path", "other-model")])
def test_a_params_change_marks_exactly_the_stages_that_read_the_key(project: Path, key: str, value: object) -> None:
    """Params are listed key by key (seed_core.lineage.stage_params): a changed key marks the code stage, and once it has
    rewritten the params files, exactly the stages that read the key; an unrelated key leaves a stage up to date,
    and a key no stage's results depend on (annotate.concurrency) marks nothing, not even the code stage."""
    from seed_core.lineage.stage_params import STAGE_PARAMS, covers

    expected = {name for name, keys in STAGE_PARAMS.items() if covers(keys, key)}
    path = project / "params.yaml"
    original = path.read_text()
    params = yaml.safe_load(original)
    section, _, leaf = key.partition(".")
    params[section][leaf] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    try:
        first = set(json.loads(_dvc(project, "status", "--json")))
        fingerprints(project)  # what `dvc repro` runs first: the code stage
        changed = {name.split("@")[0] for name in json.loads(_dvc(project, "status", "--json"))}
    finally:
        path.write_text(original)
        fingerprints(project)
    if key == "annotate.concurrency":
        assert first == changed == set()
    else:
        assert first == {dvc_deps.CODE_STAGE}
        assert changed == expected | {dvc_deps.CODE_STAGE}


@pytest.mark.parametrize(("key", "value"), [("rl.opd_coef", 0.02), ("rl.gate_beta", 1.0)])
def test_an_ablation_key_reruns_exactly_the_rl_stages_whose_algorithm_reads_it(project: Path, key: str,
                                                                              value: object) -> None:
    """Each rl@<algorithm> depends on data/params/rl/<algorithm>.yaml (``algorithm_keys``): an OPD coefficient
    marks SEED and its distilling variants, never GRPO or SEED w/o OPD (whose loss has no OPD term)."""
    from flows.common import rl_algorithms
    from seed_core.lineage.stage_params import algorithm_keys
    from seed_core.loader import load_config

    algorithms = rl_algorithms(load_config(project / "params.yaml"))
    expected = {f"rl@{a}" for a in algorithms if key in algorithm_keys(a)}
    assert {"rl@seed", "rl@seed_static"} <= expected and not {"rl@grpo", "rl@seed_no_opd"} & expected
    path = project / "params.yaml"
    original = path.read_text()
    params = yaml.safe_load(original)
    params["rl"][key.split(".")[1]] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    try:
        fingerprints(project)  # what `dvc repro` runs first: the code stage
        changed = set(json.loads(_dvc(project, "status", "--json"))) - {dvc_deps.CODE_STAGE}
    finally:
        path.write_text(original)
        fingerprints(project)
    assert changed == expected
