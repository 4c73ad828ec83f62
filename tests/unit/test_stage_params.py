"""DVC params key by key (issue 14): each stage lists the params.yaml keys it reads (seed_core.lineage.stage_params),
its params dependency data/params/<stage>.yaml holds exactly those keys with params.yaml's values (the code
stage, whose params are every such key, writes it), and running each stage's engine on a tiny config under a
recording config reads no key outside its list (so a key a stage does not list cannot change its outputs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from seed_core.config import SeedConfig
from seed_core.lineage.stage_params import FOREACH_KEYS, NOT_RESULTS, STAGE_PARAMS, covers
from seed_core.lineage.resume import resume_keys, rl_fingerprint
from seed_core.loader import with_overrides
from seed_core.registry import Entry
from seed_core.algorithms import ALGORITHMS
from seed_core.lineage.stage_params import algorithm_keys
from tests.unit.config_recorder import PATHS, loading, recording
from tests.unit.test_dvc_deps import ROOT, STAGES


def _is_key(key: str) -> bool:
    """A leaf or a section of SeedConfig."""
    sections = {path.rstrip(".") for path in PATHS.values()}
    leaves = {path + name for cls, path in PATHS.items() for name in cls.model_fields}
    return key in sections or key in leaves


def test_each_stage_depends_on_a_params_file_of_exactly_its_declared_keys_with_their_values() -> None:
    import yaml

    from tests.unit.test_dvc_deps import SPEC, dvc_deps

    assert set(STAGES) == set(STAGE_PARAMS)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for stage, (_, deps, listed) in STAGES.items():
        assert not listed, f"{stage}: its params are data/params/{stage}.yaml, a dep, not a params: list"
        assert dvc_deps.params_path(stage) in deps, stage
        written = yaml.safe_load(dvc_deps.params_text(stage, params))
        assert list(written) == list(STAGE_PARAMS[stage]), stage
        for key, value in written.items():
            node = params
            for part in key.split("."):
                node = node[part]
            assert value == node, (stage, key)
    for algorithm in ALGORITHMS.names():  # rl@<algorithm> depends on data/params/rl/<algorithm>.yaml
        assert list(yaml.safe_load(dvc_deps.algorithm_params_text(algorithm, params))) == \
            list(algorithm_keys(algorithm)), algorithm
    assert "rl.opd_coef" not in algorithm_keys("grpo") and "rl.opd_coef" in algorithm_keys("seed")
    assert "rl.gate_beta" not in algorithm_keys("grpo_opsd")  # fixed by the algorithm (beta = 0), not read
    code_params = SPEC[dvc_deps.CODE_STAGE]["params"]  # `dvc params diff` / `dvc exp show` read these
    assert code_params == list(dict.fromkeys(k for keys in STAGE_PARAMS.values() for k in keys)), \
        "run `python scripts/dvc_deps.py --write`"


def test_every_declared_key_is_a_config_key_and_listed_once() -> None:
    for stage, keys in STAGE_PARAMS.items():
        assert len(set(keys)) == len(keys), stage
        assert all(_is_key(k) for k in keys), [k for k in keys if not _is_key(k)]
    assert all(_is_key(k) for k in NOT_RESULTS)


def test_the_recorder_sees_reads_on_copies_and_whole_section_dumps() -> None:
    cfg = with_overrides(SeedConfig(), {"rl.lr": 0.1})
    with recording() as reads:
        _ = cfg.model_copy().rl.lr, cfg.generation.vllm.model_dump_json(), cfg.model_dump()
        with_overrides(SeedConfig(), {"rl.kl_coef": 0.0})  # validation reads every key: not a read
    assert "rl.lr" in reads and "generation.vllm.host" in reads and "rl.kl_coef" not in reads
    assert not any(k.startswith("sft.") for k in reads)  # the whole-config dump is a record, not a read


def _flow_reads(stage: str) -> set[str]:
    """``cfg.<key>`` in the stage's own flow and task modules (flows/common.py's helpers read MLflow tags and
    paths only: model_tags, model_name, stage_paths)."""
    found: set[str] = set()
    for path in [ROOT / "flows" / f"{stage}.py", ROOT / "tasks" / f"{stage}.py", ROOT / "seed_core" / "stages" / "launch.py"]:
        if stage in ("sft", "rl") or path.name != "launch.py":
            for chain in re.findall(r"\bcfg\.([a-z_]+(?:\.[a-z_]+)*)", path.read_text()):
                parts = chain.split(".")
                keys = [".".join(parts[:i]) for i in range(len(parts), 0, -1) if _is_key(".".join(parts[:i]))]
                found |= set(keys[:1])
    return found


@pytest.mark.parametrize("stage", sorted(STAGE_PARAMS))
def test_flows_and_tasks_read_only_declared_keys(stage: str) -> None:
    allowed = (*STAGE_PARAMS[stage], *NOT_RESULTS, *FOREACH_KEYS.get(stage, ()))
    extra = {k for k in _flow_reads(stage) if not covers(allowed, k)}
    assert not extra, f"flows/tasks of {stage!r} read {sorted(extra)}: add them to seed_core.lineage.stage_params"


@pytest.fixture(scope="module")
def stage_runs(tiny_model_dir: Path,
               tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[SeedConfig, set[str], set[str]]]:
    """Every engine stage run once on a tiny config (each RL algorithm of dvc.yaml, evaluate with and without
    its skill rows): (its config, the keys it read, the name-table entries it looked up)."""
    from seed_core.stages.annotate import run_annotate
    from seed_core.stages.collect import run_collect
    from seed_core.stages.evaluate import run_evaluate
    from seed_core.stages.generate_alfworld import run_generate_alfworld
    from seed_core.stages.prepare_model import run_prepare_model
    from seed_core.stages.rl import run_rl
    from seed_core.stages.sft import run_sft

    tmp = tmp_path_factory.mktemp("reads")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = with_overrides(SeedConfig(), {
        "model.path": str(tiny_model_dir), "model.device": "cpu", "env.max_steps": 1, "collect.num_tasks": 2,
        "rl.rounds": 1, "rl.tasks_per_round": 1, "rl.group_size": 2, "rl.micro_batch_size": 4,
        "rl.mini_batch_size": 1, "generation.max_new_tokens": 4, "generation.max_prompt_tokens": 256,
        "sft.epochs": 1, "eval.num_tasks": 1, "annotate.min_ok_fraction": 0.0,
        "rl.static_skills_dir": str(tmp / "annotate" / "static_skills")})
    runs_of: dict[str, tuple[SeedConfig, set[str], set[str]]] = {}
    configs = {f"rl@{a}": with_overrides(cfg, {"rl.algorithm": a}) for a in ALGORITHMS.names()}
    runs = {
        "prepare_model": lambda: run_prepare_model(cfg, tmp / "base"),
        "generate_alfworld": lambda: run_generate_alfworld(cfg, tmp / "games"),
        "collect": lambda: run_collect(cfg, tiny_model_dir, tmp / "collect"),
        "annotate": lambda: run_annotate(cfg, tmp / "collect", tmp / "annotate"),
        "sft": lambda: run_sft(cfg, tiny_model_dir, tmp / "annotate", tmp / "sft"),
        **{f"rl@{a}": (lambda a=a: run_rl(configs[f"rl@{a}"], tmp / "sft" / "checkpoint", tmp / f"rl-{a}"))
           for a in ALGORITHMS.names()},
        "evaluate": lambda: [run_evaluate(with_overrides(cfg, extra), tmp / "sft" / "checkpoint", tmp / f"eval{i}",
                                          "sft")
                             for i, extra in enumerate([{"eval.skill_prompt": True}, {"eval.with_skills": True}])],
    }
    try:
        for stage, run in runs.items():
            with recording() as got, loading() as loads:
                run()
            runs_of[stage] = (configs.get(stage, cfg), got, loads)
    finally:
        torch.set_num_threads(threads)
    return runs_of


@pytest.fixture(scope="module")
def stage_reads(stage_runs: dict[str, tuple[SeedConfig, set[str], set[str]]]) -> dict[str, set[str]]:
    return {stage: reads for stage, (_, reads, _) in stage_runs.items()}


@pytest.mark.parametrize("stage", ["prepare_model", "generate_alfworld", "collect", "annotate", "sft", "evaluate",
                                   *(f"rl@{a}" for a in ALGORITHMS.names())])
def test_each_stage_reads_no_key_outside_its_list(stage: str, stage_reads: dict[str, set[str]]) -> None:
    """An rl@<algorithm> stage: no key outside its algorithm's own (``algorithm_keys``, its params file)."""
    read = stage_reads[stage]
    assert read, f"nothing recorded for {stage}"
    name, _, algorithm = stage.partition("@")
    keys = algorithm_keys(algorithm) if algorithm else STAGE_PARAMS[stage]
    fixed = tuple(f"rl.{field}" for field, _ in ALGORITHMS.get(algorithm).fixed) if algorithm else ()
    allowed = (*keys, *fixed, *NOT_RESULTS, *FOREACH_KEYS.get(name, ()))  # a fixed key's value is the algorithm's
    extra = sorted(k for k in read if not covers(allowed, k))
    assert not extra, f"stage {stage!r} reads {extra}, which its dvc.yaml params do not list (seed_core.lineage.stage_params)"


def test_the_rl_fingerprint_ignores_keys_the_rl_stage_does_not_read(tiny_model_dir: Path) -> None:
    cfg = SeedConfig()
    base = rl_fingerprint(cfg, tiny_model_dir)
    assert rl_fingerprint(with_overrides(cfg, {"sft.lr": 0.5, "annotate.concurrency": 2, "eval.num_tasks": 3,
                                              "rl.rounds": 9, "rl.save_every": 2}), tiny_model_dir) == base
    assert rl_fingerprint(with_overrides(cfg, {"rl.lr": 0.5}), tiny_model_dir) != base
    assert rl_fingerprint(with_overrides(cfg, {"rl.algorithm": "grpo"}), tiny_model_dir) != base
    assert "rl.rounds" not in resume_keys("seed")
    grpo = with_overrides(cfg, {"rl.algorithm": "grpo"})  # GRPO reads no distillation key: its rounds stay valid
    assert rl_fingerprint(with_overrides(grpo, {"rl.opd_coef": 0.5, "rl.gate_beta": 1.0}), tiny_model_dir) == \
        rl_fingerprint(grpo, tiny_model_dir)
    assert rl_fingerprint(with_overrides(cfg, {"rl.opd_coef": 0.5}), tiny_model_dir) != base


@pytest.mark.parametrize("stage", ["prepare_model", "generate_alfworld", "collect", "annotate", "sft", "evaluate",
                                   *(f"rl@{a}" for a in ALGORITHMS.names())])
def test_every_implementation_a_stage_loads_is_in_its_fingerprint(
        stage: str, stage_runs: dict[str, tuple[SeedConfig, set[str], set[str]]]) -> None:
    """Issue 28: a stage's fingerprint reaches only the name-table entries its config selects
    (``seed_core.lineage.stage_code``); each entry the tiny run looked up (environment, backend, losses, analyzer) must be
    among them (too few files would let an edit go unnoticed)."""
    from seed_core.lineage import code_closure
    from tests.unit.test_dvc_deps import dvc_deps

    cfg, _, loads = stage_runs[stage]
    name, _, algorithm = stage.partition("@")
    files = dvc_deps.reachable(STAGES[name][0], dvc_deps.stage_select(name, cfg, algorithm or None))
    missing = sorted(ref for ref in loads if code_closure.module_file(ref.partition(":")[0]) not in files)
    assert not missing, f"{stage} loaded {missing}, outside its fingerprint: seed_core/lineage/stage_code.py selects too little"
    if name in ("collect", "evaluate", "rl"):
        assert any(ref.startswith("seed_core.envs.") for ref in loads), f"{stage}: no environment looked up"



def test_a_new_environment_s_settings_are_an_input_of_every_stage_that_plays_or_describes_it(monkeypatch) -> None:
    """The annotate gap of issue 40: annotate's environment sections were a hand list that nothing checked, so a
    new environment's settings were no input of annotate (stale annotations, no error). Registering one now makes
    its section an input of collect, annotate, rl and evaluate, with no other edit."""
    import importlib

    from seed_core.lineage import stage_params
    from seed_core.registries import ENVS

    monkeypatch.setitem(ENVS._entries, "maze", Entry("seed_core.envs.maze:MazeEnv"))
    try:
        planted = importlib.reload(stage_params).STAGE_PARAMS
        for stage in ("collect", "annotate", "rl", "evaluate", "prepare_model"):
            assert "env.maze" in planted[stage], stage
    finally:
        monkeypatch.undo()
        importlib.reload(stage_params)
    assert "env.maze" not in stage_params.STAGE_PARAMS["annotate"]
