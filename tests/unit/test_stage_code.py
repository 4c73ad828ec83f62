"""Issue 28: the name tables (``seed_core.registries``) and what each stage's fingerprint reaches through them
(``seed_core.lineage.stage_code``): the configured environment only, an rl stage its own algorithm's losses, shaping and
analyzer only, and every implementation the stage's config can select (too few files would be worse than too
many). The dynamic half, every entry a tiny run of each stage looks up is in its fingerprint, is
``tests/unit/test_stage_params.py::test_every_implementation_a_stage_loads_is_in_its_fingerprint``."""

from __future__ import annotations

import pytest

from seed_core import registries
from seed_core.lineage import code_closure
from seed_core.algorithms import ALGORITHMS
from seed_core.loader import with_overrides
from seed_core.registry import Registry, load_ref
from tests.unit.config_recorder import recording
from tests.unit.test_dvc_deps import PARAMS_CFG, ROOT, SPEC, STAGES, dvc_deps

TABLES = {name: reg for name, reg in vars(registries).items() if isinstance(reg, Registry)}
PLAYING = ("prepare_model", "collect", "annotate", "sft", "rl", "evaluate")
"""The stages that build the configured environment."""


def test_the_static_scan_reads_the_tables_as_they_are_at_run_time() -> None:
    scanned = code_closure.tables()
    assert set(scanned) == set(TABLES)
    for name, reg in TABLES.items():
        assert scanned[name] == {n: reg.ref(n).partition(":")[0] for n in reg.names()}, name


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_table_entry_imports_and_is_what_its_name_says(table: str) -> None:
    reg = TABLES[table]
    for name in reg.names():
        obj = load_ref(reg.ref(name))
        assert callable(obj) or table == "GOVERNANCE", (table, name)  # a governance mode is a record
        if table in ("ENVS", "GOVERNANCE"):
            assert obj.name == name  # type: ignore[attr-defined]


def test_every_table_is_selected_by_every_stage_and_only_code_stage_params_are_read() -> None:
    """A table a stage's selection leaves out would reach all its entries; each key the selection reads is a
    param of the code stage, so changing it rewrites the fingerprints."""
    from seed_core.lineage.stage_params import FOREACH_KEYS

    for stage in STAGES:
        params = [*SPEC[dvc_deps.CODE_STAGE]["params"], *FOREACH_KEYS.get(stage, ())]  # rl.algorithm: the item
        for algorithm in ALGORITHMS.names() if stage == dvc_deps.PER_ALGORITHM else [None]:
            with recording() as reads:
                select = dvc_deps.stage_select(stage, PARAMS_CFG, algorithm)
            assert set(select) == set(TABLES), stage
            assert all(any(k == p or k.startswith(p + ".") for p in params) for k in reads), (stage, reads)


def _files(stage: str, cfg, algorithm: str | None = None) -> set[str]:
    select = dvc_deps.stage_select(stage, cfg, algorithm)
    return {p.relative_to(ROOT).as_posix() for p in dvc_deps.reachable(STAGES[stage][0], select)}


@pytest.mark.parametrize("env", registries.ENVS.names())
def test_a_stage_reaches_the_configured_environment_and_no_other(env: str) -> None:
    cfg = with_overrides(PARAMS_CFG, {"env.name": env})
    others = {f"seed_core/envs/{e}.py" for e in registries.ENVS.names() if e != env}
    for stage in STAGES:
        files = _files(stage, cfg, cfg.rl.algorithm if stage == "rl" else None)
        assert (f"seed_core/envs/{env}.py" in files) == (stage in PLAYING), stage
        assert not files & others, (stage, sorted(files & others))
    if env != "webshop":  # the WebShop simulator and its data model belong to the webshop environment only
        assert not {f for f in _files("rl", cfg, "seed") if f.startswith("seed_core/webshop/")}


@pytest.mark.parametrize("algorithm", ALGORITHMS.names())
def test_an_rl_stage_reaches_its_own_losses_shaping_and_analyzer(algorithm: str) -> None:
    record = ALGORITHMS.get(algorithm)
    files = _files("rl", PARAMS_CFG, algorithm)
    assert ("seed_core/losses/distill.py" in files) == record.distill
    assert ("seed_core/trainer/shapings.py" in files) == (record.shaping is not None)
    assert {"seed_core/losses/policy.py", "seed_core/losses/advantages.py"} <= files
    analyzer = PARAMS_CFG.annotate.client if record.analyzer == "annotate" else record.analyzer
    assert ("seed_core/analyzer/openai_client.py" in files) == (analyzer == "openai")
    with_openai = with_overrides(PARAMS_CFG, {"annotate.client": "openai"})
    assert ("seed_core/analyzer/openai_client.py" in _files("rl", with_openai, algorithm)) == \
        (record.analyzer == "annotate")


@pytest.mark.parametrize("stage", sorted(STAGES))
@pytest.mark.parametrize("overrides", [{}, {"generation.backend": "vllm"}, {"annotate.client": "openai"},
                                       {"env.name": "search_qa", "env.search_qa.retrieval_method": "hybrid"},
                                       {"rl.distill_loss": "opd", "rl.policy_loss": "reinforce"}])
def test_every_entry_a_stage_can_select_is_in_its_fingerprint(stage: str, overrides: dict) -> None:
    """Where a stage's code looks a table up by a configured name (``ENVS.get(cfg.name)``), the entry its config
    selects is in its fingerprint; a table it never looks up (report: no environment) adds nothing."""
    cfg = with_overrides(PARAMS_CFG, overrides)
    known = code_closure.tables()
    for algorithm in ALGORITHMS.names() if stage == "rl" else [None]:
        select = dvc_deps.stage_select(stage, cfg, algorithm)
        files = dvc_deps.reachable(STAGES[stage][0], select)
        looked_up = {table for f in files for table, name in code_closure.scan(f).lookups if name is None}
        for table in looked_up & set(known):
            for name in select[table]:
                assert code_closure.module_file(known[table][name]) in files, (stage, algorithm, table, name)
