"""Numbers a run could not finish with are refused in one line naming the key (issue 43, poorer cases): counts and
lengths are positive and below a maximum, learning rates finite, positive and at most 1, and a value string longer
than ``seed_core.loader.MAX_VALUE_CHARS`` is refused before it is parsed. Before, ``-S rl.rounds=1000000000`` was
accepted and an ``rl.lr`` of 200,000 digits became ``inf``, then an argument list the system refused. The bounds
live in the one typed config (``seed_core.config``), so ``-S``, ``--set``, presets, served requests and pool cells
all meet them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from seed_app import cli
from seed_core.config import ConfigError, SeedConfig
from seed_core.loader import MAX_VALUE_CHARS, load_config, parse_overrides
from tests.unit.test_cli_errors import ROOT

COUNTS = re.compile(r"(rounds|batch|group|length|tokens|tasks|steps|epochs|episodes|size|repeats|games|"
                    r"products|goals|people|num_|topk|len$)")
"""Integer keys that count work: each needs a maximum."""


def schema_fields(model: type[BaseModel] = SeedConfig, prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            out += schema_fields(field.annotation, f"{prefix}{name}.")
        else:
            out.append((f"{prefix}{name}", field))
    return out


def upper_bound(field: Any) -> Any:
    return next((getattr(m, "le", None) or getattr(m, "lt", None) for m in field.metadata
                 if getattr(m, "le", None) is not None or getattr(m, "lt", None) is not None), None)


def test_every_count_and_length_has_a_maximum_and_every_lr_is_at_most_one() -> None:
    fields = schema_fields()
    counts = [(key, f) for key, f in fields if f.annotation is int and COUNTS.search(key.rsplit(".", 1)[-1])]
    assert len(counts) > 30
    assert [key for key, f in counts if upper_bound(f) is None] == []
    rates = [(key, f) for key, f in fields if key.endswith(".lr")]
    assert {key for key, _ in rates} == {"sft.lr", "rl.lr", "testbed.lr"}
    assert all(upper_bound(f) == 1.0 for _, f in rates)
    assert SeedConfig.model_config.get("allow_inf_nan") is False  # every float of every section is finite


@pytest.mark.parametrize(("override", "named"), [
    ("rl.rounds=1000000000", "rl.rounds = 1000000000: Input should be less than or equal to 10000"),
    ("rl.lr=.inf", "rl.lr = inf: Input should be a finite number"),
    ("rl.lr=.nan", "rl.lr = nan: Input should be a finite number"),
    ("rl.lr=200000.0", "rl.lr = 200000.0: Input should be less than or equal to 1"),
    ("rl.lr=0", "rl.lr = 0: Input should be greater than 0"),
    ("sft.lr=-1e-5", "sft.lr = -1e-05: Input should be greater than 0"),
    ("rl.group_size=0", "rl.group_size = 0: Input should be greater than or equal to 1"),
    ("collect.group_size=100000", "collect.group_size = 100000: Input should be less than or equal to 1024"),
    ("rl.mini_batch_size=1e12", "rl.mini_batch_size = 1000000000000.0: Input should be less than or equal to"),
    ("generation.max_new_tokens=10000000", "generation.max_new_tokens = 10000000: Input should be less than"),
    ("sft.max_length=100000000", "sft.max_length = 100000000: Input should be less than or equal to"),
    ("rl.kl_coef=.inf", "rl.kl_coef = inf: Input should be a finite number"),
    ("sweep.seeds=[0, 5000000000]", "sweep.seeds.1 = 5000000000: Input should be less than or equal to 4294967295"),
])
def test_a_number_a_run_could_not_finish_with_is_one_line_naming_the_key(override: str, named: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(ROOT / "params.yaml", parse_overrides([override]))
    lines = str(err.value).splitlines()
    assert lines[0] == "invalid config:" and len(lines) == 2, lines
    assert named in lines[1] and f"(from -S {override.split('=')[0]}=" in lines[1], lines[1]


def test_an_over_long_value_is_refused_before_it_is_parsed() -> None:
    digits = "1" * 200_000  # as an int, YAML would have to parse 200,000 digits; as a float it becomes inf
    with pytest.raises(ConfigError, match=r"^-S rl.lr=1{20}\.\.\.: the value is 200,000 characters long; a "
                                          r"setting's value has at most 1,000$"):
        parse_overrides([f"rl.lr={digits}"])
    assert parse_overrides([f"rl.lr={'0' * (MAX_VALUE_CHARS - 4)}1e-6"]) == {"rl.lr": 1e-6}  # the limit itself is read
    result = CliRunner().invoke(cli.app, ["run", "-S", f"rl.lr={digits}"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "rl.lr" in result.output and "200,000 characters" in result.output
