"""HFBackend: a greedy batch generates each distinct prompt once (never fewer than MIN_BATCH_ROWS rows) and its
completions are bit for bit those of the whole batch (the code before: ``_generate_batch`` on every row); sampled
batches run every row."""

import torch

from seed_core.config import GenerationConfig
from seed_core.rollout import backends
from seed_core.rollout.backends import HFBackend

PROMPTS = ["go left", "push the box up", "go left", "a longer prompt about the room", "push the box up",
           "go left", "down", "down",  # batch 1: 4 distinct of 8 -> 4 rows
           "up", "up", "up", "wait"]  # batch 2: 2 distinct of 4 -> kept at 4 rows (MIN_BATCH_ROWS)


def _on_reference_cpu() -> bool:
    """Whether this CPU is the model of ``seed doctor``'s reference record, where the bits were established (an
    Intel Xeon's kernels gave the 4-row and 8-row batches logprobs that differ in the last bits, 2026-12-05)."""
    import json
    from pathlib import Path

    from seed_app.cli_doctor import same_cpu
    from seed_core.repro import golden, numerics

    records = json.loads((Path(__file__).resolve().parents[3] / golden.RESULTS).read_text())["machines"]
    return same_cpu(numerics.cpu(), records[0])


def _backend(tiny_policy):
    return HFBackend(tiny_policy, GenerationConfig(batch_size=8, max_prompt_tokens=64))


def _generate_calls(model, monkeypatch):
    shapes = []
    real = model.generate

    def counting(*args, **kwargs):
        shapes.append(tuple(kwargs["input_ids"].shape))
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "generate", counting)
    return shapes


def test_greedy_batches_generate_distinct_prompts_once_with_the_same_bits(tiny_policy, monkeypatch):
    backend = _backend(tiny_policy)
    encoded = [backend.encode(p) for p in PROMPTS]
    with torch.no_grad():  # the code before: every row of each batch of 8
        want = [c for s in range(0, len(PROMPTS), 8) for c in backend._generate_batch(encoded[s:s + 8], 0.0, 6)]
    shapes = _generate_calls(tiny_policy.model, monkeypatch)
    got = backend.generate(PROMPTS, temperature=0.0, max_new_tokens=6)
    assert [(g.token_ids, g.text) for g in got] == [(w.token_ids, w.text) for w in want]
    if _on_reference_cpu():  # the same bits; elsewhere a GEMM kernel can depend on the row count
        assert [g.logprobs for g in got] == [w.logprobs for w in want]
    else:
        assert all(torch.allclose(torch.tensor(g.logprobs), torch.tensor(w.logprobs), atol=1e-5, rtol=0)
                   for g, w in zip(got, want))
    assert [s[0] for s in shapes] == [4, 4]
    assert [s[1] for s in shapes] == [max(len(e) for e in encoded[:8]), max(len(e) for e in encoded[8:])]


def test_a_greedy_batch_is_not_cut_below_min_batch_rows(tiny_policy, monkeypatch):
    shapes = _generate_calls(tiny_policy.model, monkeypatch)
    monkeypatch.setattr(backends, "MIN_BATCH_ROWS", 0)
    _backend(tiny_policy).generate(PROMPTS, temperature=0.0, max_new_tokens=2)
    assert [s[0] for s in shapes] == [4, 2]  # without the floor: batch 2 would run its 2 distinct rows


def test_sampled_batches_run_every_row(tiny_policy, monkeypatch):
    shapes = _generate_calls(tiny_policy.model, monkeypatch)
    got = _backend(tiny_policy).generate(PROMPTS, temperature=1.0, max_new_tokens=3, seed=0)
    assert len(got) == 12 and [s[0] for s in shapes] == [8, 4]
