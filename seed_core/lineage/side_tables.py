"""The side tables an environment needs besides its registry entry, checked in one place.

``seed_core.envs.ENVS`` is the registry; registering a class there is not enough for the pipeline to run it. Each
environment ``<name>`` also needs, and ``missing_env_entries`` names what is missing (``tests/unit/
test_side_tables.py`` fails with these lines, so an addition cannot forget one; CONTRIBUTING.md lists them):

| table | where | why |
|---|---|---|
| its settings section | ``EnvConfig.<name>`` in ``seed_core/config_envs.py`` | ``env.<name>`` in params.yaml is validated there |
| its params.yaml section | ``env: <name>:`` in ``params.yaml`` (then ``python scripts/make_presets.py``) | params.yaml is complete |
| its evaluation panel | ``data/panels/<name>-<split>.json`` (``python -m seed_core.data_gen.generate panels``) | held-out instances are fixed |
"""

from __future__ import annotations

from pathlib import Path

import yaml

from seed_core.config import EnvConfig, project_root


def missing_env_entries(name: str, root: Path | None = None) -> list[str]:
    """One line per side table that lacks environment ``name``, naming the file to edit and the fix."""
    root = root or project_root()
    missing = []
    if name not in EnvConfig.model_fields:
        missing.append(f"seed_core/config_envs.py: EnvConfig has no section {name!r}; add `{name}: <Name>Config = "
                       f"<Name>Config()` with the environment's settings")
    params = yaml.safe_load((root / "params.yaml").read_text()) or {}
    if name not in (params.get("env") or {}):
        missing.append(f"params.yaml: env has no {name!r} section; add its defaults, then run "
                       "`python scripts/make_presets.py`")
    if not sorted((root / "data" / "panels").glob(f"{name}-*.json")):
        missing.append(f"data/panels/: no {name}-<split>.json; write it with `python -m seed_core.data_gen.generate "
                       f"panels --config params.yaml --set env.name={name}` and commit it")
    return missing
