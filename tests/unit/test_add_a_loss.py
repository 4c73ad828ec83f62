"""Adding a distillation loss with a coefficient of its own touches four files (CONTRIBUTING.md, "Add a loss"):
done here in a copy of the project, then the generators, then the trainer's term, the logged values and the keys
each stage reads are checked in a fresh interpreter of that copy.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("seed_core", "scripts", "presets", "configs", "params.yaml", "dvc.yaml")
HAND_EDITED = {"seed_core/losses/distill.py", "seed_core/registries.py", "seed_core/config.py", "params.yaml"}
GENERATED = ("presets/", "dvc.yaml")
"""What ``python scripts/make_presets.py`` and ``python scripts/dvc_deps.py --write`` rewrite."""

LOSS = '''

def half_opd_loss(inp: LossInputs) -> LossOutput:
    """Half the ungated OPD loss (a test's example): L = 0.5 * masked_mean(l^T - l^S, teacher tokens)."""
    loss, metrics = opd_loss(inp)
    return 0.5 * loss, metrics
'''

CHECK = '''
import torch
from seed_core.algorithms import ALGORITHMS, effective_values
from seed_core.lineage.stage_params import STAGE_PARAMS, algorithm_keys
from seed_core.loader import load_config
from seed_core.losses.types import LossInputs
from seed_core.trainer.compose import compose_loss

assert "rl.half_opd_coef" in algorithm_keys("seed") and "rl.half_opd_coef" in STAGE_PARAMS["rl"]
assert "rl.half_opd_coef" not in algorithm_keys("grpo") and "rl.half_opd_coef" not in algorithm_keys("skill_sd")
cfg = load_config("params.yaml", {"rl.distill_loss": "half_opd", "rl.half_opd_coef": 0.25})
student = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
inp = LossInputs(logprobs=student, old_logprobs=student.detach(), advantages=torch.zeros(1, 3),
                 mask=torch.tensor([[1.0, 1.0, 0.0]]), teacher_logprobs=torch.tensor([[-0.5, -1.0, -3.0]]),
                 teacher_mask=torch.tensor([1.0]))
term = compose_loss(inp, cfg=cfg.rl, algorithm=ALGORITHMS.get("seed")).distill_loss
# by hand: teacher minus student on the two masked tokens: (0.5 + 1.0) / 2 = 0.75; half of it, times 0.25
assert abs(float(term.detach()) - 0.25 * 0.5 * 0.75) < 1e-7, float(term.detach())
term.backward()
assert torch.allclose(student.grad, torch.tensor([[-0.0625, -0.0625, 0.0]])), student.grad
assert effective_values(cfg.rl, ALGORITHMS.get("seed"))["algo/lambda"] == 0.25
print("ok")
'''


def _digests(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def _insert_after(path: Path, anchor: str, text: str) -> None:
    source = path.read_text()
    assert source.count(anchor) == 1, (path, anchor)
    path.write_text(source.replace(anchor, anchor + text))


def _run(args: list[str], cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(cwd), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


def test_a_loss_with_its_own_coefficient_is_four_files(tmp_path: Path) -> None:
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, tmp_path / name)
    before = _digests(tmp_path)

    (tmp_path / "seed_core/losses/distill.py").write_text((tmp_path / "seed_core/losses/distill.py").read_text() + LOSS)
    _insert_after(tmp_path / "seed_core/registries.py", '''    "opd": LossEntry("seed_core.losses.distill:opd_loss", coef="rl.opd_coef"),\n''',
                  '''    "half_opd": LossEntry("seed_core.losses.distill:half_opd_loss", coef="rl.half_opd_coef"),\n''')
    _insert_after(tmp_path / "seed_core/config.py", "    opd_coef: float = Field(0.01, ge=0.0)\n",
                  "    half_opd_coef: float = Field(0.1, ge=0.0)\n")
    _insert_after(tmp_path / "params.yaml", "  opd_coef: 0.01\n", "  half_opd_coef: 0.1\n")
    _run(["scripts/make_presets.py"], tmp_path)
    _run(["scripts/dvc_deps.py", "--write"], tmp_path)

    after = _digests(tmp_path)
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert changed - {p for p in changed if p.startswith(GENERATED)} == HAND_EDITED
    assert "dvc.yaml" in changed  # the code stage's params list gained rl.half_opd_coef
    assert _run(["-c", CHECK], tmp_path).strip().endswith("ok")
