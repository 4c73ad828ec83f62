"""``seed run --preset P --rehearse`` (seed_app.rehearsal): what a rehearsal replaces, and nothing else.

The rehearsal's promise is "the preset's stages, code path and settings, with only what cannot run here replaced,
each replacement listed". These tests hold it to that on every paper preset: the rehearsed config differs from the
preset exactly in the listed keys; the multi-turn structure (history, prompt formats, chat template, the
algorithm and its losses) is the preset's; a budget only ever shrinks; the sharded trainer stays sharded."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from seed_app import cli, rehearsal
from seed_core.config import flatten
from seed_core.loader import load_config

ROOT = Path(__file__).resolve().parents[2]
PAPER = sorted(p for p in (ROOT / "presets").glob("*.yaml") if load_config(p).generation.backend == "vllm")
KEPT = ("env.name", "env.history_length", "env.invalid_action_penalty", "model.chat_template_kwargs",
        "generation.backend", "generation.temperature", "generation.max_prompt_tokens", "rl.algorithm",
        "rl.distill_loss", "rl.policy_loss", "rl.opd_coef", "rl.kl_coef", "rl.lr", "sft.lr", "eval.splits",
        "annotate.prompt_version", "annotate.client")


def test_there_are_fourteen_paper_presets_to_rehearse() -> None:
    assert len(PAPER) == 14, [p.stem for p in PAPER]


@pytest.mark.parametrize("path", PAPER, ids=[p.stem for p in PAPER])
def test_a_rehearsal_differs_from_its_preset_only_in_what_it_lists(path: Path) -> None:
    cfg = load_config(path)
    listed = rehearsal.replacements(cfg)
    before, after = flatten(cfg), flatten(load_config(path, rehearsal.overrides(cfg)))
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {r.key for r in listed}
    assert all(before[r.key] == r.preset and after[r.key] == r.rehearsal and r.why for r in listed)
    kept = [k for k in before if k.startswith(KEPT)]  # the multi-turn structure and the method are the preset's
    assert len(kept) >= len(KEPT) - 1 and all(before[k] == after[k] for k in kept)
    for key in rehearsal.BUDGETS:
        assert after[key] <= before[key], f"{key}: a budget only shrinks"
    assert after["model.path"] == rehearsal.SMOLLM2 and after["annotate.model"] == rehearsal.SMOLLM2
    assert after["env.max_steps"] == min(before["env.max_steps"], before["env.history_length"] + 1)  # slides once
    twin = yaml_of(ROOT / after["project.accelerate_config"])
    original = yaml_of(ROOT / before["project.accelerate_config"])
    assert twin["distributed_type"] == original["distributed_type"] and twin["num_processes"] >= 2


def yaml_of(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text())


def test_each_replacement_is_one_line_naming_key_values_and_reason() -> None:
    line = rehearsal.Replacement("rl.rounds", 150, 1, "one RL round").line()
    assert line == "  rl.rounds: 150 -> 1 (one RL round)"


@pytest.mark.parametrize("argv, named", [
    (["run", "--rehearse"], "add --preset presets/<name>.yaml"),
    (["run", "--rehearse", "--preset", "presets/smollm2-sokoban.yaml"], "runs on CPU as it is"),
])
def test_rehearse_without_a_paper_preset_is_one_line_and_exit_2(argv: list[str], named: str) -> None:
    result = CliRunner().invoke(cli.app, argv)
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_the_record_keeps_other_presets_and_lists_the_replacements(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rehearsal, "project_root", lambda: tmp_path)
    monkeypatch.setattr(rehearsal, "_stage_runs", lambda experiment, since_ms: {
        "collect": {"seconds": 1.0, "status": "FINISHED"}, "rl-grpo": {"seconds": 2.0, "status": "FAILED"}})
    (tmp_path / rehearsal.RESULTS).parent.mkdir(parents=True)
    (tmp_path / rehearsal.RESULTS).write_text(json.dumps({"presets": {"other": {"passed": True}}}))
    path = ROOT / "presets" / "alfworld-qwen2.5-3b.yaml"
    cfg = load_config(path)
    entry = rehearsal.record(path, cfg, "failed", 12.0, 0, "EngineError: x")
    data = json.loads((tmp_path / rehearsal.RESULTS).read_text())
    assert data["presets"]["other"] == {"passed": True}
    assert data["presets"]["alfworld-qwen2.5-3b"] == entry
    assert entry["passed"] is False and entry["error"] == "EngineError: x" and entry["failed_stages"] == ["rl-grpo"]
    assert {r["key"] for r in entry["replaced"]} == {r.key for r in rehearsal.replacements(cfg)}


def test_a_failed_dvc_run_is_recorded_by_its_exit_status_not_its_command_line() -> None:
    """The first line of a failed ``dvc exp run`` is its whole command line (every override), which hid the exit
    status in the 3864de5 record; other errors keep their type and first line."""
    import subprocess

    failed = subprocess.CalledProcessError(255, ["dvc", "exp", "run", "-S", "model.path=smollm2-135m-instruct"])
    assert rehearsal._one_line(failed) == "dvc exp run exited 255; see failed_stages and the run's log"
    assert rehearsal._one_line(KeyboardInterrupt()) == "KeyboardInterrupt: "
    assert rehearsal._one_line(RuntimeError("engine died\nlog tail")) == "RuntimeError: engine died"


def test_presets_that_differ_only_in_what_the_rehearsal_replaces_share_a_settings_digest() -> None:
    """ALFWorld 1.5B and 3B differ in the policy model only, which the rehearsal replaces; 7B also keeps its own
    micro-batch size, so it rehearses something else; a changed learning rate changes the digest."""
    def digest(stem: str, **extra: object) -> str:
        path = ROOT / "presets" / f"{stem}.yaml"
        return rehearsal.settings_digest(load_config(path, {**rehearsal.overrides(load_config(path)), **extra}))

    assert digest("alfworld-qwen2.5-1.5b") == digest("alfworld-qwen2.5-3b")
    assert digest("alfworld-qwen2.5-3b") != digest("alfworld-qwen2.5-7b")
    assert digest("alfworld-qwen2.5-3b") != digest("alfworld-qwen2.5-3b", **{"rl.lr": 2e-6})


@pytest.mark.parametrize("runs, over", [
    ({}, False),  # dvc exp run's stash and reapply (which rewrites git-tracked metrics files): no stage yet
    ({"prepare_model": {"status": "FINISHED"}, "collect": {"status": "RUNNING"}}, False),
    ({"collect": {"status": "FINISHED"}, "annotate": {"status": "RUNNING"}}, False),
    ({"collect": {"status": "FINISHED"}, "annotate": {"status": "FINISHED"}}, True),
    ({"annotate": {"status": "FAILED"}}, True),
    ({"rl-grpo": {"status": "RUNNING"}}, True),  # a twin: DVC skipped annotate as up to date
])
def test_the_pipeline_is_past_annotate_only_once_its_run_ended_or_a_later_stage_began(runs: dict, over: bool) -> None:
    assert rehearsal.annotate_over(runs) is over


def test_the_annotator_stops_once_the_pipeline_is_past_annotate(tmp_path: Path) -> None:
    """Not before (a failed read of the runs counts as not yet), exactly once after; a finished run ends the watch
    without stopping anything twice."""
    import threading

    class Engine:
        stops = 0

        def stop(self) -> None:
            Engine.stops += 1

    seen: list[dict] = [{"annotate": {"status": "RUNNING"}}]

    def runs() -> dict:
        if not seen:
            raise RuntimeError("database is locked")
        return seen[-1]

    finished = threading.Event()
    watcher = rehearsal.stop_after_annotate(Engine(), runs, finished, poll_s=0.01)
    time.sleep(0.1)
    seen.clear()
    time.sleep(0.1)
    assert Engine.stops == 0 and watcher.is_alive()
    seen.append({"annotate": {"status": "FINISHED"}})
    watcher.join(2.0)
    assert Engine.stops == 1 and not watcher.is_alive()
    quiet = rehearsal.stop_after_annotate(Engine(), lambda: {}, finished, poll_s=0.01)
    finished.set()
    quiet.join(2.0)
    assert not quiet.is_alive() and Engine.stops == 1


# scripts/rehearse_campaign.py: which presets a campaign at one commit still runs, in which order, and how a new
# record keeps the old one. (Here, not in a module of its own: a new module would change the test order CI replays.)
_spec = importlib.util.spec_from_file_location("rehearse_campaign", ROOT / "scripts" / "rehearse_campaign.py")
campaign = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(campaign)


def test_every_paper_preset_is_planned_with_twins_next_to_each_other() -> None:
    digests = campaign.paper_presets(ROOT)
    assert len(digests) == 14 and "smollm2-sokoban" not in digests and "testbed-mechanism" not in digests
    order = campaign.plan(digests, {}, "abc1234", [])
    assert sorted(order) == sorted(digests)
    seen = [digests[p] for p in order]  # each digest's presets form one run, so the second is a cache restore
    assert all(seen.index(d) == i or seen[i - 1] == d for i, d in enumerate(seen))
    assert order.index("alfworld-qwen2.5-3b") - order.index("alfworld-qwen2.5-1.5b") == 1


def test_a_preset_that_passed_at_the_commit_is_skipped_and_one_that_failed_or_ran_elsewhere_is_not() -> None:
    digests = {"a": "1", "b": "2", "c": "1", "d": "3"}
    records = {"a": {"commit": "abc1234", "passed": True}, "b": {"commit": "abc1234", "passed": False},
               "d": {"commit": "0000000", "passed": True}}
    assert campaign.plan(digests, {}, "abc1234", []) == ["a", "c", "b", "d"]  # a and c compute the same
    assert campaign.plan(digests, records, "abc1234", []) == ["b", "c", "d"]
    assert campaign.plan(digests, records, "abc1234", ["d", "a"]) == ["d"]
    with pytest.raises(SystemExit, match="not paper presets: nope"):
        campaign.plan(digests, records, "abc1234", ["nope"])


def test_a_new_record_keeps_the_earlier_one_and_its_history() -> None:
    old = {"commit": "1111111", "passed": False, "earlier_runs": [{"commit": "0000000"}]}
    new = {"commit": "2222222", "passed": True}
    assert campaign.merged(old, new) == {**new, "earlier_runs": [{"commit": "0000000"},
                                                                  {"commit": "1111111", "passed": False}]}
    assert campaign.merged(None, new) == new


def test_only_a_record_written_at_the_clones_commit_is_copied(tmp_path: Path, monkeypatch) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"],
                   cwd=clone, check=True)
    head = campaign.short("HEAD", clone)
    ours = tmp_path / "ours"
    (ours / campaign.RESULTS).parent.mkdir(parents=True)
    (ours / campaign.RESULTS).write_text(json.dumps({"presets": {"p": {"commit": "0000000", "passed": False}}}))
    (clone / campaign.RESULTS).parent.mkdir(parents=True)
    monkeypatch.setattr(campaign, "ROOT", ours)

    (clone / campaign.RESULTS).write_text(json.dumps({"presets": {"p": {"commit": "9999999", "passed": True}}}))
    assert campaign.copy_record(clone, "p") is None  # the clone's file holds an older run's record: not this one

    (clone / campaign.RESULTS).write_text(json.dumps({"presets": {"p": {"commit": head, "passed": True}}}))
    assert campaign.copy_record(clone, "p") == {"commit": head, "passed": True}
    written = json.loads((ours / campaign.RESULTS).read_text())["presets"]["p"]
    assert written["commit"] == head and written["earlier_runs"] == [{"commit": "0000000", "passed": False}]
    assert campaign.copy_record(clone, "p", ["q"])["same_settings_as"] == ["q"]


# benchmarks/engine_memory.py: which engine a sample belongs to, and what it sums (here for the same reason).
_spec = importlib.util.spec_from_file_location("engine_memory", ROOT / "benchmarks" / "engine_memory.py")
engine_memory = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(engine_memory)


class _Proc:
    def __init__(self, *args: str, parents: tuple["_Proc", ...] = ()) -> None:
        self.args, self._parents = list(args), list(parents)

    def cmdline(self) -> list[str]:
        return self.args

    def parents(self) -> list["_Proc"]:
        return self._parents


def test_an_engine_is_attributed_to_the_stage_that_launched_it_or_to_the_rehearsals_annotator() -> None:
    seed = _Proc("/x/.venv/bin/python3", "/x/.venv/bin/seed", "run", "--preset", "p.yaml", "--rehearse")
    dvc = _Proc("/x/.venv/bin/python3", "/x/.venv/bin/dvc", "exp", "run", parents=(seed,))
    launch = _Proc("/x/.venv/bin/python", "-m", "accelerate.commands.launch", parents=(dvc, seed))
    rank = _Proc("/x/.venv/bin/python3", "-u", "-m", "seed_core.stages.rl", "--config", "params.yaml",
                 parents=(launch, dvc, seed))
    assert engine_memory.role(_Proc("worker", parents=(rank, *rank.parents()))) == "seed_core.stages.rl"
    assert engine_memory.role(_Proc("worker", parents=(seed,))) == "annotator-stand-in"
    warm = _Proc("/x/.venv/bin/python3", "-m", "flows.warm", "--serve", "/tmp/s.sock", parents=(seed,))
    fork = _Proc(*warm.args, parents=(warm, seed))  # an evaluation forked from the server, below `seed run` too
    assert engine_memory.role(_Proc("worker", parents=(fork, warm, seed))) == "forked-stage"
    assert engine_memory.role(_Proc("worker", parents=(_Proc("bash"),))) == "other"
    assert engine_memory.preset(_Proc("worker", parents=(fork, warm, seed))) == "p"
    assert engine_memory.preset(_Proc("worker", parents=(_Proc("bash"),))) == ""


def test_an_engine_trees_memory_sums_its_processes_and_shared_pages_count_less_in_pss() -> None:
    import psutil

    me = psutil.Process()
    child = subprocess.Popen(["sleep", "30"])
    try:
        alone = me.memory_full_info()
        tree = engine_memory.tree_memory(me)
        assert tree["rss"] > alone.rss and tree["uss"] > alone.uss  # the child counted too
        assert 0 < tree["uss"] <= tree["pss"] <= tree["rss"]
    finally:
        child.kill()
        child.wait()
