"""Batch plans that compute each distinct row once: ``unique_rows`` and ``unique_by_length`` (pure functions).

A plan is ``(firsts, inverse)``: ``firsts`` are indices into the input rows, one per distinct key (the rows that
are computed), and ``inverse[i]`` is the position in ``firsts`` whose result row ``i`` takes, so that

    keys[firsts[inverse[i]]] == keys[i]   for every i        (every row gets the result of an equal row)
    results_for_all = [results_for_firsts[j] for j in inverse]

Used where equal inputs give equal outputs:

Both exact callers keep at least ``MIN_BATCH_ROWS`` rows per batch.

* ``trainer.logprobs.score_in_chunks``: equal (prompt, response) rows inside one micro-batch. The micro-batch's
  padded shape (longest prompt, longest response) is kept, since the longest rows are among the distinct
  ones, and on CPU fp32 a row's log-probs do not depend on how many other rows share its padded shape
  (checked in tests/unit/rollout/test_batch_plan.py), so the scores are bit for bit those of the full
  micro-batch. (On GPU, GEMM kernels may be chosen by the row count, so the last bits may move there, as they
  do with any change of ``rl.micro_batch_size``.)
* ``rollout.backends.HFBackend``: equal prompts of one greedy generation batch (the identical trajectories of a
  GRPO group, analysed by SEED's policy): the batch keeps its width; bit for bit on the testbed, elsewhere the
  greedy tokens (its docstring says where the last bits moved).
* ``analyzer.clients.BackendClient(sort_by_length=True)`` (the default): every distinct greedy analysis prompt once,
  shortest first, so each batch pads less; not bit-exact by construction (another padding moves the logits by
  ~1e-5), measured to keep the results (its docstring says where).
"""

from __future__ import annotations

from typing import Hashable, Sequence


MIN_BATCH_ROWS = 4
"""A batch is never cut below this many rows (or its own size, if smaller): on CPU a GEMM over 1-3 rows takes
other kernels than over more and moves the last bits (measured on the testbed: a greedy generation batch of 16 cut
to 1-3 of its rows changed their log-probs, cut to 4-13 did not; tests/unit/rollout/test_greedy_dedupe.py). The
rows kept beyond the distinct ones are copies; their results go unused."""


def unique_rows(keys: Sequence[Hashable], min_rows: int = 0) -> tuple[list[int], list[int]]:
    """``(firsts, inverse)`` (module docstring): ``firsts`` = the first occurrence of each distinct key and, when
    they are fewer than ``min(min_rows, len(keys))``, the earliest copies that make up that many rows; ascending
    (a sub-sequence of the input, so a batch keeps its rows' order)."""
    position: dict[Hashable, int] = {}
    firsts: list[int] = []
    inverse: list[int] = []
    for i, key in enumerate(keys):
        j = position.setdefault(key, len(firsts))
        if j == len(firsts):
            firsts.append(i)
        inverse.append(j)
    missing = min(min_rows, len(keys)) - len(firsts)
    if missing > 0:
        chosen = set(firsts)
        kept = sorted(chosen | set([i for i in range(len(keys)) if i not in chosen][:missing]))
        where = {i: k for k, i in enumerate(kept)}
        inverse = [where[firsts[j]] for j in inverse]
        firsts = kept
    return firsts, inverse


def unique_by_length(keys: Sequence[Hashable], lengths: Sequence[int]) -> tuple[list[int], list[int]]:
    """``(firsts, inverse)`` (module docstring) with ``firsts`` the first occurrence of each distinct key, sorted
    by ``(lengths[i], i)``: shortest first, ties in input order. Equal keys must have equal lengths."""
    if len(keys) != len(lengths):
        raise ValueError(f"{len(keys)} keys but {len(lengths)} lengths")
    firsts, inverse = unique_rows(keys)
    order = sorted(range(len(firsts)), key=lambda j: (lengths[firsts[j]], firsts[j]))
    rank = {j: r for r, j in enumerate(order)}
    return [firsts[j] for j in order], [rank[j] for j in inverse]
