"""log p(y) of given targets without materialising the (N, V) log-softmax (``seed_core.trainer.logprobs`` uses it).

``selective_log_softmax`` projects hidden states ``LOGPROB_CHUNK_TOKENS`` rows at a time through the head and keeps
only log p(y) (and the entropy), recomputing a chunk's logits in the backward pass; ``SelectiveHead`` puts it in
place of a model's plain linear head for one forward call; ``logits_log_softmax`` does the same over logits a model
returned. All equal ``log_softmax(logits)[y]`` up to float rounding (tests/unit/trainer/test_selective_logprobs.py).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

LOGPROB_CHUNK_TOKENS = 512
"""Response tokens whose vocabulary row is alive at once (512 x 49,152 fp32 logits = 100 MB for SmolLM2)."""


class _SelectiveLogSoftmax(torch.autograd.Function):
    """log p(y) and entropy of ``softmax(h W^T + b)`` rows, chunk by chunk, never holding all logits.

    Forward, per chunk of rows (z: (c, V) logits, recomputed in backward instead of saved):
        lse = logsumexp(z) ;  l = z[y] - lse ;  H = lse - sum_v p_v z_v      (p = softmax(z))
    Backward (g_l, g_H: upstream gradients of l and H):
        dz = g_l (onehot(y) - p) - g_H p (z - sum_v p_v z_v)
        dh = dz W ;  dW = dz^T h ;  db = sum_rows dz
    """

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                targets: torch.Tensor, with_entropy: bool, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = hidden.shape[0]
        logp = torch.empty(n, dtype=torch.float32, device=hidden.device)
        entropy = torch.zeros(n, dtype=torch.float32, device=hidden.device)
        for s in range(0, n, chunk):
            z = F.linear(hidden[s:s + chunk], weight, bias).float()  # (c, V)
            lse = torch.logsumexp(z, dim=-1)
            logp[s:s + chunk] = z.gather(-1, targets[s:s + chunk, None]).squeeze(-1) - lse
            if with_entropy:
                entropy[s:s + chunk] = lse - (torch.softmax(z, dim=-1) * z).sum(-1)
            del z
        ctx.save_for_backward(hidden, weight, bias, targets)
        ctx.with_entropy, ctx.chunk = with_entropy, chunk
        return logp, entropy

    @staticmethod
    def backward(ctx: Any, g_logp: torch.Tensor, g_entropy: torch.Tensor) -> tuple[Any, ...]:
        hidden, weight, bias, targets = ctx.saved_tensors
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        d_hidden = torch.zeros_like(hidden) if need_h else None
        d_weight = torch.zeros_like(weight, dtype=torch.float32) if need_w else None
        d_bias = torch.zeros_like(bias, dtype=torch.float32) if need_b and bias is not None else None
        for s in range(0, hidden.shape[0], ctx.chunk):
            h = hidden[s:s + ctx.chunk]
            z = F.linear(h, weight, bias).float()  # (c, V)
            p = torch.softmax(z, dim=-1)
            dz = -p * g_logp[s:s + ctx.chunk, None]
            dz.scatter_add_(-1, targets[s:s + ctx.chunk, None], g_logp[s:s + ctx.chunk, None])
            if ctx.with_entropy:
                mean_z = (p * z).sum(-1, keepdim=True)
                dz -= g_entropy[s:s + ctx.chunk, None] * p * (z - mean_z)
            del z, p
            if d_hidden is not None:
                d_hidden[s:s + ctx.chunk] = (dz.to(weight.dtype) @ weight).to(hidden.dtype)
            if d_weight is not None:
                d_weight += dz.T @ h.float()
            if d_bias is not None:
                d_bias += dz.sum(0)
        return (d_hidden, None if d_weight is None else d_weight.to(weight.dtype),
                None if d_bias is None else d_bias.to(bias.dtype), None, None, None)


def selective_log_softmax(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                          targets: torch.Tensor, *, with_entropy: bool = False,
                          chunk: int = LOGPROB_CHUNK_TOKENS) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``log_softmax(h W^T + b)[y]`` for (N, H) rows ``hidden`` and (N,) ``targets`` -> (N,) fp32, and the
    entropy (N,) when asked, with at most ``chunk`` rows of (chunk, V) logits alive at once, forward and
    backward (formulas in ``_SelectiveLogSoftmax``)."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1 row, got {chunk}")
    logp, entropy = _SelectiveLogSoftmax.apply(hidden, weight, bias, targets, with_entropy, chunk)
    return logp, entropy if with_entropy else None


def logits_log_softmax(logits: torch.Tensor, targets: torch.Tensor, *, with_entropy: bool,
                        chunk: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The same for given (N, V) logits: ``z[y] - logsumexp(z)`` per chunk of rows, without a log_softmax copy."""
    logps, entropies = [], []
    for s in range(0, logits.shape[0], chunk):
        z = logits[s:s + chunk].float()
        lse = torch.logsumexp(z, dim=-1)
        logps.append(z.gather(-1, targets[s:s + chunk, None]).squeeze(-1) - lse)
        if with_entropy:
            entropies.append(lse - (torch.softmax(z, dim=-1) * z).sum(-1))
    empty = logits.new_zeros(0, dtype=torch.float32)
    logp = torch.cat(logps) if logps else empty
    return logp, (torch.cat(entropies) if entropies else empty) if with_entropy else None


class SelectiveHead(torch.nn.Module):
    """Stands in for a plain ``lm_head`` during one forward call: instead of (B, T + 1, V) logits it returns
    (B, T, 2) = [log p(response token j), entropy at j] on ``mask`` positions (0 elsewhere). Called inside
    the model's forward, so DDP/FSDP wrappers see the head's weights used as usual."""

    def __init__(self, head: torch.nn.Linear, targets: torch.Tensor, mask: torch.Tensor, with_entropy: bool,
                 chunk: int) -> None:
        super().__init__()
        self.head = head
        self.targets, self.mask, self.with_entropy, self.chunk = targets, mask.bool(), with_entropy, chunk

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:  # hidden: (B, T + 1, H)
        states = hidden[:, :-1]  # (B, T, H): position j predicts response token j
        weight, bias = self.head.weight, self.head.bias
        if hasattr(weight, "full_tensor"):  # an FSDP2 DTensor outside its unshard window
            weight = weight.full_tensor()
            bias = bias.full_tensor() if bias is not None else None
        logp, entropy = selective_log_softmax(states[self.mask], weight, bias, self.targets[self.mask],
                                              with_entropy=self.with_entropy, chunk=self.chunk)
        # masked_scatter keeps an all-padding batch connected to the graph (a zero, differentiable loss)
        full_logp = logp.new_zeros(self.mask.shape).masked_scatter(self.mask, logp)
        full_ent = logp.new_zeros(self.mask.shape)
        if entropy is not None:
            full_ent = full_ent.masked_scatter(self.mask, entropy)
        return torch.stack([full_logp, full_ent], dim=-1)
