"""Every registered environment has its side entries (seed_core/lineage/side_tables.py; CONTRIBUTING.md): a new one
registered without them fails here, with one line per table naming the file to edit."""

from __future__ import annotations

import pytest

from seed_core.envs import ENVS
from seed_core.lineage.side_tables import missing_env_entries


@pytest.mark.parametrize("name", ENVS.names())
def test_every_registered_environment_has_its_side_entries(name: str) -> None:
    missing = missing_env_entries(name)
    assert not missing, "\n".join(missing)


def test_an_environment_registered_alone_is_told_each_table_to_edit() -> None:
    missing = missing_env_entries("mygrid")
    # the stages' params are no side table: they follow the registry (seed_core/lineage/stage_params.py)
    assert [line.split(":")[0] for line in missing] == ["seed_core/config_envs.py", "params.yaml", "data/panels/"]
    assert all("mygrid" in line for line in missing)
