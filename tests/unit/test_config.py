from pathlib import Path

import pytest
import yaml

from seed_core.config import ConfigError, SeedConfig, endpoint_env, flatten, project_root
from seed_core.loader import config_from_args, load_config, parse_yaml, source_args, stage_parser, with_overrides

ROOT = Path(__file__).resolve().parents[2]


def test_params_yaml_loads_and_is_complete_both_ways():
    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    cfg = load_config(ROOT / "params.yaml")
    assert set(data) == set(SeedConfig.model_fields)
    dumped = cfg.model_dump(mode="json")

    def keys(d, prefix=""):
        out = set()
        for k, v in d.items():
            out.add(prefix + k)
            if isinstance(v, dict) and v and k != "chat_template_kwargs":
                out |= keys(v, prefix + k + ".")
        return out

    assert keys(data) == keys(dumped), "params.yaml and SeedConfig must list the same keys"


def _write(tmp_path, text):
    p = tmp_path / "params.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text, needle",
    [
        ("rl:\n  algorithm: ppo\n", "rl.algorithm = 'ppo': not a known algorithm; allowed: grpo, grpo_opsd, grpo_sft_probe, opid, opid_self, opsd, opsd_oracle, rlsd, sdar"),
        ("env:\n  name: chess\n", "env.name = 'chess': not a known environment"),
        ("generation:\n  backend: tgi\n", "generation.backend = 'tgi': not a known generation backend"),
        ("rl:\n  opd_coeff: 0.1\n", "rl.opd_coeff: unknown key"),
        ("model:\n  dtype: int8\n", "model.dtype = 'int8'"),
        ("rl:\n  rounds: many\n", "rl.rounds = 'many'"),
    ],
)
def test_bad_values_name_the_key_and_the_fix(tmp_path, text, needle):
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, text))
    assert needle in str(err.value)


def test_malformed_yaml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(_write(tmp_path, "rl: [unclosed\n"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="mapping of sections"):
        load_config(_write(tmp_path, "- 1\n- 2\n"))


def test_overrides_are_validated():
    cfg = SeedConfig()
    assert with_overrides(cfg, {"rl.opd_coef": 0.02}).rl.opd_coef == 0.02
    with pytest.raises(ConfigError, match="unknown key 'opd'"):
        with_overrides(cfg, {"rl.opd": 1})
    with pytest.raises(ValueError, match="not a known algorithm"):
        with_overrides(cfg, {"rl.algorithm": "nope"})


def test_flatten_and_endpoint_env(monkeypatch):
    flat = flatten(SeedConfig())
    assert flat["rl.gate_beta"] == 5.0 and flat["env.sokoban.num_boxes"] == 1
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert endpoint_env("OPENAI_BASE_URL") == "http://127.0.0.1:1/v1"
    with pytest.raises(KeyError, match="belongs in params.yaml"):
        endpoint_env("SEED_LR")


# --- bounds, origins and suggestions (issue 14) -----------------------------------------------------------


@pytest.mark.parametrize(
    "key, value, needle",
    [
        ("collect.group_size", -2, "collect.group_size = -2: Input should be greater than or equal to 1"),
        ("rl.group_size", 0, "rl.group_size = 0: Input should be greater than or equal to 1"),
        ("rl.rounds", -1, "rl.rounds = -1: Input should be greater than or equal to 1"),
        ("rl.lr", -1, "rl.lr = -1: Input should be greater than 0"),
        ("sft.lr", 0, "sft.lr = 0: Input should be greater than 0"),
        ("annotate.parse_attempts", 0, "annotate.parse_attempts = 0"),
        ("annotate.concurrency", 0, "annotate.concurrency = 0"),
        ("generation.top_p", 0.0, "generation.top_p = 0.0"),
        ("generation.max_new_tokens", 0, "generation.max_new_tokens = 0"),
        ("env.max_steps", 0, "env.max_steps = 0"),
        ("env.sokoban.dim_room", [2, 6], "env.sokoban.dim_room.0 = 2"),
        ("rl.clip_ratio_c", 1.0, "rl.clip_ratio_c = 1.0: Input should be greater than 1"),
        ("rl.kl_coef", -0.1, "rl.kl_coef = -0.1"),
        ("eval.splits", [], "eval.splits = []"),
    ],
)
def test_numeric_bounds_fail_at_load_naming_key_value_and_the_override(key, value, needle):
    with pytest.raises(ConfigError) as err:
        load_config(ROOT / "params.yaml", {key: value})
    text = str(err.value)
    assert needle in text and f"(from -S {key}=" in text
    assert "Traceback" not in text and len(text.splitlines()) == 2


def test_every_bound_is_reported_at_once_and_the_file_is_named(tmp_path):
    path = _write(tmp_path, "collect:\n  group_size: -2\nrl:\n  group_size: 0\n  rounds: -1\n  lr: -1\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    lines = str(err.value).splitlines()[1:]
    assert [line.split(" = ")[0].strip() for line in lines] == [
        "collect.group_size", "rl.rounds", "rl.group_size", "rl.lr"]
    assert all(line.endswith(f"(in {path})") for line in lines)


def test_origin_names_preset_params_or_the_flag(tmp_path):
    presets = tmp_path / "presets"
    presets.mkdir()
    preset = presets / "mine.yaml"
    preset.write_text("rl:\n  algorithm: sedd\n")
    with pytest.raises(ConfigError, match=r"rl.algorithm = 'sedd': .* \(in preset .*presets/mine.yaml\)"):
        load_config(preset)
    # a bad value given on the command line names the flag, not the (good) file
    with pytest.raises(ConfigError, match=r"\(from --algorithm rl.algorithm=sedd\)"):
        load_config(ROOT / "params.yaml", {"rl.algorithm": "sedd"}, origin="--algorithm")
    # the override fixes a bad file value: no error
    assert load_config(preset, {"rl.algorithm": "seed"}).rl.algorithm == "seed"


def test_unknown_names_suggest_close_ones_and_never_dump_the_config():
    with pytest.raises(ConfigError) as err:
        load_config(ROOT / "params.yaml", {"rl.algorithm": "sedd"})
    text = str(err.value)
    assert "rl.algorithm = 'sedd': not a known algorithm; did you mean 'seed'?" in text
    assert "(from -S rl.algorithm=sedd)" in text and "params.yaml" not in text
    assert len(text) < 450 and "project" not in text and "smollm2" not in text  # one line: 19 algorithm names
    with pytest.raises(ConfigError, match=r"unknown key 'rll'; did you mean 'rl'\?"):
        load_config(ROOT / "params.yaml", {"rll.opd_coef": 1})
    with pytest.raises(ConfigError, match=r"model.dtype = 'bfloat61'.*did you mean 'bfloat16'"):
        load_config(ROOT / "params.yaml", {"model.dtype": "bfloat61"})


def test_unknown_key_in_a_file_suggests_the_close_key(tmp_path):
    with pytest.raises(ConfigError, match=r"rl.opd_coeff: unknown key; did you mean 'opd_coef'"):
        load_config(_write(tmp_path, "rl:\n  opd_coeff: 0.1\n"))
    with pytest.raises(ConfigError, match=r"rl.zzz: unknown key; known keys in rl: algorithm, rounds"):
        load_config(_write(tmp_path, "rl:\n  zzz: 0.1\n"))


def test_a_missing_preset_suggests_close_files_and_no_flag():
    with pytest.raises(ConfigError) as err:
        load_config(ROOT / "presets" / "sokoban-qwen2.5-1.5.yaml")
    text = str(err.value)
    assert "does not exist; did you mean 'sokoban-qwen2.5-1.5b.yaml'" in text
    assert "--config" not in text


def test_overrides_into_a_partial_file_and_a_free_form_mapping(tmp_path):
    cfg = load_config(_write(tmp_path, "rl:\n  rounds: 2\n"), {"sft.lr": 0.5,
                                                              "model.chat_template_kwargs.enable_thinking": False})
    assert cfg.sft.lr == 0.5 and cfg.model.chat_template_kwargs == {"enable_thinking": False}
    with pytest.raises(ConfigError, match="rl.lr is not a section"):
        load_config(_write(tmp_path, ""), {"rl.lr.x": 1})


def test_params_rewritten_by_dvc_exp_run_still_load(tmp_path):
    """`dvc exp run -S` (seed sweep) rewrites params.yaml and drops quotes: `mixed_precision: "no"` comes back
    as `mixed_precision: no`, which a YAML 1.1 reader turns into False. DVC reads YAML 1.2, and so do we."""
    from dvc.utils.serialize import modify_yaml

    params = tmp_path / "params.yaml"
    params.write_text((project_root() / "params.yaml").read_text())
    with modify_yaml(params) as data:
        data["sweep"]["methods"] = ["grpo", "seed"]
    assert "mixed_precision: no\n" in params.read_text()
    cfg = load_config(params)
    assert cfg.model.mixed_precision == "no" and cfg.sweep.methods == ["grpo", "seed"]
    assert with_overrides(SeedConfig(), {"model.mixed_precision": parse_yaml("no")}).model.mixed_precision == "no"


def test_a_loaded_config_records_its_file_and_overrides_and_loads_again_from_them(tmp_path):
    """What a launched stage gets (seed_core.stages.launch): the params file and the overrides, in the order they
    take effect, values typed exactly as YAML 1.2 reads them back ("no" stays a string)."""
    params = _write(tmp_path, "rl:\n  rounds: 2\n")
    loaded = load_config(params, {"rl.algorithm": "grpo", "rl.lr": 0.5})
    assert source_args(loaded) == ["--config", str(params.resolve()), "--set", 'rl.algorithm="grpo"',
                                   "--set", "rl.lr=0.5"]
    cfg = with_overrides(loaded, {"model.mixed_precision": "no", "rl.lr": 1e-5})
    args = source_args(cfg)
    assert args == ["--config", str(params.resolve()), "--set", 'rl.algorithm="grpo"',
                    "--set", 'model.mixed_precision="no"', "--set", "rl.lr=1e-05"]
    again = config_from_args(stage_parser("test").parse_args(args))
    assert again == cfg and again.model.mixed_precision == "no" and again.rl.lr == 1e-5 and again.rl.rounds == 2
    assert source_args(again) == args


def test_a_config_built_in_code_cannot_be_launched_and_says_how_to_make_one():
    for cfg in (SeedConfig(), with_overrides(SeedConfig(), {"rl.lr": 0.1})):
        with pytest.raises(ConfigError, match=r"built in code.*load_config\(<params file>, <overrides>\)"):
            source_args(cfg)
