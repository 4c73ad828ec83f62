"""How one global batch of step samples is split over data-parallel ranks (DDP / FSDP) and micro-batches.

Every rank holds the same global ``RLSamples`` (gathered after the rollout, so GRPO groups are whole and
advantages are the same everywhere). For each mini-batch, rank ``r`` takes an equal-size slice
(``rank_slice``; rows past the end repeat a real row with ``keep = False`` and weigh nothing), cuts it into
micro-batches by sample count or token budget (``split_micro``), and every rank runs the same number of
micro-batches (``Collective.max_int``; a rank with fewer runs weight-0 padding micro-batches), because
FSDP's all-gathers need every rank in every forward and backward.

Global token-mean (verl's "token-mean" over the whole mini-batch). A term on micro-batch k is a
token-mean ``L_k = sum_t m x / n_k`` over its ``n_k`` tokens; weighting it by ``n_k / N`` with ``N`` the
mini-batch's token count summed over all ranks gives

    sum_{r,k} (n_k / N) L_k = sum_{all tokens} m x / N

whatever the number of ranks or micro-batches, so loss and gradient are split-invariant. DDP and FSDP
*average* gradients over the P ranks, so each rank back-propagates ``P * sum_k (n_k / N) L_k``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, TypeVar

import torch

T = TypeVar("T")


@dataclass(frozen=True)
class Rows:
    """Sample indices of one rank's share; ``keep[i] = False`` marks a padding row (weight 0)."""

    index: list[int]
    keep: list[bool]

    def __len__(self) -> int:
        return len(self.index)

    @property
    def real(self) -> list[int]:
        return [i for i, k in zip(self.index, self.keep) if k]


def rank_slice(indices: Sequence[int], rank: int, world: int) -> Rows:
    """Contiguous slice ``rank`` of ``ceil(n / world)`` rows; short slices are padded with ``indices[0]``.

    Example: 5 indices over 2 ranks -> rank 0 gets rows 0-2, rank 1 gets rows 3-4 plus one padding row.
    """
    if not indices:
        raise ValueError("cannot split an empty mini-batch over ranks")
    size = -(-len(indices) // world)
    part = list(indices[rank * size:(rank + 1) * size])
    pad = size - len(part)
    return Rows(part + [indices[0]] * pad, [True] * len(part) + [False] * pad)


def split_micro(rows: Rows, lengths: Sequence[int], max_samples: int, max_tokens: int = 0,
                prompts: Sequence[Sequence[int]] | None = None) -> list[Rows]:
    """Consecutive micro-batches of at most ``max_samples`` rows and, when ``max_tokens > 0``, at most
    ``max_tokens`` prompt + response tokens (a single longer row still gets a micro-batch of its own).
    ``prompts`` (a shared-prefix update, ``rl.share_prefix``): a row whose prompt is already in the micro-batch adds
    only its response, ``lengths[i] - len(prompts[i])``, since the prompt is computed once."""
    out: list[Rows] = []
    cur_i: list[int] = []
    cur_k: list[bool] = []
    cur_tokens = 0
    seen: set[tuple[int, ...]] = set()
    for i, k in zip(rows.index, rows.keep):
        key = tuple(prompts[i]) if prompts is not None else ()
        cost = lengths[i] - (len(key) if key in seen else 0)
        over = max_tokens > 0 and cur_i and cur_tokens + cost > max_tokens
        if cur_i and (len(cur_i) >= max_samples or over):
            out.append(Rows(cur_i, cur_k))
            cur_i, cur_k, cur_tokens, seen = [], [], 0, set()
            cost = lengths[i]
        cur_i.append(i)
        cur_k.append(k)
        cur_tokens += cost
        seen.add(key)
    if cur_i:
        out.append(Rows(cur_i, cur_k))
    return out


def group_by_prompt(rows: Rows, prompts: Sequence[Sequence[int]]) -> Rows:
    """``rows`` reordered so that rows with the same prompt are adjacent, groups in order of first appearance (a
    shared-prefix update then finds a group's rows in one micro-batch); the mini-batch's loss does not depend on
    the order of its rows beyond float summation."""
    pairs = list(zip(rows.index, rows.keep))
    first: dict[tuple[int, ...], int] = {}
    for n, (i, _) in enumerate(pairs):
        first.setdefault(tuple(prompts[i]), n)
    order = sorted(range(len(pairs)), key=lambda n: (first[tuple(prompts[pairs[n][0]])], n))
    return Rows([pairs[n][0] for n in order], [pairs[n][1] for n in order])


def pad_micro(micros: list[Rows], count: int, filler: int) -> list[Rows]:
    """Append weight-0 micro-batches (one padding row each) until there are ``count``."""
    return micros + [Rows([filler], [False]) for _ in range(count - len(micros))]


class Collective:
    """The few collectives the trainer needs, as no-ops for one process (``accelerator`` may be None)."""

    def __init__(self, accelerator: Any = None) -> None:
        self.accelerator = accelerator
        self.world = int(getattr(accelerator, "num_processes", 1) or 1)
        self.rank = int(getattr(accelerator, "process_index", 0) or 0)

    def _reduce(self, value: float, op: str) -> float:
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=self.accelerator.device)
        return float(self.accelerator.reduce(t, reduction=op).item())

    def sum_float(self, value: float) -> float:
        return self._reduce(value, "sum")

    def max_int(self, value: int) -> int:
        if self.world == 1:
            return value
        t = torch.tensor([value], dtype=torch.long, device=self.accelerator.device)
        gathered = self.accelerator.gather(t)
        return int(gathered.max().item())

    def gather_lists(self, items: list[T]) -> list[T]:
        """Concatenation of every rank's ``items`` in rank order (python objects, pickled)."""
        if self.world == 1:
            return list(items)
        from accelerate.utils import gather_object

        return list(gather_object(list(items)))
