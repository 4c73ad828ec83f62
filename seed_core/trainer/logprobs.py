"""Per-token log-probabilities of given response tokens under given prompts (student, teacher, reference).

A sequence is ``prompt_ids + response_ids``. Prompts are left-padded and responses right-padded into
one (B, P + T) batch, so response position ``j`` of every row sits at column ``P + j`` and is predicted
by the logits at ``P + j - 1``. Only the last ``T + 1`` positions reach the vocabulary projection
(``logits_to_keep``), which keeps it off the (long) prompts.

Memory: for models whose head is a plain linear layer applied as ``lm_head(hidden)``
(``PLAIN_HEAD_MODEL_TYPES``) the (B, T, V) logits are never materialised: the head is swapped, for the
one forward call, for ``SelectiveHead``, which projects ``LOGPROB_CHUNK_TOKENS`` response positions at a
time and keeps only ``log p(y)`` (and the entropy), recomputing a chunk's logits in the backward pass
(``selective_log_softmax``). Other models return their (B, T, V) logits and get the same selective
log-softmax over them (no full log_softmax copy). Both equal ``log_softmax(logits)[y]`` up to float
rounding (tests/unit/trainer/test_selective_logprobs.py).

The teacher pass re-scores *exactly the sampled response ids* under a different (skill-augmented)
prompt: callers pass the same ``response_ids`` with other ``prompt_ids``.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import torch
import torch.nn.functional as F

from seed_core.rollout.batch_plan import MIN_BATCH_ROWS, unique_rows
from seed_core.trainer.selective import LOGPROB_CHUNK_TOKENS, SelectiveHead, logits_log_softmax, selective_log_softmax

if TYPE_CHECKING:
    from seed_core.trainer.distributed import Collective

FULL_LOGITS_MAX = 1 << 22
"""At most this many (B x T x V) response logits (16 MB fp32) are computed in full with ``log_softmax``: nothing to
save there, and the result is bit for bit that of the full-vocabulary implementation, which keeps the testbed
(vocabulary ~1k) on the numbers it was measured with. SmolLM2 (V = 49,152) passes it at 2 x 43 tokens."""

PLAIN_HEAD_MODEL_TYPES = frozenset({"llama", "qwen2", "qwen3", "mistral"})
"""Model types whose forward computes ``logits = self.lm_head(hidden[:, -logits_to_keep:])`` and nothing
more (no soft-capping or logit scaling; checked in transformers 5.24), so the head can be swapped."""


@dataclass(frozen=True)
class SequenceBatch:
    input_ids: torch.Tensor  # (B, P + T)
    attention_mask: torch.Tensor  # (B, P + T)
    position_ids: torch.Tensor  # (B, P + T)
    response_ids: torch.Tensor  # (B, T)
    response_mask: torch.Tensor  # (B, T) float
    prompt_len: int  # P


def pack_sequences(
    prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], pad_id: int
) -> SequenceBatch:
    """Left-pad prompts and right-pad responses into one batch (shapes in ``SequenceBatch``)."""
    if len(prompt_ids) != len(response_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
    if not prompt_ids:
        raise ValueError("cannot pack an empty batch")
    P = max(len(p) for p in prompt_ids)
    T = max(1, max(len(r) for r in response_ids))
    B = len(prompt_ids)
    input_ids = torch.full((B, P + T), pad_id, dtype=torch.long)
    attention = torch.zeros((B, P + T), dtype=torch.long)
    resp = torch.full((B, T), pad_id, dtype=torch.long)
    resp_mask = torch.zeros((B, T), dtype=torch.float32)
    for i, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        input_ids[i, P - len(p):P] = torch.tensor(p, dtype=torch.long)
        attention[i, P - len(p):P] = 1
        if r:
            input_ids[i, P:P + len(r)] = torch.tensor(r, dtype=torch.long)
            attention[i, P:P + len(r)] = 1
            resp[i, :len(r)] = torch.tensor(r, dtype=torch.long)
            resp_mask[i, :len(r)] = 1.0
    position_ids = (attention.cumsum(dim=1) - 1).clamp(min=0)
    return SequenceBatch(input_ids, attention, position_ids, resp, resp_mask, P)


class PrefixedHead(torch.nn.Module):
    """The head of a shared-prefix continuation pass (``shared_response_logprobs``): ``head(cat(prefix, hidden))``.
    ``prefix`` (B, 1, H) is each row's last prompt state, which predicts response token 0; the pass's own hidden
    states (B, T, H) predict tokens 1.. (the last one predicts past the response and is dropped by ``head``'s
    caller), so ``head`` sees the (B, T + 1, H) of an unshared forward with ``logits_to_keep = T + 1``."""

    def __init__(self, head: torch.nn.Module, prefix: torch.Tensor) -> None:
        super().__init__()
        self.head, self.prefix = head, prefix

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([self.prefix.to(hidden.dtype), hidden], dim=1))


class _HiddenStates(torch.nn.Module):
    """The head of a prefix pass: the final hidden states, unprojected (``PrefixedHead`` projects them later)."""

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The HF model inside DDP / FSDP1 wrappers (``.module``); PEFT models forward attribute lookups."""
    while isinstance(getattr(model, "module", None), torch.nn.Module):
        model = model.module
    return model


def _plain_head(model: torch.nn.Module) -> torch.nn.Linear | None:
    """The output projection when it may be swapped for ``SelectiveHead`` (see ``PLAIN_HEAD_MODEL_TYPES``)."""
    inner = _unwrap(model)
    config = getattr(inner, "config", None)
    get_head = getattr(inner, "get_output_embeddings", None)
    if getattr(config, "model_type", None) not in PLAIN_HEAD_MODEL_TYPES or get_head is None:
        return None
    head = get_head()
    return head if type(head) is torch.nn.Linear else None  # noqa: E721 (a LoRA-wrapped head is not plain)


@contextmanager
def _swapped_head(model: torch.nn.Module, head: torch.nn.Module) -> Iterator[None]:
    inner = _unwrap(model)
    original = inner.get_output_embeddings()
    inner.set_output_embeddings(head)
    try:
        yield
    finally:
        inner.set_output_embeddings(original)


def _full_logits(model: torch.nn.Module, rows: int, response_len: int) -> bool:
    """Whether ``response_logprobs`` computes all (rows, response_len, V) logits (``FULL_LOGITS_MAX``)."""
    vocab = getattr(getattr(_unwrap(model), "config", None), "vocab_size", None)
    return vocab is not None and rows * response_len * vocab <= FULL_LOGITS_MAX


def _forward(model: torch.nn.Module, inputs: dict[str, Any], head: torch.nn.Module | None) -> torch.Tensor:
    """``model(**inputs).logits`` with ``head`` in place of the output projection for this call (None: its own)."""
    if head is None:
        return model(**inputs).logits
    with _swapped_head(model, head):
        return model(**inputs).logits


def _logprobs_of(model: torch.nn.Module, inputs: dict[str, Any], targets: torch.Tensor, mask: torch.Tensor,
                 with_entropy: bool, prefix: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The forward of ``inputs`` and the log-probs of ``targets`` (B, T) on ``mask``: full logits, the selective head
    or the chunked one (``response_logprobs``). ``prefix`` (B, 1, H): hidden states placed before the forward's own
    by ``PrefixedHead`` (the shared-prefix continuation pass; needs a plain head, ``can_share_prefix``)."""
    head = _plain_head(model)
    wrap = (lambda h: PrefixedHead(h, prefix)) if prefix is not None else (lambda h: h)
    if _full_logits(model, targets.shape[0], targets.shape[1]):
        logits = _forward(model, inputs, wrap(head) if prefix is not None else None)[:, :-1, :].float()  # (B, T, V)
        logp_all = F.log_softmax(logits, dim=-1)
        logprobs = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1) * mask
        entropy = -(logp_all.exp() * logp_all).sum(-1) * mask if with_entropy else None
    elif head is not None:
        both = _forward(model, inputs, wrap(SelectiveHead(head, targets, mask, with_entropy, LOGPROB_CHUNK_TOKENS)))
        logprobs, entropy = both[..., 0], both[..., 1] if with_entropy else None  # (B, T, 2) -> (B, T) each
    else:
        logits = model(**inputs).logits[:, :-1, :]  # (B, T, V): row j predicts response token j
        sel = mask.bool()
        lp, ent = logits_log_softmax(logits[sel], targets[sel], with_entropy=with_entropy,
                                      chunk=LOGPROB_CHUNK_TOKENS)
        logprobs = lp.new_zeros(sel.shape).masked_scatter(sel, lp)
        entropy = ent.new_zeros(sel.shape).masked_scatter(sel, ent) if ent is not None else None
    return logprobs, entropy


def response_logprobs(
    model: torch.nn.Module, batch: SequenceBatch, *, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(y_j | prompt, y_<j) for every response token, (B, T) fp32; optional entropy (B, T).

        l_j = z_j[y_j] - logsumexp(z_j) ;  H_j = logsumexp(z_j) - sum_v softmax(z_j)_v z_jv
    (z_j: the logits at position P + j - 1). Gradients flow when called outside ``torch.no_grad``;
    padding positions hold 0. The (B, T, V) logits are not materialised (module docstring) unless they
    are small (``FULL_LOGITS_MAX``): then ``log_softmax`` over all of them, as the full-vocabulary code did.
    """
    device = next(model.parameters()).device
    T = batch.response_ids.shape[1]
    inputs = dict(input_ids=batch.input_ids.to(device), attention_mask=batch.attention_mask.to(device),
                  position_ids=batch.position_ids.to(device), logits_to_keep=T + 1, use_cache=False)
    return _logprobs_of(model, inputs, batch.response_ids.to(device), batch.response_mask.to(device), with_entropy)


def can_share_prefix(model: torch.nn.Module) -> bool:
    """Whether ``shared_response_logprobs`` can run on ``model``: its head is plain (``PLAIN_HEAD_MODEL_TYPES``: the
    head is swapped in both passes) and its KV cache all plain layers (``rollout.kv_cache.prefix_cache``)."""
    from seed_core.rollout.kv_cache import prefix_cache  # transformers (0.8 s to import): loaded with the model

    return _plain_head(model) is not None and prefix_cache(_unwrap(model).config) is not None


@contextmanager
def _cache_kept(model: torch.nn.Module) -> Iterator[None]:
    """transformers' checkpointed layers drop the cache of a forward unless they declare ``_can_checkpoint_with_cache``
    (a replay must not write twice); the shared-prefix caches are safe under replay (``WriteOnceLayer``,
    ``ReadOnlyLayer``), so every such layer declares it for the call."""
    layers = [m for m in model.modules() if hasattr(m, "_can_checkpoint_with_cache")]
    for layer in layers:
        layer._can_checkpoint_with_cache = True
    try:
        yield
    finally:
        for layer in layers:
            del layer._can_checkpoint_with_cache  # the class's own value again


def shared_response_logprobs(
    model: torch.nn.Module, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], pad_id: int,
    *, with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """``response_logprobs`` of rows whose prompts repeat (a GRPO group: one prompt, G responses), each distinct
    prompt computed once. Returns (B, T) log-probs, entropy or None, and the (B, T) response mask.

    Two forwards: the U distinct prompts, left-padded to P, keeping their keys and values (``WriteOnceLayer``) and
    with the head replaced by ``_HiddenStates`` (the last prompt state h_P of each, which predicts response token 0);
    the cache's rows are indexed to the B rows (``inverse``) and the B responses, right-padded to T, run as its
    continuation (``ReadOnlyLayer``) at positions len(prompt) + j, attending to [the row's prompt mask, its response
    mask]; ``PrefixedHead`` puts h_P before their states, so the log-probs are those of ``response_logprobs`` on the
    packed rows up to float order (the attention reads the prompt's keys from the cache: other GEMM shapes). Under
    activation checkpointing the backward replays both passes with the same caches (``_cache_kept``).

    Why the gradients are the same as G separate rows: the prompt's activations a(theta) are one function of theta
    for every row of the group, so d/dtheta sum_g L_g(a(theta), theta) = sum_g [dL_g/da da/dtheta + dL_g/dtheta]:
    the backward of the cache indexing sums the G rows' gradients into the one prompt, exactly the sum the G copies'
    prompt passes would have added to theta's gradient. The continuation reads the prompt through detached leaves
    (``_backward_boundary``): its backward accumulates its share of every weight's gradient at once, and the
    prompt's backward follows from the leaves' gradients, so no weight's gradient waits in the engine for its second
    use (measured: 425 MB of held weight gradients on SmolLM2, one group of 8). Only on one process in the update
    (DDP and FSDP expect one forward per backward) and with ``can_share_prefix``."""
    from seed_core.rollout.kv_cache import continuation_cache, prefix_cache  # transformers: loaded with the model

    device = next(model.parameters()).device
    config = _unwrap(model).config
    firsts, inverse = unique_rows([tuple(p) for p in prompt_ids])  # the distinct prompts, each row's one
    prompts = pack_sequences([prompt_ids[i] for i in firsts], [[] for _ in firsts], pad_id)  # (U, P + 1)
    P = prompts.prompt_len
    p_mask = prompts.attention_mask[:, :P].to(device)
    cache = prefix_cache(config)
    with _swapped_head(model, _HiddenStates()), _cache_kept(model):
        last = model(input_ids=prompts.input_ids[:, :P].to(device), attention_mask=p_mask, cache=cache,
                     position_ids=prompts.position_ids[:, :P].to(device), use_cache=True, logits_to_keep=1).logits
    *kv, last = _backward_boundary([t for layer in cache.layers for t in (layer.keys, layer.values)] + [last])
    rows = torch.tensor(inverse, device=device)
    responses = pack_sequences([[] for _ in response_ids], response_ids, pad_id)  # (B, 0 + T): responses only
    T = responses.response_ids.shape[1]
    mask = responses.response_mask.to(device)
    prompt_len = p_mask.sum(dim=1)[rows]  # (B,)
    inputs = dict(input_ids=responses.response_ids.to(device),
                  attention_mask=torch.cat([p_mask[rows], responses.attention_mask.to(device)], dim=1),
                  position_ids=prompt_len[:, None] + torch.arange(T, device=device),
                  cache=continuation_cache(config, list(zip(kv[::2], kv[1::2])), rows), use_cache=True,
                  logits_to_keep=T)
    with _cache_kept(model):
        logprobs, entropy = _logprobs_of(model, inputs, responses.response_ids.to(device), mask, with_entropy,
                                         prefix=last[rows])
    return logprobs, entropy, mask


def _backward_boundary(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Detached leaves standing for the prefix pass's outputs ``tensors`` in the continuation pass; once a backward
    has all the leaves' gradients g, it runs the prefix pass's backward from them: backward(tensors, g), nested.
    The sum of gradients is the one graph's, only in two sweeps. A weight used by both passes would otherwise have
    its first gradient held by the autograd engine until the prefix's backward reaches it (all of the model's
    linear weights at once). ``tensors`` unchanged when no gradient is recorded (the no-grad scoring passes)."""
    if not torch.is_grad_enabled() or not any(t.requires_grad for t in tensors):
        return tensors
    leaves = [t.detach().requires_grad_() for t in tensors]

    def prefix_backward(grads: Sequence[torch.Tensor | None]) -> None:
        pairs = [(t, g) for t, g in zip(tensors, grads) if g is not None and t.requires_grad]
        torch.autograd.backward([t for t, _ in pairs], [g for _, g in pairs])

    torch.autograd.graph.register_multi_grad_hook(leaves, prefix_backward)
    return leaves


def _chunks(prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], micro_batch_size: int,
            max_tokens: int, share_prefix: bool) -> list[list[int]]:
    """Row indices of each forward pass of ``score_in_chunks``: at most ``micro_batch_size`` rows and, when
    ``max_tokens > 0``, at most that many padded tokens (a single longer row gets a pass of its own). Unshared:
    rows by ascending length, a pass costs rows x its longest row. ``share_prefix``: rows by prompt length, then
    prompt, then response length (a group's rows side by side), a pass costs distinct prompts x the longest prompt
    + rows x the longest response (the two forwards of ``shared_response_logprobs``)."""
    if share_prefix:
        order = sorted(range(len(prompt_ids)), key=lambda i: (len(prompt_ids[i]), tuple(prompt_ids[i]),
                                                              len(response_ids[i])))
    else:
        order = sorted(range(len(prompt_ids)), key=lambda i: len(prompt_ids[i]) + len(response_ids[i]))

    def cost(rows: list[int]) -> int:
        if not share_prefix:
            return len(rows) * max(len(prompt_ids[i]) + len(response_ids[i]) for i in rows)
        distinct = len({tuple(prompt_ids[i]) for i in rows})
        return distinct * max(len(prompt_ids[i]) for i in rows) + len(rows) * max(len(response_ids[i]) for i in rows)

    chunks: list[list[int]] = []
    for i in order:
        over = max_tokens > 0 and bool(chunks) and cost(chunks[-1] + [i]) > max_tokens
        full = chunks and (len(chunks[-1]) >= micro_batch_size or over)
        if not chunks or full:
            chunks.append([])
        chunks[-1].append(i)
    return chunks


@torch.no_grad()
def score_in_chunks(
    model: torch.nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    response_ids: Sequence[Sequence[int]],
    pad_id: int,
    micro_batch_size: int,
    max_tokens: int = 0,
    comm: Collective | None = None,
    share_prefix: bool = False,
) -> list[torch.Tensor]:
    """Log-probs of each response (a 1-D tensor per sample, its own length), in micro-batches of at most
    ``micro_batch_size`` samples and ``max_tokens`` padded tokens (``_chunks``).
    A micro-batch on the full-logits path (``FULL_LOGITS_MAX``: the testbed) computes its equal (prompt, response)
    rows once, in its padded shape, which gives the numbers of scoring every copy (``seed_core.rollout.batch_plan``;
    bit for bit, measured on the testbed and the tiny test models at 1 and 2 threads). The chunked head of the
    other path is not row-count invariant on 2 threads (measured), so its micro-batches run every row.

    ``share_prefix`` (``rl.share_prefix``): a micro-batch whose rows repeat a prompt computes each prompt once
    (``shared_response_logprobs``, two forwards) when the model allows it (``can_share_prefix``).

    ``comm`` (several ranks, each scoring its own rows): every rank runs as many forward passes as the rank with the
    most, the extra ones on this rank's shortest row with the result dropped. FSDP all-gathers the shards in every
    forward, so ranks whose token budget cut their rows into different numbers of micro-batches would otherwise
    enter different collectives (the ALFWorld rehearsal's gloo abort, ``docs/gpu.md``)."""
    was_training = model.training
    model.eval()
    chunks = _chunks(prompt_ids, response_ids, micro_batch_size, max_tokens, share_prefix)
    share_prefix = share_prefix and can_share_prefix(model)  # once, not per pass: it walks the model's modules
    shared = [share_prefix and len({tuple(prompt_ids[i]) for i in idx}) < len(idx) for idx in chunks]
    forwards = len(chunks) + sum(shared)
    # agreed before any forward pass: a collective between one rank's passes would meet the other's all-gather
    padding = comm.max_int(forwards) - forwards if comm is not None else 0  # 0 on one process
    if padding and not chunks:
        raise ValueError("score_in_chunks across ranks needs at least one row on every rank (rank_slice pads)")
    result: list[torch.Tensor | None] = [None] * len(prompt_ids)
    for idx, share in zip(chunks, shared):
        if share:
            logprobs, _, _ = shared_response_logprobs(model, [prompt_ids[i] for i in idx],
                                                      [response_ids[i] for i in idx], pad_id)
            for row, i in enumerate(idx):
                result[i] = logprobs[row, : len(response_ids[i])].cpu()
            continue
        firsts = inverse = list(range(len(idx)))
        if _full_logits(model, len(idx), max(1, max(len(response_ids[i]) for i in idx))):  # equal rows once
            firsts, inverse = unique_rows([(tuple(prompt_ids[i]), tuple(response_ids[i])) for i in idx],
                                          MIN_BATCH_ROWS)
        rows = [idx[k] for k in firsts]
        batch = pack_sequences([prompt_ids[i] for i in rows], [response_ids[i] for i in rows], pad_id)
        logprobs, _ = response_logprobs(model, batch)
        for row, i in zip(inverse, idx):
            result[i] = logprobs[row, : len(response_ids[i])].cpu()
    shortest = chunks[0][0] if chunks else 0
    for _ in range(padding):  # forward passes for the collectives only: the shortest row again, result dropped
        response_logprobs(model, pack_sequences([prompt_ids[shortest]], [response_ids[shortest]], pad_id))
    model.train(was_training)
    return [r for r in result if r is not None]


def pad_rows(rows: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    """Stack 1-D tensors right-padded with zeros to (len(rows), width)."""
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, r in enumerate(rows):
        out[i, : r.numel()] = r
    return out
