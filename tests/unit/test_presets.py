"""Every paper preset is a complete, valid params file, up to date with scripts/make_presets.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from seed_core.loader import load_config

ROOT = Path(__file__).resolve().parents[2]
PRESETS = sorted((ROOT / "presets").glob("*.yaml"))


def _generator():
    spec = importlib.util.spec_from_file_location("make_presets", ROOT / "scripts" / "make_presets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _keys(tree: dict, prefix: str = "") -> set[str]:
    out = set()
    for key, value in tree.items():
        out.add(prefix + key)
        if isinstance(value, dict) and value and key != "chat_template_kwargs":
            out |= _keys(value, prefix + key + ".")
    return out


def test_the_checked_in_presets_are_the_generated_ones() -> None:
    generated = _generator().all_presets()
    assert sorted(p.stem for p in PRESETS) == sorted(generated)
    for stem, text in generated.items():
        path = ROOT / "presets" / f"{stem}.yaml"
        assert path.read_text() == text, f"{path.name} is stale: run scripts/make_presets.py"


@pytest.mark.parametrize("path", PRESETS, ids=[p.stem for p in PRESETS])
def test_preset_is_complete_and_valid(path: Path) -> None:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    preset = yaml.safe_load(path.read_text())
    assert _keys(preset) == _keys(params), "a preset is a full params file (same keys as params.yaml)"
    cfg = load_config(path)  # registry names, types and ranges checked here
    assert cfg.project.preset == path.stem
    if path.stem in _generator().CPU_PRESETS:
        assert cfg.model.device == "auto" and cfg.generation.backend == "hf"  # runs on a laptop CPU
    else:
        assert cfg.generation.max_new_tokens == 512 and cfg.rl.group_size == 8  # the paper's budget / group


def test_a_malformed_preset_names_the_bad_key(tmp_path: Path) -> None:
    from seed_core.config import ConfigError

    bad = yaml.safe_load(PRESETS[0].read_text())
    bad["rl"]["opd_coeff"] = 0.02
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match="rl.opd_coeff: unknown key"):
        load_config(path)
