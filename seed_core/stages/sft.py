"""Stage 1c: fine-tune the backbone on the analyzer examples (and optional expert demonstrations).

    python -m seed_core.stages.sft --config params.yaml --model data/models/smollm2-135m-instruct \
        --annotate data/annotate --out data/sft
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from seed_core.analyzer.annotate import skills_by_traj
from seed_core.analyzer.sensitivity import skill_sensitivity
from seed_core.config import SeedConfig
from seed_core.data_gen.task_sets import read_tasks
from seed_core.envs import make_env
from seed_core.loader import config_from_args, stage_parser
from seed_core.modeling.models import load_policy, make_encoder
from seed_core.repro.numerics import write_resolved
from seed_core.rollout.collector import group_by_trajectory
from seed_core.runtime.io import DataFileError, atomic_write_text, read_records, write_json
from seed_core.skills.insert import insert_episode_skill
from seed_core.tracking import NullTracker, Tracker
from seed_core.trainer.scale import apply_lora, check_layout, make_accelerator, save_policy
from seed_core.trainer.sft import run_sft_loop, tokenize_examples
from seed_core.types import AnnotationRecord, StepRecord


def read_sft_examples(path: Path) -> list[tuple[str, str]]:
    if not Path(path).is_file():
        raise DataFileError(f"{path} does not exist; run the annotate stage first")
    examples = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        try:
            row = json.loads(line)
            examples.append((row["prompt"], row["target"]))
        except (json.JSONDecodeError, KeyError) as err:
            raise DataFileError(f"{path}:{n} is not a {{prompt, target}} JSON line ({err}); rerun annotate") from None
    return examples


def measure_skill_sensitivity(cfg: SeedConfig, model, tokenizer, encode, annotate_dir: Path,
                              collect_dir: Path) -> dict[str, float]:
    """Skill sensitivity of the trained checkpoint on the collected trajectories and their Stage-1 skills
    (``seed_core.analyzer.sensitivity``)."""
    trajectories = group_by_trajectory(read_records(collect_dir / "trajectories.parquet", StepRecord))
    skills = skills_by_traj(read_records(annotate_dir / "annotations.parquet", AnnotationRecord))
    return skill_sensitivity(model, tokenizer.pad_token_id, encode,
                             lambda text: tokenizer.encode(text, add_special_tokens=False), make_env(cfg.env),
                             trajectories, read_tasks(collect_dir / "tasks.json"), skills, insert_episode_skill,
                             micro_batch_size=cfg.rl.micro_batch_size)


def run_sft(cfg: SeedConfig, model_dir: Path, annotate_dir: Path, out_dir: Path, tracker: Tracker | None = None,
            collect_dir: Path | None = None) -> dict[str, float]:
    """Writes checkpoint/ (HF dir), loss.csv (step, loss) and metrics.json."""
    import torch

    tracker = tracker or NullTracker()
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    examples = read_sft_examples(Path(annotate_dir) / "sft_examples.jsonl")
    n_analyzer = len(examples)
    if not examples:  # expert demonstrations alone would not teach the analyzer format
        raise DataFileError(f"{Path(annotate_dir) / 'sft_examples.jsonl'} holds no examples: Stage 1 annotated no "
                            "trajectory; rerun the annotate stage (its metrics.json lists the failure reasons)")
    if cfg.sft.include_expert and collect_dir is not None:
        expert = read_records(Path(collect_dir) / "expert.parquet", StepRecord)
        if not expert and cfg.collect.expert_episodes > 0:
            raise DataFileError(f"{Path(collect_dir) / 'expert.parquet'} has 0 rows but collect.expert_episodes = "
                                f"{cfg.collect.expert_episodes}; rerun the collect stage")
        examples += [(r.prompt, r.response) for r in expert]
    for stale in ("metrics.json", "resolved_config.json", "loss.csv"):  # an interrupted run must not look done
        (out_dir / stale).unlink(missing_ok=True)
    torch.manual_seed(cfg.project.seed)
    accelerator = make_accelerator(cfg.model)
    check_layout(accelerator, cfg, generates=False)
    policy = load_policy(cfg.model, model_dir)
    model = apply_lora(policy.model, cfg.model)
    encode = make_encoder(policy.tokenizer, policy.chat_template_kwargs, cfg.generation.max_prompt_tokens)
    data = tokenize_examples(examples, encode, policy.tokenizer, cfg.sft.max_length)
    main = accelerator.is_main_process
    history = run_sft_loop(model, data, cfg.sft, policy.tokenizer.pad_token_id, seed=cfg.project.seed,
                           accelerator=accelerator,
                           on_step=lambda step, row: tracker.log_metrics(row, step=step) if main else None)
    # merged plain weights only: RL starts its own adapter on top (FSDP2 shards `model` in place)
    save_policy(accelerator, model, policy.tokenizer, out_dir / "checkpoint", keep_adapter=False)
    # every rank scores (the same rows, so the same passes): a sharded model's forward gathers from all ranks
    sensitivity = measure_skill_sensitivity(cfg, accelerator.unwrap_model(model), policy.tokenizer, encode,
                                            Path(annotate_dir), collect_dir) if collect_dir is not None else {}
    if not main:
        return {}
    atomic_write_text(out_dir / "loss.csv", "step,loss\n" + "".join(
        f"{i},{row['sft/loss']:.6f}\n" for i, row in enumerate(history)))
    metrics = {
        "sft/examples": float(len(examples)),
        "sft/analyzer_examples": float(n_analyzer),
        "sft/steps": float(len(history)),
        "sft/first_loss": history[0]["sft/loss"],
        "sft/final_loss": history[-1]["sft/loss"],
        **sensitivity,
        "time/sft_s": time.perf_counter() - t0,
    }
    write_json(out_dir / "metrics.json", metrics)
    write_resolved(cfg, out_dir / "resolved_config.json")  # with the numerics it ran under
    return metrics


def main() -> None:
    parser = stage_parser("Stage 1: SFT the policy into an analyzer of its own trajectories")
    parser.add_argument("--model", required=True)
    parser.add_argument("--annotate", required=True)
    parser.add_argument("--collect", default=None, help="collect dir (expert demonstrations when sft.include_expert)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    collect = Path(args.collect) if args.collect else None
    print(run_sft(config_from_args(args), Path(args.model), Path(args.annotate), Path(args.out), collect_dir=collect))


if __name__ == "__main__":
    main()
