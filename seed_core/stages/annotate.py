"""Stage 1b: annotate every collected trajectory with an episode-level hindsight skill.

    python -m seed_core.stages.annotate --config params.yaml --collect data/collect --out data/annotate

The client is ``annotate.client`` (``oracle`` offline, ``openai`` for any OpenAI-compatible endpoint). It is
built, and its endpoint checked, before any work. Trajectories go out ``annotate.concurrency`` at a time,
each worker thread with its own env and client; each finished annotation is appended at once to
``annotation_cache.jsonl`` (``seed_core.analyzer.cache``), so a killed run resumes and sends only what is
missing. Failures are recorded per trajectory (``parse_status = failed`` + reason); the stage fails
(``AnnotationQualityError``, naming the commonest failures) when the annotated share is below
``annotate.min_ok_fraction``, when the first ``annotate.fail_fast_after`` trajectories all failed the same way
(``FailFast``: stops before the rest are sent), and on empty inputs. Outputs: annotations.parquet, sft_examples.jsonl (analyzer-format SFT data) and metrics.json (counts,
failure reasons, SFT-data statistics: kept, dropped and why, lengths). With an MLflow tracker, the run names the
registered versions of the prompts it sends (``seed_core.tracing.use_prompts``) and each analyzer call is a trace
of it (``traced_llm_calls``).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from seed_core.analyzer.annotate import annotate_trajectories, sft_examples
from seed_core.analyzer.audit import skill_correct_metrics
from seed_core.analyzer.cache import AnnotationCache, analyzer_identity, answered, is_final, trajectory_key
from seed_core.analyzer.clients import AnalyzerSetupError, CLIENTS
from seed_core.analyzer.parse import skill_metrics
from seed_core.analyzer.prompts import PLACEHOLDER, PROMPT_VERSION, registry_prompts, registry_tags
from seed_core.config import ConfigError, SeedConfig
from seed_core.data_gen.task_sets import read_tasks
from seed_core.envs import make_env
from seed_core.loader import config_from_args, stage_errors, stage_parser
from seed_core.repro.numerics import write_resolved
from seed_core.rollout.collector import group_by_trajectory
from seed_core.runtime.io import DataFileError, KnownError, atomic_write_text, read_records, write_json, write_records
from seed_core.runtime.logs import Progress
from seed_core.skills.static import Note, aggregate, token_counter, type_statements
from seed_core.tracing import traced_llm_calls, use_prompts
from seed_core.tracking import NullTracker, Tracker
from seed_core.types import AnnotationRecord, StepRecord, Task

if TYPE_CHECKING:
    from seed_core.analyzer.cache import AnnotationCache
    from seed_core.analyzer.clients import AnalyzerClient
    from seed_core.envs.base import TextEnv

CACHE_FILE = "annotation_cache.jsonl"
"""Kept in the output directory across runs (not a DVC output of its own): the resume point."""

log = logging.getLogger(__name__)


class AnnotationQualityError(KnownError, RuntimeError):
    """Too few trajectories were annotated (``annotate.min_ok_fraction``); the message names the causes."""


@dataclass
class _Worker:
    """What one annotation thread owns: env (requests reset it) and client (the oracle uses the env)."""

    env: "TextEnv"
    client: "AnalyzerClient"


def _make_worker(cfg: SeedConfig) -> _Worker:
    env = make_env(cfg.env)
    return _Worker(env, CLIENTS.get(cfg.annotate.client)(cfg, env=env))


def run_annotate(cfg: SeedConfig, collect_dir: Path, out_dir: Path, tracker: Tracker | None = None) -> dict[str, float]:
    collect_dir, out_dir = Path(collect_dir), Path(out_dir)
    t0 = time.perf_counter()
    _check_prompt_version(cfg)
    trajectories = group_by_trajectory(read_records(collect_dir / "trajectories.parquet", StepRecord))
    if not trajectories:
        raise DataFileError(f"{collect_dir / 'trajectories.parquet'} has 0 rows: the collect stage produced no "
                            "trajectories; check collect.num_tasks / collect.group_size and rerun collect")
    tasks = read_tasks(collect_dir / "tasks.json")
    _check_tasks(trajectories, tasks, collect_dir / "tasks.json")
    probe = _make_worker(cfg)  # fails fast: no endpoint configured, endpoint unreachable, key rejected
    analyzer = analyzer_identity(cfg.annotate, probe.client.identity, getattr(probe.client, "url", ""))
    keys = {tid: trajectory_key(steps, cfg.annotate.prompt_version, analyzer) for tid, steps in trajectories.items()}
    for stale in ("sft_examples.jsonl", "resolved_config.json"):  # nothing looks finished until the check passed
        (out_dir / stale).unlink(missing_ok=True)
    with AnnotationCache(out_dir / CACHE_FILE) as cache:
        done = cache.load()
        missing = [tid for tid in trajectories if keys[tid] not in done]
        watch = FailFast(cfg, getattr(probe.client, "url", ""), len(missing))
        log.info("annotate: %d trajectories, %d cached, %d to annotate with %s", len(trajectories),
                 len(trajectories) - len(missing), len(missing), cfg.annotate.client)
        use_prompts(tracker or NullTracker(), registry_prompts(retry=cfg.annotate.parse_attempts > 1), registry_tags())
        with traced_llm_calls(tracker or NullTracker()):
            fresh = _annotate_missing(cfg, trajectories, tasks, missing, keys, cache, watch)
    annotations = [fresh[tid] if tid in fresh else done[keys[tid]] for tid in trajectories]
    examples = sft_examples(annotations)
    write_records(annotations, out_dir / "annotations.parquet", AnnotationRecord)  # the per-trajectory errors
    metrics = {
        **annotation_metrics(annotations),
        **sft_data_metrics(annotations, examples),
        # issue 25: the share of Stage-1 skills the environment's judge accepts (envs with a judge; the oracle: 1.0)
        **skill_correct_metrics(probe.env, annotations, [r for steps in trajectories.values() for r in steps], tasks,
                                "annotate"),
        "annotate/cached": float(len(trajectories) - len(missing)),
        "annotate/sent": float(len(missing)),
        "time/annotate_s": time.perf_counter() - t0,
    }
    write_json(out_dir / "metrics.json", {**metrics, "failure_reasons": failure_reasons(annotations)})
    (tracker or NullTracker()).log_metrics(metrics)
    check_ok_fraction(cfg, annotations, getattr(probe.client, "url", ""), out_dir)
    atomic_write_text(out_dir / "sft_examples.jsonl",
                      "".join(json.dumps({"prompt": p, "target": t}) + "\n" for p, t in examples))
    write_static_library(cfg, annotations, trajectories, out_dir / "static_skills", tasks, probe.env)
    write_resolved(cfg, out_dir / "resolved_config.json")  # with the numerics it ran under
    return metrics


def write_static_library(cfg: SeedConfig, annotations: list[AnnotationRecord],
                         trajectories: dict[str, list[StepRecord]], out: Path, tasks: dict[str, Task] | None = None,
                         env: "TextEnv | None" = None) -> Path:
    """The static skill library aggregated from these annotations (``seed_core.skills.static``: type-level
    statements within ``annotate.static_skill_tokens`` policy tokens, each episode's instance values, from the
    env's ``instance_values`` hook where it has one, summarized or dropped), rewritten from scratch so a removed
    task type leaves no file behind."""

    hook = getattr(env, "instance_values", None)
    values: dict[str, dict[str, str]] = {}
    grouped: dict[str, list[Note]] = {}
    for a in annotations:
        steps = trajectories.get(a.traj_id)
        if not a.ok or not steps:
            continue
        task_id = steps[0].task_id
        if task_id not in values:
            task = (tasks or {}).get(task_id)
            values[task_id] = dict(hook(task)) if hook is not None and task is not None else {}
        grouped.setdefault(steps[0].task_type, []).append(Note(a.episode_skill, task_id, steps[0].prompt,
                                                               values[task_id], steps[0].success))
    count, counted_by = token_counter(cfg)
    library = aggregate(grouped, cfg.annotate.static_skill_tokens, count)
    shutil.rmtree(out, ignore_errors=True)
    sizes = {t: count(library.skill_for(t)) for t in library.mapping}
    log.info("static skill library: %d task type(s), tokens per type %s (budget %d, counted by %s)",
             len(sizes), sizes, cfg.annotate.static_skill_tokens, counted_by)
    for task_type in sorted(t for t, n in sizes.items() if not n and grouped.get(t)):
        log.warning(empty_type_line(task_type, grouped[task_type], cfg.annotate.static_skill_tokens))
    return library.write(out)


def empty_type_line(task_type: str, notes: list[Note], budget: int) -> str:
    """Why ``task_type``'s library entry is empty, in one line that names the fix: its parsed skills hold no
    type-level statement at all (each under 3 words, e.g. the answer skeleton's placeholder ``"string"``, or
    naming one instance: no budget helps, the annotations do), or none of the statements they hold fits
    ``annotate.static_skill_tokens`` (raise it)."""
    found = len(type_statements(notes))
    if found:
        return (f"static skill library: none of the {found} type-level statement(s) of {task_type} fits "
                f"annotate.static_skill_tokens = {budget} (its '*' rows play without a skill); raise it")
    copied = sum(n.skill.strip().lower() == PLACEHOLDER for n in notes)  # as skill_metrics counts
    return (f"static skill library: the {len(notes)} parsed skill(s) of {task_type} hold no type-level statement "
            f"({copied} the answer skeleton's placeholder; the rest under 3 words or naming one "
            f"instance), so its '*' rows play without a skill whatever annotate.static_skill_tokens is; read the "
            f"annotator's answers in data/annotate/annotations.parquet")


class FailFast:
    """Watches the first ``annotate.fail_fast_after`` trajectories to finish: when all of them failed without an
    answer and for one reason (``failure_reason``: the error class, e.g. ``NotFoundError`` for HTTP 404),
    ``add`` says to stop, so the rest of the budget is not spent on a broken endpoint; ``error`` is then the
    stage's ``AnnotationQualityError``, counting the requests really sent (the other threads' too)."""

    def __init__(self, cfg: SeedConfig, endpoint: str, total: int) -> None:
        self.cfg, self.endpoint, self.total = cfg, endpoint, total
        self.n = cfg.annotate.fail_fast_after
        self.first: list[AnnotationRecord] = []
        self.reason: str | None = None

    def add(self, record: AnnotationRecord) -> bool:
        """Whether the run should stop, with ``record`` the latest trajectory to finish."""
        if self.reason is not None or not self.n or len(self.first) >= self.n:
            return self.reason is not None
        self.first.append(record)
        if len(self.first) < self.n or any(a.ok or answered(a) for a in self.first):
            return False
        reasons = {failure_reason(a) for a in self.first}
        self.reason = reasons.pop() if len(reasons) == 1 else None
        return self.reason is not None

    def error(self, requests: int, started: int) -> AnnotationQualityError:
        """The stop, once every thread is done: ``requests`` sent in all, for ``started`` trajectories."""
        where = f"the endpoint {self.endpoint}" if self.endpoint else f"the {self.cfg.annotate.client!r} analyzer"
        return AnnotationQualityError(
            f"stopped early: the first {self.n} trajectories sent to {where} (model {self.cfg.annotate.model!r}) "
            f"all failed the same way, {self.reason} (e.g. {self.first[-1].error[:160]!r}); {requests} "
            f"request{'s' if requests != 1 else ''} were sent in all, for {started} of the {self.total} trajectories "
            f"(the other {self.total - started} were not sent). Check OPENAI_BASE_URL (an OpenAI-compatible base "
            "URL usually ends in /v1), OPENAI_API_KEY and annotate.model, or set annotate.fail_fast_after: 0 to "
            "send them all anyway")


def check_ok_fraction(cfg: SeedConfig, annotations: list[AnnotationRecord], endpoint: str, out_dir: Path) -> None:
    """Raise ``AnnotationQualityError`` when fewer than ``annotate.min_ok_fraction`` of the trajectories
    were annotated: the message gives the count, the commonest failures with an example, and the fix."""
    ok = sum(a.ok for a in annotations)
    if ok >= cfg.annotate.min_ok_fraction * len(annotations):
        return
    counts = failure_reasons(annotations)
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    examples = {failure_reason(a): a.error for a in reversed(annotations) if not a.ok}
    causes = "; ".join(f"{reason} x{n} (e.g. {examples[reason][:160]!r})" for reason, n in top)
    failed = [a for a in annotations if not a.ok]
    if sum(not answered(a) for a in failed) >= len(failed) / 2:
        where = f"the endpoint {endpoint}" if endpoint else f"the {cfg.annotate.client!r} analyzer"
        fix = (f"the calls to {where} (model {cfg.annotate.model!r}) failed: check OPENAI_BASE_URL (an "
               "OpenAI-compatible base URL usually ends in /v1), OPENAI_API_KEY and annotate.model")
    else:
        fix = ("the answers did not parse as the analyzer JSON: check annotate.model, or raise "
               "annotate.max_tokens / annotate.parse_attempts")
    raise AnnotationQualityError(
        f"only {ok} of {len(annotations)} trajectories were annotated ({ok / len(annotations):.0%}), below "
        f"annotate.min_ok_fraction = {cfg.annotate.min_ok_fraction}; failures: {causes}. Likely cause: {fix}. "
        f"Per-trajectory errors are in {out_dir / 'annotations.parquet'}; finished annotations are cached and "
        "a rerun sends only the rest.")


def _annotate_missing(
    cfg: SeedConfig, trajectories: dict[str, list[StepRecord]], tasks: dict[str, Task], missing: list[str],
    keys: dict[str, str], cache: "AnnotationCache", watch: FailFast | None = None,
) -> dict[str, AnnotationRecord]:
    """Annotate ``missing`` on ``annotate.concurrency`` threads; each final record is cached as it lands.
    ``watch`` (``FailFast``) sees every finished record and may stop the run (queued work is cancelled)."""
    local = threading.local()
    clients: list[AnalyzerClient] = []  # one per thread (list.append is atomic)
    begun: list[str] = []

    def annotate_one(tid: str) -> AnnotationRecord:
        if not hasattr(local, "worker"):
            local.worker = _make_worker(cfg)
            clients.append(local.worker.client)
        begun.append(tid)
        worker: _Worker = local.worker
        (record,) = annotate_trajectories({tid: trajectories[tid]}, tasks, worker.client,
                                          parse_attempts=cfg.annotate.parse_attempts, policy_version="base",
                                          env=worker.env)
        if is_final(record):
            cache.append(keys[tid], record)
        return record

    out: dict[str, AnnotationRecord] = {}
    if not missing:
        return out
    pool = ThreadPoolExecutor(max_workers=max(1, min(cfg.annotate.concurrency, len(missing))),
                              thread_name_prefix="annotate")
    stopped = False
    try:
        futures = {pool.submit(annotate_one, tid): tid for tid in missing}
        with Progress(log, "annotate", len(missing), "trajectory") as bar:
            for future in as_completed(futures):
                out[futures[future]] = future.result()
                bar.update()
                if watch is not None and watch.add(out[futures[future]]):
                    raise _Stop
    except _Stop:
        stopped = True
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # on a stop or a bug: queued work cancelled, the rest cached
    if stopped and watch is not None:  # every thread is done: count what they sent
        sent = [getattr(c, "requests_sent", None) for c in clients]
        raise watch.error(sum(sent) if None not in sent else len(begun), len(begun))
    return out


class _Stop(Exception):
    """``FailFast`` stopped the run (raised through the progress line, so it ends as on any error)."""


def _check_prompt_version(cfg: SeedConfig) -> None:
    if cfg.annotate.prompt_version != PROMPT_VERSION:
        raise ConfigError(
            f"annotate.prompt_version = {cfg.annotate.prompt_version!r}, but this code writes analyzer prompts "
            f"of version {PROMPT_VERSION!r}; set annotate.prompt_version: {PROMPT_VERSION} in params.yaml "
            "(annotations are cached per prompt version)")


def _check_tasks(trajectories: dict[str, list[StepRecord]], tasks: dict[str, Task], path: Path) -> None:
    unknown = sorted({steps[0].task_id for steps in trajectories.values()} - set(tasks))
    if unknown:
        raise DataFileError(f"{path} lacks {len(unknown)} task(s) that trajectories.parquet refers to "
                            f"(e.g. {unknown[:3]}); rerun the collect stage so both files come from one run")


def failure_reason(record: AnnotationRecord) -> str:
    """A short, stable label: the error up to its first ':', '(' or ';' (e.g. 'APITimeoutError')."""
    return re.split(r"[:(;]", record.error or "unknown", maxsplit=1)[0].strip()[:60] or "unknown"


def failure_reasons(annotations: list[AnnotationRecord]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for a in annotations:
        if not a.ok:
            counts[failure_reason(a)] = counts.get(failure_reason(a), 0) + 1
    return dict(sorted(counts.items()))


def annotation_metrics(annotations: list[AnnotationRecord]) -> dict[str, float]:
    """Outcome counts; a failure is ``no_answer`` (the calls failed) or ``unparsable`` (answers, no JSON)."""
    n = max(len(annotations), 1)
    ok = sum(a.ok for a in annotations)
    no_answer = sum(not answered(a) for a in annotations)
    return {
        "annotate/trajectories": float(len(annotations)),
        "annotate/ok": float(ok),
        "annotate/failed": float(len(annotations) - ok),
        "annotate/failed_no_answer": float(no_answer),
        "annotate/failed_unparsable": float(len(annotations) - ok - no_answer),
        "annotate/ok_rate": ok / n,
        "annotate/mean_attempts": sum(a.attempts for a in annotations) / n,
        "annotate/prompt_tokens": float(sum(a.prompt_tokens for a in annotations)),
        "annotate/completion_tokens": float(sum(a.completion_tokens for a in annotations)),
        "annotate/mean_latency_s": sum(a.latency_s for a in annotations) / n,
        **skill_metrics([a.episode_skill for a in annotations if a.ok], "annotate"),
    }


def sft_data_metrics(annotations: list[AnnotationRecord], examples: list[tuple[str, str]]) -> dict[str, float]:
    """The Stage-1 SFT data: examples kept (parsed annotations), dropped (failed ones; why: see
    ``annotate/failed_*`` and ``failure_reasons``) and their lengths in characters."""
    prompts = [len(p) for p, _ in examples] or [0]
    targets = [len(t) for _, t in examples] or [0]
    return {
        "annotate/sft_examples": float(len(examples)),
        "annotate/mean_target_chars": sum(targets) / max(len(examples), 1),
        "sft_data/kept": float(len(examples)),
        "sft_data/dropped": float(len(annotations) - len(examples)),
        "sft_data/mean_prompt_chars": sum(prompts) / max(len(examples), 1),
        "sft_data/max_prompt_chars": float(max(prompts)),
        "sft_data/max_target_chars": float(max(targets)),
    }


def main() -> None:
    parser = stage_parser("Stage 1: annotate trajectories with hindsight skills")
    parser.add_argument("--collect", required=True, help="collect stage output directory")
    parser.add_argument("--out", required=True, help="output directory, e.g. data/annotate")
    args = parser.parse_args()

    with stage_errors("annotate", AnalyzerSetupError, AnnotationQualityError, ConfigError, DataFileError):  # bad setup or input: the message says the fix
        print(run_annotate(config_from_args(args), Path(args.collect), Path(args.out)))


if __name__ == "__main__":
    main()
