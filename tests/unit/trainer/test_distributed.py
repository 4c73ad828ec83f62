import pytest
import torch

from seed_core.trainer.distributed import Collective, Rows, pad_micro, rank_slice, split_micro


def test_rank_slices_are_equal_sized_and_cover_every_index_once():
    a, b = rank_slice([7, 8, 9, 10, 11], 0, 2), rank_slice([7, 8, 9, 10, 11], 1, 2)
    assert a == Rows([7, 8, 9], [True, True, True])
    assert b == Rows([10, 11, 7], [True, True, False])  # padded with a weight-0 copy of the first row
    assert sorted(a.real + b.real) == [7, 8, 9, 10, 11]
    assert rank_slice([1, 2], 0, 1) == Rows([1, 2], [True, True])
    assert rank_slice([5], 1, 2) == Rows([5], [False])  # more ranks than rows: all padding
    with pytest.raises(ValueError, match="empty"):
        rank_slice([], 0, 2)


def test_split_micro_by_count_and_by_token_budget():
    rows = Rows([0, 1, 2, 3], [True, True, True, False])
    lengths = [5, 3, 9, 2]
    assert [r.index for r in split_micro(rows, lengths, max_samples=3)] == [[0, 1, 2], [3]]
    # budget 8: 5+3 fit, 9 alone (over budget but a row always gets a micro-batch), then 2
    got = split_micro(rows, lengths, max_samples=8, max_tokens=8)
    assert [r.index for r in got] == [[0, 1], [2], [3]]
    assert [r.keep for r in got] == [[True, True], [True], [False]]


def test_pad_micro_adds_weight_zero_batches_up_to_the_common_count():
    micros = pad_micro([Rows([4], [True])], 3, filler=9)
    assert micros == [Rows([4], [True]), Rows([9], [False]), Rows([9], [False])]


def test_single_process_collective_is_the_identity():
    c = Collective(None)
    assert (c.world, c.rank) == (1, 0)
    assert c.sum_float(2.5) == 2.5 and c.max_int(3) == 3 and c.gather_lists([1, 2]) == [1, 2]
