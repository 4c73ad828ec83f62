"""Cheap measures of whether SEED's mechanism can act, logged every RL round and used by the pre-flight (issue 25).

* **Zero-advantage groups**: the share of GRPO groups in which every sample's advantage is 0 (all scores equal:
  GRPO learns nothing there, so only the distillation term can move the policy on those tasks).
* **Decision tokens vs format tokens**: the action span of each response (the tokens that carry the parsed
  action, ``decision_span``) against every other response token. The teacher-student gap
  delta = l^T - l and the gate g = sigmoid(beta * delta) are pooled separately over the two, so a token-mean
  dominated by format tokens (gate 0.50 overall) cannot hide what happens at the decisions (0.72).

Pure functions on tensors and token ids; the trainer (``seed_core.trainer.rl_step``) pools their sums over
micro-batches and ranks exactly as it pools the teacher gap by outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import torch
from torch import Tensor

ZERO_ADVANTAGE_EPS = 1e-6
"""|A_i| at or below this counts as zero (GRPO's own epsilon: equal scores give exactly 0)."""

SPLITS = ("decision", "format")
NO_SPAN = (0, 0)
"""``decision_span`` of a response without an action (unparsed, or the action not found in its text)."""


def zero_advantage_groups(advantages: Tensor, group_ids: Sequence[Hashable]) -> float:
    """Share of groups g with max_{i in g} |A_i| <= ``ZERO_ADVANTAGE_EPS``:  #{g : A = 0 on all of g} / #groups.

    ``advantages``: (N,) per step sample; ``group_ids``: (N,) the GRPO group of each. 0 for an empty batch."""
    worst: dict[Hashable, float] = {}
    for g, a in zip(group_ids, advantages.detach().abs().tolist(), strict=True):
        worst[g] = max(worst.get(g, 0.0), a)
    return sum(v <= ZERO_ADVANTAGE_EPS for v in worst.values()) / len(worst) if worst else 0.0


def action_char_span(text: str, action: str) -> tuple[int, int] | None:
    """[start, end) of the last occurrence of ``action`` in ``text`` (case-insensitive), or None. Every
    environment's answer format puts the action last (``"action": "12"``, ``<action>up</action>``)."""
    if not action.strip():
        return None
    start = text.lower().rfind(action.lower())
    return None if start < 0 else (start, start + len(action))


def _first(n: int, pred: Callable[[int], bool]) -> int:
    """Smallest k in [0, n] with pred(k) (pred monotone: False ... False True ... True); n + 1 if none."""
    lo, hi = 0, n + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if mid <= n and pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def decision_span(ids: Sequence[int], action: str, decode: Callable[[list[int]], str]) -> tuple[int, int]:
    """[a, b) token positions of ``ids`` whose text overlaps the action's characters in ``decode(ids)``:
    a = the first token whose prefix text reaches past the span's start, b = the first prefix that covers its
    end (binary searches over prefix decodes, O(log T) decodes). ``NO_SPAN`` when there is no action."""
    ids = list(ids)
    span = action_char_span(decode(ids), action)
    if span is None:
        return NO_SPAN
    start, end = span
    n = len(ids)
    a = _first(n, lambda k: len(decode(ids[:k])) > start) - 1
    b = _first(n, lambda k: len(decode(ids[:k])) >= end)
    a, b = max(a, 0), min(b, n)
    return (a, b) if b > a else NO_SPAN


def span_mask(spans: Sequence[tuple[int, int]], width: int) -> Tensor:
    """(B, width) float mask, 1 on positions [a, b) of each row's span."""
    out = torch.zeros((len(spans), width), dtype=torch.float32)
    for row, (a, b) in enumerate(spans):
        out[row, a:min(b, width)] = 1.0
    return out


def split_sums(teacher: Tensor, student: Tensor, active: Tensor, decision: Tensor,
               beta: float | None = None) -> dict[str, float]:
    """Sums over active tokens of delta = l^T - l (and of g = sigmoid(beta delta) when ``beta`` is given), and
    their counts, for decision tokens (active * decision) and format tokens (active * (1 - decision)).
    All (B, T); sums, not means, so that ``pooled_split`` gets the exact token-means over micro-batches."""
    delta = teacher - student
    out: dict[str, float] = {}
    for split, where in zip(SPLITS, (decision, 1.0 - decision)):
        m = active * where
        out[f"split_sum/gap_{split}"] = float((delta * m).sum())
        out[f"split_tokens/{split}"] = float(m.sum())
        if beta is not None:
            out[f"split_sum/gate_{split}"] = float((torch.sigmoid(beta * delta) * m).sum())
    return out


def pooled_split(metrics: dict[str, float], prefix: str = "rl/") -> dict[str, float]:
    """Pop ``<prefix>split_*`` (pooled sums) and return ``<prefix>teacher_gap_<split>`` and ``<prefix>gate_<split>``
    (token-means; 0 without such a token) and ``<prefix>decision_token_share`` (decision / all active tokens)."""
    out: dict[str, float] = {}
    counts = {s: metrics.pop(f"{prefix}split_tokens/{s}", None) for s in SPLITS}
    for split in SPLITS:
        n = counts[split]
        for kind, name in (("gap", "teacher_gap"), ("gate", "gate")):
            total = metrics.pop(f"{prefix}split_sum/{kind}_{split}", None)
            if total is not None and n is not None:
                out[f"{prefix}{name}_{split}"] = total / n if n > 0 else 0.0
    if all(counts[s] is not None for s in SPLITS):
        both = counts["decision"] + counts["format"]
        out[f"{prefix}decision_token_share"] = counts["decision"] / both if both > 0 else 0.0
    return out


def grad_norm(parameters: Sequence[torch.nn.Parameter]) -> float:
    """sqrt(sum over parameters of ||p.grad||^2); parameters without a gradient count 0."""
    total = sum(float(p.grad.detach().float().pow(2).sum()) for p in parameters if p.grad is not None)
    return total ** 0.5


OUTCOMES = ("success", "failure")


def gap_sums_by_outcome(teacher: torch.Tensor, student: torch.Tensor, active: torch.Tensor,
                        success: torch.Tensor) -> dict[str, float]:
    """Sums of the teacher-student gap l^T - l over active tokens, and their counts, split by the outcome of
    each row's episode. ``teacher``/``student``/``active``: (B, T); ``success``: (B,) bool. Sums (not means)
    so that ``teacher_gap_by_outcome`` can pool them exactly over micro-batches and ranks."""
    out: dict[str, float] = {}
    for outcome, rows in zip(OUTCOMES, (success, ~success)):
        m = active * rows.to(active.dtype).unsqueeze(1)
        out[f"gap_sum/{outcome}"] = float(((teacher - student) * m).sum())
        out[f"gap_tokens/{outcome}"] = float(m.sum())
    return out


def teacher_gap_by_outcome(metrics: dict[str, float]) -> dict[str, float]:
    """Pop the pooled ``rl/gap_sum/*`` and ``rl/gap_tokens/*`` and return ``rl/teacher_gap_<outcome>`` (mean
    l^T - l per token; 0 when no such token) and ``rl/teacher_tokens_<outcome>`` (average per micro-batch,
    so the ratio of the two pooled means is the exact token-mean)."""
    out: dict[str, float] = {}
    for outcome in OUTCOMES:
        total = metrics.pop(f"rl/gap_sum/{outcome}", None)
        tokens = metrics.pop(f"rl/gap_tokens/{outcome}", None)
        if total is None or tokens is None:
            continue
        out[f"rl/teacher_gap_{outcome}"] = total / tokens if tokens > 0 else 0.0
        out[f"rl/teacher_tokens_{outcome}"] = tokens
    return out
