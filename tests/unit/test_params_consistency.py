"""params.yaml <-> SeedConfig <-> dvc.yaml <-> flows: the pipeline's declarations agree with each other."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from flows.common import StagePaths, eval_methods, rl_algorithms
from seed_core.algorithms import ALGORITHMS, effective_config
from seed_core.config import RLConfig, SeedConfig
from seed_core.loader import load_config

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("dvc_deps", ROOT / "scripts" / "dvc_deps.py")
dvc_deps = importlib.util.module_from_spec(_spec)  # the code-fingerprint scanner (not a package module)
_spec.loader.exec_module(dvc_deps)
DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
PATHS = StagePaths(data=Path(PARAMS["project"]["data_dir"]), reports=Path("reports"))


def _resolve(value: Any) -> Any:
    """``${...}`` filled in from params.yaml and dvc.yaml's ``vars``, as DVC does (its own resolver)."""
    from dvc.parsing.context import Context

    extra = {k: v for entry in DVC.get("vars", []) for k, v in entry.items()}
    return Context({**PARAMS, **extra}).resolve(value)


def _expand(name: str, stage: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """dvc.yaml ``foreach`` stages as ``name@key`` -> stage with ${key}/${item} and the params filled in."""
    if "foreach" not in stage:
        return {name: _resolve(stage)}
    items = _resolve(stage["foreach"])
    pairs = items.items() if isinstance(items, dict) else ((i, i) for i in items)
    out = {}
    for key, item in pairs:
        text = yaml.safe_dump(stage["do"]).replace("${key}", str(key)).replace("${item}", str(item))
        out[f"{name}@{key}"] = _resolve(yaml.safe_load(text))
    return out


STAGES = {k: v for name, stage in DVC["stages"].items() for k, v in _expand(name, stage).items()}


def _names(entries: list[Any]) -> list[str]:
    return [e if isinstance(e, str) else next(iter(e)) for e in entries]


def _lookup(tree: dict[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def test_every_dvc_params_key_exists_in_params_yaml_and_the_schema() -> None:
    schema = SeedConfig().model_dump()
    for stage_name, stage in STAGES.items():
        for key in stage.get("params", []):
            assert isinstance(key, str), f"{stage_name}: params must be dotted keys of params.yaml"
            _lookup(PARAMS, key)  # raises KeyError naming the key
            _lookup(schema, key)


def test_every_params_section_is_read_by_some_stage() -> None:
    """The other direction: changing any value (except bookkeeping) reruns the stages that use it."""
    declared = {key for stage in STAGES.values() for key in stage.get("params", [])}
    sweep = yaml.safe_load((ROOT / "sweep" / "dvc.yaml").read_text())["stages"]  # `seed sweep`'s own pipeline
    declared |= {key for stage in sweep.values() for key in stage.get("do", stage).get("params", [])}
    bookkeeping = {"tracking", "project"}
    for section in set(PARAMS) - bookkeeping:
        assert any(k == section or k.startswith(section + ".") for k in declared), f"no stage declares {section}"
    assert "project.seed" in declared


@pytest.fixture(scope="module")
def dvc_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dvc.yaml in an empty DVC project: DVC itself lists and resolves the stages for a params.yaml."""
    from dvc.repo import Repo

    root = tmp_path_factory.mktemp("dvc_matrix")
    (root / "dvc.yaml").write_text((ROOT / "dvc.yaml").read_text())
    Repo.init(str(root), no_scm=True)
    return root


@pytest.mark.parametrize("algorithm", ALGORITHMS.names())
def test_seed_run_with_any_algorithm_resolves_and_gets_its_stages(dvc_project: Path, algorithm: str) -> None:
    """``seed run -S rl.algorithm=<a>`` = ``dvc exp run -S rl.algorithm=<a>``: the config loads (with the
    algorithm's fixed values), and DVC's stage list holds rl@<a>, evaluate@<a>, evaluate@<a>_star and a report
    that reads them, exactly flows.common.rl_algorithms / eval_methods, each evaluation on its checkpoint."""
    from dvc.repo import Repo

    cfg = effective_config(load_config(ROOT / "params.yaml", {"rl.algorithm": algorithm}))
    assert cfg.rl.algorithm == algorithm
    params = {**PARAMS, "rl": {**PARAMS["rl"], "algorithm": algorithm}}
    (dvc_project / "params.yaml").write_text(yaml.safe_dump(params))
    stages = {s.name: s for s in Repo(str(dvc_project)).index.stages}
    assert [n.split("@")[1] for n in stages if n.startswith("rl@")] == list(rl_algorithms(cfg))
    assert [n.split("@")[1] for n in stages if n.startswith("evaluate@")] == list(eval_methods(cfg))
    assert {"rl@" + algorithm, "evaluate@" + algorithm, f"evaluate@{algorithm}_star"} <= set(stages)
    for method in eval_methods(cfg):
        deps = {d.def_path for d in stages[f"evaluate@{method}"].deps}
        assert PATHS.checkpoint(method).as_posix() in deps and "data/annotate/static_skills" in deps, method
        assert stages[f"evaluate@{method}"].cmd == f"python -m flows.evaluate --method {method}"
    assert stages[f"rl@{algorithm}"].cmd == f"python -m flows.rl --algorithm {algorithm}"
    for name in rl_algorithms(cfg):  # each run starts where the registry says (Algorithm.init)
        deps = {d.def_path for d in stages[f"rl@{name}"].deps}
        start = PATHS.init(name).as_posix() if name != algorithm else "data/sft/checkpoint"  # the chosen: both
        assert start in deps and ({"data/models/base", "data/sft/checkpoint"} - {start}).isdisjoint(deps), (name, deps)
    report = {d.def_path for d in stages["report"].deps}
    assert {f"data/eval/{m}/episodes.parquet" for m in eval_methods(cfg)} <= report
    assert {f"data/rl/{a}/curve.csv" for a in rl_algorithms(cfg)} <= report


def test_the_rl_stage_reads_every_rl_key_but_the_algorithm() -> None:
    """Its algorithm is --algorithm ${item}: another rl.algorithm must not rerun the baselines' RL. Keys that
    change no output (``stage_params.NOT_RESULTS``: how often resume points are written) are not params."""
    from seed_core.lineage.stage_params import NOT_RESULTS

    from seed_core.lineage.stage_params import STAGE_PARAMS

    assert "data/params/rl/grpo.yaml" in STAGES["rl@grpo"]["deps"]  # = dvc_deps.params_path("rl"), resolved
    declared = [k for k in STAGE_PARAMS["rl"] if k.startswith("rl")]
    assert declared == [f"rl.{name}" for name in RLConfig.model_fields
                        if name != "algorithm" and f"rl.{name}" not in NOT_RESULTS]


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_stage_outputs_are_where_the_flow_writes(stage: str) -> None:
    base, _, key = stage.partition("@")
    out_dir = {"prepare_model": PATHS.base_model, "generate_alfworld": Path(PARAMS["env"]["alfworld"]["generated_dir"]),
               "collect": PATHS.collect, "annotate": PATHS.annotate, "code": PATHS.data,
               "sft": PATHS.sft, "rl": PATHS.rl(key), "evaluate": PATHS.eval(key), "report": PATHS.reports}[base]
    spec = STAGES[stage]
    declared = _names(spec.get("outs", [])) + _names(spec.get("metrics", [])) + _names(spec.get("plots", []))
    assert declared, stage
    for path in declared:
        assert Path(path) == out_dir or out_dir in Path(path).parents, f"{stage}: {path} is outside {out_dir}"
    if base == dvc_deps.CODE_STAGE:
        assert spec["cmd"] == "python scripts/dvc_deps.py --fingerprints data"
        assert all(Path(path).parent in (PATHS.data / "code", PATHS.data / "params") for path in declared), declared
        return
    module = spec["cmd"].split()[2]  # python -m flows.<stage>
    assert (ROOT / (module.replace(".", "/") + ".py")).is_file()


def test_code_dependencies_exist_and_include_the_stage_flow_and_task() -> None:
    """Each stage's code is its fingerprint (``data/code/<stage>.sha256``; ``rl@<a>``: ``data/code/rl/<a>.sha256``),
    which covers its flow and task."""
    for stage_name, stage in STAGES.items():
        deps = stage.get("deps", [])
        base, _, key = stage_name.partition("@")
        for dep in deps:
            if not dep.startswith("data/"):
                assert (ROOT / dep).exists(), f"{stage_name}: dependency {dep} does not exist"
        if base == dvc_deps.CODE_STAGE:
            continue
        assert dvc_deps.fingerprint_path(base).replace("${key}", key) in deps, stage_name  # rl: per algorithm
        covered = dvc_deps.reachable(f"flows.{base}")
        assert ROOT / "flows" / f"{base}.py" in covered and ROOT / "tasks" / f"{base}.py" in covered, stage_name


COMMITTED_DATA = ("data/panels",)
"""Data dependencies that are inputs in git, not stage outputs: the evaluation panels (seed_core/data_gen/task_sets.py)."""


def test_each_data_dependency_is_an_output_of_an_earlier_stage() -> None:
    outputs = {p for stage in STAGES.values() for p in _names(stage.get("outs", [])) + _names(stage.get("plots", []))}
    outputs |= {p for p in COMMITTED_DATA if (ROOT / p).is_dir()}
    for stage_name, stage in STAGES.items():
        for dep in stage.get("deps", []):
            if dep.startswith("data/"):  # an output itself or a file inside an output directory
                assert any(dep == out or dep.startswith(out + "/") for out in outputs), \
                    f"{stage_name}: {dep} is produced by no stage"
