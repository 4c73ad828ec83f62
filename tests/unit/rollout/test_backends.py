"""seed_core.rollout.backends: the hf backend on the tiny model, the vllm registration, helpers."""

from __future__ import annotations


import pytest
import torch

from seed_core.config import GenerationConfig
from seed_core.modeling.models import encode_prompt
from seed_core.rollout.backends import BACKENDS, Completion, HFBackend, cut_at_eos, left_pad

PROMPTS = ["push the box up", "Symbols: # wall, _ floor, √ box on target. Go.", "12 = ?", "left", "think"]


def make_backend(policy, **gen) -> HFBackend:
    return BACKENDS.get("hf")(policy, GenerationConfig(**gen))


def test_registry_names_and_completion_is_frozen() -> None:
    assert BACKENDS.names() == ["hf", "vllm"]
    completion = Completion(text="a", token_ids=[1], logprobs=[-0.5])
    with pytest.raises(AttributeError):
        completion.text = "b"  # type: ignore[misc]


def test_left_pad_right_aligns_rows() -> None:
    ids, mask = left_pad([[5, 6, 7], [8]], pad_id=0, device=torch.device("cpu"))
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_cut_at_eos_keeps_first_eos_and_drops_the_rest() -> None:
    assert cut_at_eos([4, 5, 2, 3, 3], [2]) == 3
    assert cut_at_eos([4, 5, 6], [2]) == 3
    assert cut_at_eos([7, 2, 9, 2], [2, 9]) == 2


def test_batch_of_five_with_batch_size_two(tiny_policy) -> None:
    out = make_backend(tiny_policy, batch_size=2).generate(PROMPTS, temperature=1.0, max_new_tokens=12, seed=0)
    assert len(out) == 5 and all(isinstance(c, Completion) for c in out)
    tok = tiny_policy.tokenizer
    for c in out:
        assert 1 <= len(c.token_ids) <= 12
        assert len(c.logprobs) == len(c.token_ids)
        assert all(lp <= 0.0 and lp > float("-inf") for lp in c.logprobs)
        assert c.text == tok.decode(c.token_ids, skip_special_tokens=True)
        assert tok.pad_token_id not in c.token_ids
        assert tok.eos_token_id not in c.token_ids[:-1]  # cut at (and including) the first EOS


def test_same_seed_same_samples_and_other_seed_differs(tiny_policy) -> None:
    backend = make_backend(tiny_policy, batch_size=2)
    run = lambda seed: [c.token_ids for c in backend.generate(PROMPTS, temperature=1.0, max_new_tokens=10, seed=seed)]
    assert run(3) == run(3)
    assert run(3) != run(4)


def test_greedy_is_deterministic_and_matches_argmax_logprobs(tiny_policy) -> None:
    backend = make_backend(tiny_policy, batch_size=4)
    first = backend.generate(PROMPTS[:2], temperature=0.0, max_new_tokens=8)
    assert [c.token_ids for c in first] == [c.token_ids for c in backend.generate(PROMPTS[:2], temperature=0.0,
                                                                                 max_new_tokens=8, seed=99)]
    # Recompute with one teacher-forced forward pass: each greedy token is the argmax and its logprob matches.
    prompt = encode_prompt(tiny_policy.tokenizer, PROMPTS[0])
    c = first[0]
    with torch.no_grad():
        logits = tiny_policy.model(torch.tensor([prompt + c.token_ids])).logits[0, len(prompt) - 1:-1]
    logp = torch.log_softmax(logits.float(), dim=-1)
    assert logp.argmax(-1).tolist() == c.token_ids
    assert torch.allclose(logp.gather(1, torch.tensor(c.token_ids)[:, None]).squeeze(1),
                          torch.tensor(c.logprobs), atol=1e-4)


def test_temperature_scales_the_reported_logprobs(tiny_policy) -> None:
    """At temperature t the logprob is log_softmax(logits / t) of the sampled token (the sampled distribution)."""
    [c] = make_backend(tiny_policy).generate(["left"], temperature=0.5, max_new_tokens=1, seed=1)
    prompt = encode_prompt(tiny_policy.tokenizer, "left")
    with torch.no_grad():
        logits = tiny_policy.model(torch.tensor([prompt])).logits[0, -1]
    expected = torch.log_softmax(logits / 0.5, dim=-1)[c.token_ids[0]].item()
    assert c.logprobs[0] == pytest.approx(expected, abs=1e-4)


def test_left_padding_does_not_change_greedy_output(tiny_policy) -> None:
    # Prompts of very different lengths, so the short ones are heavily left-padded in the batch.
    prompts = [PROMPTS[1] * 3, PROMPTS[3], PROMPTS[2]]
    alone = [make_backend(tiny_policy, batch_size=1).generate([p], temperature=0.0, max_new_tokens=10)[0]
             for p in prompts]
    batched = make_backend(tiny_policy, batch_size=3).generate(prompts, temperature=0.0, max_new_tokens=10)
    assert [c.token_ids for c in batched] == [c.token_ids for c in alone]
    for a, b in zip(alone, batched):
        assert b.logprobs == pytest.approx(a.logprobs, abs=1e-4)


def test_completion_stops_at_first_eos_and_drops_padding(tiny_policy) -> None:
    backend = make_backend(tiny_policy, batch_size=2)
    prompts = [PROMPTS[0], PROMPTS[3]]
    free = backend.generate(prompts, temperature=0.0, max_new_tokens=6)
    stop = free[0].token_ids[2]  # declare the first prompt's 3rd greedy token an end-of-turn token
    assert stop not in free[1].token_ids, "pick prompts whose greedy outputs share no token"
    tiny_policy.model.generation_config.eos_token_id = [tiny_policy.tokenizer.eos_token_id, stop]
    stopped = backend.generate(prompts, temperature=0.0, max_new_tokens=6)
    assert stopped[0].token_ids == free[0].token_ids[:free[0].token_ids.index(stop) + 1]
    assert len(stopped[0].logprobs) == len(stopped[0].token_ids)
    assert stopped[1].token_ids == free[1].token_ids  # the other row ran on; the first was padded meanwhile


def test_prompts_are_left_truncated_to_max_prompt_tokens(tiny_policy) -> None:
    long_prompt = " ".join(f"word{i}" for i in range(200))
    backend = make_backend(tiny_policy, max_prompt_tokens=16)
    ids = backend.encode(long_prompt)
    full = encode_prompt(tiny_policy.tokenizer, long_prompt)
    assert len(full) > 16 and ids == full[-16:]  # the generation prompt at the end is kept
    # generate() is fed exactly those 16 tokens.
    seen: list[int] = []
    original = tiny_policy.model.generate

    def spy(*args, **kwargs):
        seen.append(kwargs["input_ids"].shape[1])
        return original(*args, **kwargs)

    tiny_policy.model.generate = spy
    backend.generate([long_prompt], temperature=0.0, max_new_tokens=2)
    assert seen == [16]


def test_generate_restores_train_mode_and_rejects_negative_temperature(tiny_policy) -> None:
    backend = make_backend(tiny_policy)
    tiny_policy.model.train()
    backend.generate(["up"], temperature=0.0, max_new_tokens=2)
    assert tiny_policy.model.training
    tiny_policy.model.eval()
    backend.generate(["up"], temperature=0.0, max_new_tokens=2)
    assert not tiny_policy.model.training
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        backend.generate(["up"], temperature=-1.0, max_new_tokens=2)
