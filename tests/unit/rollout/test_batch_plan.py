"""Batch plans (seed_core.rollout.batch_plan): every row maps to an equal computed row, in the promised order,
and the CPU property the log-prob deduplication rests on (a row's scores do not depend on its batch mates at a
fixed padded shape)."""

import random

import pytest
import torch

from seed_core.rollout.batch_plan import unique_by_length, unique_rows
from seed_core.trainer.logprobs import pack_sequences, response_logprobs


def _check_plan(keys, firsts, inverse):
    assert len(inverse) == len(keys)
    assert len({keys[i] for i in firsts}) == len(firsts) == len(set(keys))  # each distinct key computed once
    assert all(keys[firsts[j]] == key for key, j in zip(keys, inverse))


def test_unique_rows_keeps_first_occurrences_in_order():
    keys = ["b", "a", "b", "c", "a", "b"]
    firsts, inverse = unique_rows(keys)
    assert firsts == [0, 1, 3]
    assert inverse == [0, 1, 0, 2, 1, 0]
    assert unique_rows([]) == ([], [])


def test_min_rows_keeps_the_earliest_copies_up_to_that_many_rows():
    firsts, inverse = unique_rows(["a", "b", "a", "a", "c", "b"], min_rows=4)
    assert firsts == [0, 1, 2, 4]  # the distinct rows 0, 1, 4 and the earliest copy, 2
    assert inverse == [0, 1, 0, 0, 3, 1]
    assert unique_rows(["a"] * 6, min_rows=4) == ([0, 1, 2, 3], [0] * 6)
    assert unique_rows(["a", "a"], min_rows=4) == ([0, 1], [0, 0])  # a batch smaller than min_rows stays whole
    assert unique_rows(["a", "b", "c", "d", "a"], min_rows=4) == ([0, 1, 2, 3], [0, 1, 2, 3, 0])


def test_unique_by_length_sorts_distinct_rows_shortest_first_ties_in_input_order():
    keys = ["ccc", "a", "bb", "a", "dd", "ccc", "e"]
    firsts, inverse = unique_by_length(keys, [len(k) for k in keys])
    assert [keys[i] for i in firsts] == ["a", "e", "bb", "dd", "ccc"]
    assert firsts == [1, 6, 2, 4, 0]
    assert [keys[firsts[j]] for j in inverse] == keys
    with pytest.raises(ValueError, match="2 keys but 1 lengths"):
        unique_by_length(["a", "b"], [1])


def test_plans_map_every_row_back_on_random_inputs():
    rng = random.Random(0)
    for _ in range(200):
        keys = [rng.randrange(6) for _ in range(rng.randrange(0, 20))]
        lengths = {k: rng.randrange(4) for k in set(keys)}
        _check_plan(keys, *unique_rows(keys))
        firsts, inverse = unique_rows(keys, min_rows=4)
        assert firsts == sorted(firsts) and len(firsts) == max(len(set(keys)), min(4, len(keys)))
        assert all(keys[firsts[j]] == key for key, j in zip(keys, inverse))
        firsts, inverse = unique_by_length(keys, [lengths[k] for k in keys])
        _check_plan(keys, firsts, inverse)
        assert [(lengths[keys[i]], i) for i in firsts] == sorted((lengths[keys[i]], i) for i in firsts)


def test_a_rows_logprobs_do_not_depend_on_its_batch_mates_at_a_fixed_padded_shape(tiny_policy):
    """What score_in_chunks' deduplication relies on (CPU, fp32): drop rows from a micro-batch but keep its longest
    prompt and longest response, and every kept row's log-probs are bit for bit the same."""
    model = tiny_policy.model.eval()
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(5, 200, (n,), generator=gen).tolist() for n in (9, 4, 7, 12, 3, 12, 6, 8)]
    responses = [torch.randint(5, 200, (n,), generator=gen).tolist() for n in (3, 6, 2, 5, 4, 1, 6, 2)]
    pad = tiny_policy.tokenizer.pad_token_id
    with torch.no_grad():
        full, _ = response_logprobs(model, pack_sequences(prompts, responses, pad))
        for keep in ([3, 1], [1, 3, 4], [0, 1, 2, 3], [3, 6, 7, 1, 5]):
            part, _ = response_logprobs(model, pack_sequences([prompts[i] for i in keep],
                                                              [responses[i] for i in keep], pad))
            assert part.shape[1] == full.shape[1]
            for row, i in enumerate(keep):
                assert torch.equal(part[row], full[i]), (keep, i)
