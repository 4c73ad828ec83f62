"""One SFT step is the token-mean over all its examples, however they are cut into micro-batches."""

import torch

from seed_core.config import SFTConfig
from seed_core.trainer.sft import run_sft_loop

DATA = [([10, 11, 12], [40, 41]), ([13], [42, 43, 44, 45]), ([14, 15], [46]), ([16, 17], [47, 48, 49])]


def test_sft_step_does_not_depend_on_micro_batching(tiny_policy):
    model = tiny_policy.model
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    runs = []
    for batch, accum in ((4, 1), (1, 4), (2, 2)):
        model.load_state_dict(start)
        cfg = SFTConfig(epochs=1, lr=1e-2, batch_size=batch, grad_accum=accum, warmup_ratio=0.0)
        history = run_sft_loop(model, DATA, cfg, tiny_policy.tokenizer.pad_token_id, seed=0)
        assert len(history) == 1 and history[0]["sft/target_tokens"] == 10.0
        runs.append((history[0]["sft/loss"], history[0]["sft/grad_norm"],
                     [p.detach().clone() for p in model.parameters()]))
    model.load_state_dict(start)
    for loss, grad_norm, params in runs[1:]:
        assert abs(loss - runs[0][0]) < 1e-5 and abs(grad_norm - runs[0][1]) < 1e-4 * runs[0][1]
        # AdamW's first step is ~lr * sign(g): equal up to gradients within float noise of 0
        assert all(torch.allclose(a, b, atol=1e-3) for a, b in zip(params, runs[0][2]))
