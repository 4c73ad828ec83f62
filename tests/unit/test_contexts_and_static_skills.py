"""Teacher contexts (§2.5, §2.6), the static skill library, and the algorithm records' names."""

import json

import pytest

from seed_core.algorithms import ALGORITHMS, HINDSIGHT, STATIC
from seed_core.analyzer.clients import CLIENTS
from seed_core.contexts import (
    STATIC_SKILL_HEADER,
    TEACHER_CONTEXTS,
    StepSkills,
    hindsight_skills,
    make_encoders,
    static_skills,
)
from seed_core.io import DataFileError
from seed_core.static_skills import StaticSkills, aggregate, load
from seed_core.trainer.compose import SHAPINGS
from seed_core.types import AnnotationRecord

PROMPT = "You are an agent.\nYour task is to: put a mug in the sink.\nNow it's your turn to act."


def test_every_algorithm_record_names_registered_parts():
    for name in ALGORITHMS:
        a = ALGORITHMS.get(name)
        assert a.context is None or a.context in TEACHER_CONTEXTS, name
        assert a.shaping is None or a.shaping in SHAPINGS, name
        assert a.analyzer in (None, "annotate") or a.analyzer in CLIENTS, name
        assert a.needs_teacher == (a.context is not None), name  # a teacher context is always used
        assert a.label, name
    assert {n for n in ALGORITHMS if ALGORITHMS.get(n).context == STATIC} == {
        "sdar", "grpo_opsd", "opsd", "skill_sd", "rlsd"}
    assert ALGORITHMS.get("opid").analyzer == "annotate" and ALGORITHMS.get("opid").step_skills
    assert ALGORITHMS.get("seed").context == HINDSIGHT


def _library():
    return StaticSkills(general="- Read the task line first.", texts={"clean.md": "- Rinse it in the sink."},
                        mapping={"clean": "clean.md", "pick_clean": "clean.md"})


def test_sdar_teacher_prompt_starts_with_the_skill_header_before_the_chat_template(tiny_policy):
    tok = tiny_policy.tokenizer
    enc = make_encoders(tok, {}, 4096)
    sdar = TEACHER_CONTEXTS.get(ALGORITHMS.get("sdar").context)

    class Step:
        task_type, task_id, traj_id, step = "clean", "t1", "x", 0

    skills = static_skills(_library())(Step())
    assert skills.episode == "- Read the task line first.\n\n- Rinse it in the sink."
    ids = sdar.build(PROMPT, skills, enc)
    text = tok.decode(ids)
    chat = tok.decode(enc.chat(PROMPT))
    assert text.startswith(f"{STATIC_SKILL_HEADER}\n{skills.episode}\n\n")
    assert text.endswith(chat)  # the untouched chat-templated prompt follows, its first token included
    assert text.index(STATIC_SKILL_HEADER) < text.index("<|im_start|>")
    assert ids[-len(enc.chat(PROMPT)):] == enc.chat(PROMPT)
    assert sdar.build(PROMPT, StepSkills(), enc) is None


def test_hindsight_context_inserts_after_the_task_line_and_routes_step_skills(tiny_policy):
    enc = make_encoders(tiny_policy.tokenizer, {}, 4096)
    ctx = TEACHER_CONTEXTS.get(HINDSIGHT)
    note = AnnotationRecord("tr", "oracle", "m", "v", "", "", "", "Go to the sink.",
                            json.dumps({"1": "Open the tap now."}), "ok", "", 1, 0, 0, 0.0)
    of = hindsight_skills([note], step_skills=True)

    class Step:
        traj_id, task_type, task_id = "tr", "clean", "t1"

        def __init__(self, step):
            self.step = step

    episode = tiny_policy.tokenizer.decode(ctx.build(PROMPT, of(Step(0)), enc))
    assert episode.index("put a mug in the sink.") < episode.index("Go to the sink.") < episode.index("Now it's")
    step = tiny_policy.tokenizer.decode(ctx.build(PROMPT, of(Step(1)), enc))
    assert "Open the tap now." in step and "Go to the sink." not in step  # step_priority
    assert step.index("Open the tap now.") < step.index("Now it's your turn")
    failed = AnnotationRecord("tr", "oracle", "m", "v", "", "", "", "", "{}", "failed", "e", 1, 0, 0, 0.0)
    assert ctx.build(PROMPT, hindsight_skills([failed], step_skills=True)(Step(1)), enc) is None


def test_aggregation_is_deterministic_and_round_trips(tmp_path):
    grouped = {"clean": ["b rule", "a rule", "b rule", "shared"], "heat": ["shared", "c rule"], "cool": []}
    lib = aggregate(grouped, per_type=2)
    assert lib == aggregate(dict(reversed(list(grouped.items()))), per_type=2)
    assert lib.texts["clean.md"] == "- b rule\n- a rule"  # by count, then text
    assert lib.general == "- shared"  # occurs under two task types
    assert load(lib.write(tmp_path / "lib")) == StaticSkills(
        general=lib.general + "\n", texts={k: v + "\n" for k, v in lib.texts.items()}, mapping=lib.mapping)
    assert load(tmp_path / "lib").skill_for("heat") == "- shared\n\n- c rule\n- shared"
    # SDAR's substring rule for a task id; unknown type -> general only
    assert _library().skill_for("unknown", "game/pick_clean_then_place/1") == _library().skill_for("clean")
    assert _library().skill_for("unknown", "zzz") == "- Read the task line first."


def test_a_user_library_with_a_missing_file_is_a_clear_error(tmp_path):
    (tmp_path / "skill_mapping.json").write_text(json.dumps({"clean": "clean.md"}))
    with pytest.raises(DataFileError, match="clean.md"):
        load(tmp_path)
    with pytest.raises(DataFileError, match="skill_mapping.json"):
        load(tmp_path / "nothing")
