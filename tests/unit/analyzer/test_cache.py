"""The annotation cache: keys, append-only lines, torn and garbled lines, concurrent appends."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from pathlib import Path

import pytest

from seed_core.analyzer.cache import AnnotationCache, analyzer_identity, answered, is_final, trajectory_key
from seed_core.config import AnnotateConfig
from seed_core.types import AnnotationRecord, StepRecord

ANALYZER = {"client": "openai", "model": "m", "endpoint": "http://127.0.0.1:8000/v1", "temperature": 0.0,
            "max_tokens": 64, "parse_attempts": 2}


def step(k: int, response: str = "up") -> StepRecord:
    return StepRecord(
        env="sokoban", split="train", task_id="t0", task_type="", seed=0, group_id="g", traj_id="tr", step=k,
        observation=f"o{k}", prompt=f"p{k}", response=response, response_ids=[1], sampling_logprobs=[-0.5],
        action="up", format_valid=True, reward=0.0, done=k == 1, episode_return=0.0, success=False,
        episode_length=2, policy_version="base")


def note(traj_id: str, *, skill: str = "Do X.", raw: str = "{...}", error: str = "") -> AnnotationRecord:
    return AnnotationRecord(
        traj_id=traj_id, client="openai", model="m", policy_version="base", prompt="P", raw_output=raw,
        episode_summary="s", episode_skill=skill, step_skills="{}", parse_status="ok" if skill else "failed",
        error=error, attempts=1, prompt_tokens=3, completion_tokens=4, latency_s=0.25)


def test_key_depends_on_content_prompt_version_and_analyzer_only() -> None:
    key = trajectory_key([step(0), step(1)], "v1", ANALYZER)
    assert len(key) == 64 and int(key, 16) >= 0
    assert trajectory_key([step(1), step(0)], "v1", dict(reversed(list(ANALYZER.items())))) == key
    assert trajectory_key([step(0), step(1, response="down")], "v1", ANALYZER) != key
    assert trajectory_key([step(0), step(1)], "v2", ANALYZER) != key
    assert trajectory_key([step(0), step(1)], "v1", {**ANALYZER, "model": "other"}) != key
    assert trajectory_key([step(0), step(1)], "v1", {**ANALYZER, "endpoint": "http://127.0.0.1:9/v1"}) != key


def test_analyzer_identity_holds_what_changes_the_answer() -> None:
    cfg = AnnotateConfig(model="m", temperature=0.0, max_tokens=64, parse_attempts=2)
    assert analyzer_identity(cfg, ("openai", "m"), "http://127.0.0.1:8000/v1") == ANALYZER


def test_only_parsed_annotations_are_cacheable() -> None:
    assert is_final(note("a")) and answered(note("a"))
    unparsable = note("b", skill="", raw="not json", error="no JSON object found")
    assert not is_final(unparsable) and answered(unparsable)  # a rerun (fixed endpoint or model) asks again
    no_answer = note("c", skill="", raw="", error="APITimeoutError: Request timed out.")
    assert not is_final(no_answer) and not answered(no_answer)


def test_appended_entries_load_back(tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    assert AnnotationCache(path).load() == {}
    with AnnotationCache(path) as cache:
        cache.append("k1", note("a"))
        cache.append("k2", note("b", skill="Do Y."))
        cache.append("k1", note("a", skill="Do Z."))  # a later entry for the same key wins
    assert AnnotationCache(path).load() == {"k1": note("a", skill="Do Z."), "k2": note("b", skill="Do Y.")}
    assert path.read_text().count("\n") == 3


def test_a_torn_last_line_is_ignored_then_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    with AnnotationCache(path) as cache:
        cache.append("k1", note("a"))
    whole = path.read_bytes()
    line = json.dumps({"key": "k2", "record": dataclasses.asdict(note("b"))}).encode()
    path.write_bytes(whole + line[:40])  # killed mid-write
    assert AnnotationCache(path).load() == {"k1": note("a")}
    with AnnotationCache(path) as cache:
        cache.append("k3", note("c"))
    assert path.read_bytes().startswith(whole) and path.read_bytes().count(b"\n") == 2
    assert AnnotationCache(path).load() == {"k1": note("a"), "k3": note("c")}


def test_a_garbled_line_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "cache.jsonl"
    good = json.dumps({"key": "k1", "record": dataclasses.asdict(note("a"))})
    path.write_text(f'{{"key": "k0", "record": {{"traj_id": 1}}}}\nnot json\n{good}\n')
    with caplog.at_level(logging.WARNING):
        assert AnnotationCache(path).load() == {"k1": note("a")}
    assert f"{path}:1 is not an annotation cache entry" in caplog.text and f"{path}:2" in caplog.text


def test_concurrent_appends_write_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    with AnnotationCache(path) as cache:
        threads = [threading.Thread(target=lambda i=i: [cache.append(f"k{i}-{j}", note(f"t{i}-{j}"))
                                                        for j in range(25)]) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    loaded = AnnotationCache(path).load()
    assert len(loaded) == 200 and loaded["k7-24"] == note("t7-24")
