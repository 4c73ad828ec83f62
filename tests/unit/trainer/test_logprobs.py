import torch

from seed_core.trainer.logprobs import pack_sequences, pad_rows, response_logprobs, score_in_chunks


def _naive(model, prompt, response):
    """log pi(response | prompt) one sequence at a time, no padding: the reference for packing."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    return torch.stack([logp[len(prompt) - 1 + j, tok] for j, tok in enumerate(response)])


def test_pack_layout_left_pads_prompts_right_pads_responses():
    b = pack_sequences([[5, 6, 7], [8]], [[1], [2, 3]], pad_id=0)
    assert b.prompt_len == 3
    assert b.input_ids.tolist() == [[5, 6, 7, 1, 0], [0, 0, 8, 2, 3]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 1, 0], [0, 0, 1, 1, 1]]
    assert b.position_ids.tolist()[1][2:] == [0, 1, 2]
    assert b.response_mask.tolist() == [[1, 0], [1, 1]]


def test_batched_logprobs_match_one_by_one(tiny_policy):
    model = tiny_policy.model.eval()
    prompts = [[10, 11, 12, 13, 14], [20, 21], [30, 31, 32]]
    responses = [[40, 41], [42, 43, 44, 45], [46]]
    batch = pack_sequences(prompts, responses, pad_id=tiny_policy.tokenizer.pad_token_id)
    with torch.no_grad():
        got, ent = response_logprobs(model, batch, with_entropy=True)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        torch.testing.assert_close(got[i, : len(r)], _naive(model, p, r), atol=1e-4, rtol=1e-4)
        assert torch.all(got[i, len(r):] == 0) and torch.all(ent[i, len(r):] == 0)
    assert torch.all(ent[batch.response_mask.bool()] > 0)


def test_score_in_chunks_keeps_order_and_lengths(tiny_policy):
    model = tiny_policy.model
    prompts = [[1, 2, 3, 4, 5, 6], [7], [8, 9]]
    responses = [[11], [12, 13, 14], [15, 16]]
    rows = score_in_chunks(model, prompts, responses, tiny_policy.tokenizer.pad_token_id, micro_batch_size=2)
    assert [r.numel() for r in rows] == [1, 3, 2]
    for p, r, row in zip(prompts, responses, rows):
        torch.testing.assert_close(row, _naive(model.eval(), p, r), atol=1e-4, rtol=1e-4)
    assert pad_rows(rows, 4).shape == (3, 4)


def test_gradient_flows_through_response_logprobs(tiny_policy):
    model = tiny_policy.model.train()
    batch = pack_sequences([[3, 4]], [[5, 6]], pad_id=tiny_policy.tokenizer.pad_token_id)
    logprobs, _ = response_logprobs(model, batch)
    logprobs.sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_score_in_chunks_token_budget_bounds_every_forward_pass(tiny_policy):
    """max_tokens = 12: rows sorted by length 3, 4, 5, 7 -> passes [3, 4] (2 x 4 = 8 <= 12) then [5] (2 x 5 > 12)
    then [7]; the results are those of one pass per row."""
    model = tiny_policy.model
    prompts = [[1, 2, 3, 4, 5], [7], [8, 9], [6, 5, 4]]
    responses = [[11, 12], [12, 13, 14], [15], [16, 17]]
    shapes = []
    hook = model.register_forward_pre_hook(lambda _m, _a, kw: shapes.append(tuple(kw["input_ids"].shape)),
                                           with_kwargs=True)
    try:
        rows = score_in_chunks(model, prompts, responses, tiny_policy.tokenizer.pad_token_id,
                               micro_batch_size=8, max_tokens=12)
    finally:
        hook.remove()
    assert [s[0] for s in shapes] == [2, 1, 1]
    for p, r, row in zip(prompts, responses, rows):
        torch.testing.assert_close(row, _naive(model.eval(), p, r), atol=1e-4, rtol=1e-4)


class _Ranks:
    """A stand-in for ``Collective`` on one of two ranks whose other rank runs ``other`` forward passes."""

    world = 2

    def __init__(self, other: int) -> None:
        self.other = other

    def max_int(self, value: int) -> int:
        return max(value, self.other)


def test_score_in_chunks_pads_to_the_other_ranks_forward_count_and_drops_the_padding(tiny_policy):
    """The rows of the test above take 3 passes; a rank whose peer takes 5 runs 2 more on its shortest row (FSDP
    needs the same number of forwards on every rank), and the results stay those without padding."""
    model = tiny_policy.model
    prompts = [[1, 2, 3, 4, 5], [7], [8, 9], [6, 5, 4]]
    responses = [[11, 12], [12, 13, 14], [15], [16, 17]]
    pad = tiny_policy.tokenizer.pad_token_id
    plain = score_in_chunks(model, prompts, responses, pad, micro_batch_size=8, max_tokens=12)
    shapes = []
    hook = model.register_forward_pre_hook(lambda _m, _a, kw: shapes.append(tuple(kw["input_ids"].shape)),
                                           with_kwargs=True)
    try:
        padded = score_in_chunks(model, prompts, responses, pad, micro_batch_size=8, max_tokens=12, comm=_Ranks(5))
        fewer = score_in_chunks(model, prompts, responses, pad, micro_batch_size=8, max_tokens=12, comm=_Ranks(1))
    finally:
        hook.remove()
    assert [s[0] for s in shapes] == [2, 1, 1, 1, 1] + [2, 1, 1]
    assert shapes[3] == shapes[4] == (1, 3)  # the shortest row (prompt 2 + response 1), again
    for a, b, c in zip(plain, padded, fewer):
        assert torch.equal(a, b) and torch.equal(a, c)
