"""The stage chain run through the engine alone (no Prefect, no DVC): collect -> annotate -> sft -> rl -> eval.

The last stage also runs as ``python -m seed_core.stages.evaluate --config resolved_config.json`` in a subprocess.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from seed_core.config import SeedConfig
from seed_core.runtime.io import read_records
from seed_core.loader import with_overrides
from seed_core.stages.annotate import run_annotate
from seed_core.stages.collect import run_collect
from seed_core.stages.evaluate import run_evaluate
from seed_core.stages.rl import finalize_rl, run_rl
from seed_core.stages.sft import run_sft
from seed_core.types import AnnotationRecord, EvalRecord, StepRecord

ROOT = Path(__file__).resolve().parents[2]


def test_stage_chain_on_tiny_model(tiny_model_dir, tmp_path):
    cfg = with_overrides(SeedConfig(), {
        "model.path": str(tiny_model_dir), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 2,
        "collect.num_tasks": 2, "collect.group_size": 2, "collect.expert_episodes": 1, "sft.epochs": 1,
        "sft.include_expert": True, "rl.algorithm": "grpo", "rl.rounds": 2, "rl.tasks_per_round": 1,
        "rl.group_size": 2, "generation.max_new_tokens": 8, "generation.max_prompt_tokens": 256,
        "sft.max_length": 256, "eval.num_tasks": 2, "eval.splits": ["test"],
    })
    collect = run_collect(cfg, tiny_model_dir, tmp_path / "collect")
    assert collect["collect/episodes"] == 4 and collect["expert/success_rate"] == 1.0
    trajs = read_records(tmp_path / "collect" / "trajectories.parquet", StepRecord)
    assert {r.policy_version for r in trajs} == {"base"}

    notes = run_annotate(cfg, tmp_path / "collect", tmp_path / "annotate")
    assert notes["annotate/ok"] == 4 and notes["annotate/sft_examples"] == 4
    assert all(a.ok and a.client == "oracle" for a in read_records(tmp_path / "annotate" / "annotations.parquet",
                                                                   AnnotationRecord))

    sft = run_sft(cfg, tiny_model_dir, tmp_path / "annotate", tmp_path / "sft", collect_dir=tmp_path / "collect")
    assert sft["sft/analyzer_examples"] == 4 and sft["sft/examples"] > 4  # + expert steps
    assert (tmp_path / "sft" / "loss.csv").read_text().startswith("step,loss\n")

    summary = run_rl(cfg, tmp_path / "sft" / "checkpoint", tmp_path / "rl")
    assert summary["algorithm_rounds"] == 2
    assert not (tmp_path / "rl" / "round_000" / "checkpoint").exists(), "superseded checkpoints are pruned"
    assert (tmp_path / "rl" / "checkpoint" / "config.json").is_file()
    assert (tmp_path / "rl" / "curve.csv").read_text().count("\n") == 3
    assert finalize_rl(cfg, tmp_path / "rl") == summary

    ev = run_evaluate(cfg, tmp_path / "rl" / "checkpoint", tmp_path / "eval", method="grpo")
    rows = read_records(tmp_path / "eval" / "episodes.parquet", EvalRecord)
    assert ev["eval/episodes"] == 2 and len(rows) == 2 and {r.split for r in rows} == {"test"}

    resolved = tmp_path / "rl" / "resolved_config.json"
    out = subprocess.run(
        [sys.executable, "-m", "seed_core.stages.evaluate", "--config", str(resolved), "--checkpoint",
         str(tmp_path / "rl" / "checkpoint"), "--method", "grpo", "--out", str(tmp_path / "eval_cli")],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    cli_metrics = json.loads((tmp_path / "eval_cli" / "metrics.json").read_text())
    assert cli_metrics["eval/success_rate"] == ev["eval/success_rate"]  # same seeds, same policy
