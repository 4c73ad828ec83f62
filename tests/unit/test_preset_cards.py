"""Every paper preset has a provenance card (presets/cards/<preset>.md, scripts/preset_provenance.py): each
result-changing value in the paper, in SEED's released launcher and in the preset, with the reason where they
differ. A preset value that changes without its card's row fails here, naming the key."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from seed_app.preset_card import provenance_line

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKE = _script("make_presets")
CARDS = _script("preset_provenance")
PAPER = [(env, bb) for env, bb in MAKE.PRESETS]


def test_the_checked_in_cards_are_the_generated_ones() -> None:
    generated = MAKE.all_cards()
    assert sorted(p.stem for p in (ROOT / "presets" / "cards").glob("*.md")) == sorted(generated)
    for stem, text in generated.items():
        path = ROOT / "presets" / "cards" / f"{stem}.md"
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is stale: run scripts/make_presets.py"


@pytest.mark.parametrize(("env", "backbone"), PAPER, ids=[f"{env}-{bb}" for env, bb in PAPER])
def test_the_card_records_every_value_of_its_preset(env: str, backbone: str) -> None:
    name = f"{env}-{backbone}"
    rows = CARDS.knobs(env, MAKE.BACKBONES[backbone]["model.path"])
    assert [k.key for k in rows if k.key] and len({k.label for k in rows}) == len(rows)
    for params in (yaml.safe_load(MAKE.preset_text(env, backbone)),
                   yaml.safe_load((ROOT / "presets" / f"{name}.yaml").read_text())):
        stale = CARDS.check(name, rows, params)
        assert not stale, "\n".join(stale)


@pytest.mark.parametrize(("env", "backbone"), PAPER, ids=[f"{env}-{bb}" for env, bb in PAPER])
def test_every_difference_has_a_reason_and_every_launcher_value_a_line(env: str, backbone: str) -> None:
    for k in CARDS.knobs(env, MAKE.BACKBONES[backbone]["model.path"]):
        if CARDS.differs(k.preset, k.paper) or CARDS.differs(k.preset, k.launcher):
            assert k.reason, f"{env}-{backbone}: {k.label} differs from a source; its row needs the reason"
        assert k.paper.where and k.launcher.where, f"{k.label}: say where a value comes from, or that none does"
        if k.launcher.value is not None:
            assert re.search(r"\S+\.(sh|yaml):\d+", k.launcher.where), f"{k.label}: a launcher value needs file:line"


def test_seed_run_prints_the_cards_counts_in_one_line(tmp_path: Path) -> None:
    preset = Path("presets") / "alfworld-qwen2.5-3b.yaml"
    paper, launcher, n = CARDS.counts(CARDS.knobs("alfworld", "Qwen2.5-3B-Instruct"))
    line = provenance_line(ROOT / preset)
    assert line and "\n" not in line
    assert f"{paper} of {n} values differ from the paper" in line
    assert f"{launcher} from SEED's released launcher" in line
    assert line.endswith(str(ROOT / "presets" / "cards" / "alfworld-qwen2.5-3b.md"))
    assert provenance_line(ROOT / "presets" / "smollm2-sokoban.yaml") is None  # a CPU preset has no card
    (tmp_path / "mine.yaml").write_text((ROOT / preset).read_text())
    assert provenance_line(tmp_path / "mine.yaml") is None  # nor has a user's own copy
