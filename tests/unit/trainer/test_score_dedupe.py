"""score_in_chunks scores equal rows of a micro-batch once, and its numbers are bit for bit those of scoring
every copy in the same micro-batches (the code before the deduplication, re-implemented here)."""

import torch

from seed_core.trainer import logprobs as lp
from seed_core.trainer.logprobs import pack_sequences, response_logprobs, score_in_chunks


def _every_copy(model, prompts, responses, pad_id, micro_batch_size):
    """score_in_chunks without deduplication: the same length-sorted micro-batches, every row computed."""
    lengths = [len(p) + len(r) for p, r in zip(prompts, responses)]
    order = sorted(range(len(prompts)), key=lambda i: lengths[i])
    out = [None] * len(prompts)
    with torch.no_grad():
        for s in range(0, len(order), micro_batch_size):
            idx = order[s:s + micro_batch_size]
            got, _ = response_logprobs(model.eval(), pack_sequences([prompts[i] for i in idx],
                                                                    [responses[i] for i in idx], pad_id))
            for row, i in enumerate(idx):
                out[i] = got[row, :len(responses[i])]
    return out


def _rows():
    """Ten rows, five distinct (a GRPO group's identical steps): rows 0 and 3 have the same length, so in the
    length-sorted second micro-batch their copies interleave (0, 3, 0, 3)."""
    gen = torch.Generator().manual_seed(1)
    def ids(n):
        return torch.randint(5, 200, (n,), generator=gen).tolist()

    distinct = [(ids(p), ids(r)) for p, r in ((6, 3), (4, 2), (9, 4), (5, 4), (7, 1))]
    picks = [0, 3, 0, 1, 3, 2, 4, 0, 3, 1]
    return [list(distinct[k][0]) for k in picks], [list(distinct[k][1]) for k in picks]


def _scored_rows(model, monkeypatch, full_logits_max):
    """(score_in_chunks' rows, the every-copy reference, the rows of each forward pass)."""
    monkeypatch.setattr(lp, "FULL_LOGITS_MAX", full_logits_max)
    pad = 0
    prompts, responses = _rows()
    shapes = []
    hook = model.register_forward_pre_hook(lambda _m, _a, kw: shapes.append(tuple(kw["input_ids"].shape)),
                                           with_kwargs=True)
    try:
        got = score_in_chunks(model, prompts, responses, pad, micro_batch_size=5)
    finally:
        hook.remove()
    return got, _every_copy(model, prompts, responses, pad, 5), [s[0] for s in shapes]


def test_full_logits_micro_batches_score_equal_rows_once_with_the_same_bits(tiny_policy, monkeypatch):
    """Chunk 1 holds 4 distinct rows of 5, chunk 2 three (0, 3, 0, 3, 2), kept at MIN_BATCH_ROWS = 4."""
    got, want, rows = _scored_rows(tiny_policy.model, monkeypatch, lp.FULL_LOGITS_MAX)
    assert len(got) == len(want) == 10
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), i
    assert rows == [4, 4]


def test_the_chunked_head_path_scores_every_row(tiny_policy, monkeypatch):
    """FULL_LOGITS_MAX = 0: the selective head, whose chunks are not row-count invariant on 2 threads, runs every row."""
    got, want, rows = _scored_rows(tiny_policy.model, monkeypatch, 0)
    assert rows == [5, 5]
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), i
