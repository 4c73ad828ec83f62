"""Teacher contexts (§2.5, §2.6), the static skill library, and the algorithm records' names."""

import json

import pytest

from seed_core.algorithms import ALGORITHMS, HINDSIGHT, STATIC
from seed_core.analyzer.clients import CLIENTS
from seed_core.skills.contexts import (
    STATIC_SKILL_HEADER,
    TEACHER_CONTEXTS,
    StepSkills,
    hindsight_skills,
    make_encoders,
    static_skills,
)
from seed_core.runtime.io import DataFileError
from seed_core.skills.static import StaticSkills, aggregate, load
from seed_core.registries import SHAPINGS
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
        "sdar", "grpo_opsd", "opsd", "skill_sd", "rlsd", "seed_static_library"}
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
    grouped = {"clean": ["b rule here", "a rule here", "b rule here.", "shared rule text"],
               "heat": ["shared rule text", "c rule here"], "cool": []}
    lib = aggregate(grouped)
    assert lib == aggregate(dict(reversed(list(grouped.items()))))
    assert lib.texts["clean.md"] == "- B rule here.\n- A rule here"  # by count, then text; "b rule here" is the same
    assert lib.general == "- Shared rule text"  # occurs under two task types, and only there
    assert load(lib.write(tmp_path / "lib")) == StaticSkills(
        general=lib.general + "\n", texts={k: (v + "\n") for k, v in lib.texts.items()}, mapping=lib.mapping)
    assert load(tmp_path / "lib").skill_for("heat") == "- Shared rule text\n\n- C rule here"
    # SDAR's substring rule for a task id; unknown type -> general only
    assert _library().skill_for("unknown", "game/pick_clean_then_place/1") == _library().skill_for("clean")
    assert _library().skill_for("unknown", "zzz") == "- Read the task line first."


def test_a_user_library_with_a_missing_file_is_a_clear_error(tmp_path):
    (tmp_path / "skill_mapping.json").write_text(json.dumps({"clean": "clean.md"}))
    with pytest.raises(DataFileError, match="clean.md"):
        load(tmp_path)
    with pytest.raises(DataFileError, match="skill_mapping.json"):
        load(tmp_path / "nothing")


# --- the aggregated library: type-level, de-duplicated, bounded (seed_core/skills/static.py) ---------------

NOISE_ACTIONS = {"search_qa": ("<answer>unknown</answer>", "<search>unknown</search>"),
                 "webshop": ("click[back to search]", "click[buy now]", "search[gift]")}
"""Random actions of the noisy expert where the testbed has none (failed episodes give pitfall notes)."""


def _played(name: str, n: int, noise: float, tmp_path, tokenizer_dir, budget: int, **env):
    """Noisy-expert episodes of ``n`` train tasks, their oracle annotations and the annotate stage's library."""
    from seed_core.analyzer.annotate import annotate_trajectories
    from seed_core.analyzer.clients import OracleClient
    from seed_core.config import SeedConfig
    from seed_core.envs import make_env
    from seed_core.loader import with_overrides
    from seed_core.rollout.collector import group_by_trajectory
    from seed_core.rollout.expert import play_expert
    from seed_core.stages.annotate import write_static_library
    from seed_core.modeling.testbed import RANDOM_ACTIONS

    cfg = with_overrides(SeedConfig(), {"env.name": name, "project.data_dir": str(tmp_path / "data"),
                                        "model.path": str(tokenizer_dir), "annotate.static_skill_tokens": budget,
                                        **env})
    game = make_env(cfg.env)
    tasks = game.make_tasks(game.splits[0], n, seed=5)
    actions = RANDOM_ACTIONS.get(name) if name in RANDOM_ACTIONS else NOISE_ACTIONS[name]
    records = play_expert(cfg.env, tasks, noise=noise, actions=actions, seed=3)
    trajectories = group_by_trajectory(records)
    by_id = {t.task_id: t for t in tasks}
    notes = annotate_trajectories(trajectories, by_id, OracleClient(game, name), parse_attempts=1,
                                  policy_version="x", env=game)
    out = write_static_library(cfg, notes, trajectories, tmp_path / "lib", by_id, game)
    return cfg, game, tasks, trajectories, notes, load(out)


@pytest.mark.parametrize("name,budget", [("ezpoints", 48), ("sokoban", 48), ("search_qa", 96), ("webshop", 96)])
def test_the_skill_prompted_prompt_of_every_env_stays_within_the_budget(name, budget, tmp_path, tiny_model_dir,
                                                                       tiny_policy):
    """Each task type's skill (general + its text) counts at most annotate.static_skill_tokens policy tokens, so
    the "*" prompt is the plain prompt + the budget + the section's fixed title lines; the unbounded library of
    the same annotations is longer (the budget is what bounds it) and the bounded one is not empty."""
    from seed_core.modeling.models import encode_prompt
    from seed_core.skills.insert import EPISODE_SKILL_INSTRUCTION, EPISODE_SKILL_TITLE, insert_episode_skill
    from seed_core.stages.annotate import write_static_library
    from seed_core.skills.static import token_counter

    cfg, game, tasks, trajectories, notes, lib = _played(name, 12, 0.4, tmp_path, tiny_model_dir, budget)
    tok = tiny_policy.tokenizer
    count, source = token_counter(cfg)
    assert source == str(tiny_model_dir)  # the policy's tokenizer, not the estimate
    free = load(write_static_library(cfg.model_copy(update={"annotate": cfg.annotate.model_copy(
        update={"static_skill_tokens": 100_000})}), notes, trajectories, tmp_path / "free", {t.task_id: t for t in tasks},
        game))
    overhead = len(tok(f"{EPISODE_SKILL_TITLE}\n{EPISODE_SKILL_INSTRUCTION}\n[]\n\n\n\n",
                       add_special_tokens=False)["input_ids"]) + 4  # + token merges at the seams
    assert lib.mapping
    for task_type in lib.mapping:
        skill = lib.skill_for(task_type)
        assert skill and count(skill) <= budget < count(free.skill_for(task_type)), task_type
        prompt = next(steps[0].prompt for steps in trajectories.values() if steps[0].task_type == task_type)
        plain = len(encode_prompt(tok, prompt))
        assert len(encode_prompt(tok, insert_episode_skill(prompt, skill))) <= plain + budget + overhead


def test_no_library_entry_names_one_instances_values(tmp_path, tiny_model_dir):
    """EZPoints' oracle notes name each episode's cards ("For cards 4 and 8: ... append '4', '+', '8', '='"): the
    library keeps the type-level rule and workflow, with the card list cut out, and no card value, card name
    or suit of any instance; the only number left is the target every prompt states."""
    import re

    from seed_core.envs.ezpoints import deal

    cfg, game, tasks, _, notes, lib = _played("ezpoints", 24, 0.4, tmp_path, tiny_model_dir, 200)
    text = lib.skill_for("ezpoints")
    assert any("For cards" in n.episode_skill for n in notes)  # the notes do name the cards
    assert set(re.findall(r"\d+", text)) == {"12"}
    for task in tasks:
        cards, labels = deal(task.seed, 12)
        for name in labels:
            assert name.lower() not in text.lower() and name.split(" of ")[-1] not in text
    assert "use only the card numbers, each once, and never append '=' before the formula is complete" in text
    assert "add up to 12 (use '+') or multiply to 12 (use '*')" in text
    assert text.startswith("- Workflow: first check")  # workflow (successful episodes) first, then the pitfalls


def test_an_empty_library_entry_says_whether_a_budget_or_the_annotations_emptied_it(tmp_path, tiny_model_dir,
                                                                                     caplog):
    """A type whose skills hold statements that do not fit the budget is told to raise it; a type whose skills
    hold none (the skeleton's placeholder "string", as every rehearsal's stand-in annotator wrote, or under 3
    words) is told that no budget helps and where the annotations are, with how many copied the placeholder."""
    from seed_core.skills.static import Note
    from seed_core.stages.annotate import empty_type_line

    copied = [Note("string", "t1"), Note(" String ", "t2"), Note("Go north.", "t3")]
    line = empty_type_line("clean", copied, 512)
    assert "the 3 parsed skill(s) of clean hold no type-level statement (2 the answer skeleton's placeholder" in line
    assert "raise it" not in line and "data/annotate/annotations.parquet" in line
    real = [Note("Always open the drawer before you look for the key.", "t1")]
    assert empty_type_line("clean", real, 4) == (
        "static skill library: none of the 1 type-level statement(s) of clean fits annotate.static_skill_tokens = 4 "
        "(its '*' rows play without a skill); raise it")
    with caplog.at_level("WARNING", logger="seed_core.stages.annotate"):
        _played("ezpoints", 6, 0.4, tmp_path, tiny_model_dir, 1)
    assert "type-level statement(s) of ezpoints fits annotate.static_skill_tokens = 1" in caplog.text


def test_instance_values_are_summarized_or_dropped_by_the_hook_and_the_generic_filters():
    """Per-env hook: values become type-level phrases, a list of cut values goes, one left in a formula or quote
    drops the statement; generic: step references go, a number that is not in every prompt, a name from the
    episode's own prompt, and a move-by-move replay drop the statement."""
    from seed_core.skills.static import Note, abstract, type_statements

    cards = {"4": "", "8": ""}
    assert abstract("Rule: use only the card numbers 4 and 8, each once.", cards) == \
        "Rule: use only the card numbers, each once."
    assert abstract("Avoid this mistake: At step 2 the response had no valid action.", {}) == \
        "Avoid this mistake: the response had no valid action."
    shop = {"crew neck shirt": "<product>", "long sleeve": "<attributes>", "quick drying": "<attributes>",
            "$60.00": "<max price>"}
    assert abstract("search[crew neck shirt long sleeve quick drying] below $60.00 first.", shop) == \
        "Search[<product> <attributes>] below <max price> first."
    prompts = {"t1": "Task: find Noutex Drisol. Target 12.", "t2": "Task: find Brounai. Target 12."}
    skills = {"t1": ["For cards 4 and 8: 4+8 = 12, so append '4', '+', '8', '='.",
                     "Rule: use only the card numbers 4 and 8, each once.",
                     "Ask Noutex Drisol about the year first.", "Here the moves up, up, left worked.",
                     "Take the apple 1 from the countertop.", "Always reach 12 with both numbers."],
              "t2": ["Rule: use only the card numbers 2 and 10, each once."]}
    notes = [Note(s, t, prompts[t], cards if t == "t1" else {"2": "", "10": ""}) for t in skills for s in skills[t]]
    kept = [c.text for c in type_statements(notes)]
    assert kept == ["Rule: use only the card numbers, each once.", "Always reach 12 with both numbers."]


def test_duplicates_and_near_duplicates_are_one_entry_and_general_skills_are_not_repeated():
    from seed_core.skills.static import Note

    move = "Avoid this mistake: moving {} was blocked by a wall and wasted a step; check the square first."
    grouped = {
        "a": [Note(move.format(d), f"t{i}") for i, d in enumerate(["up", "left", "up", "down"])]
             + [Note("Answer with exactly one action inside the tags.", "t9"),
                Note("answer with exactly ONE action inside the tags", "t8")],
        "b": [Note("Answer with exactly one action inside the tags.", "u1"), Note("Plan the pushes before moving.", "u2")],
    }
    lib = aggregate(grouped, budget_tokens=10_000)
    assert lib.general == "- Answer with exactly one action inside the tags."
    assert lib.texts["a.md"].count("was blocked by a wall") == 1 and "inside the tags" not in lib.texts["a.md"]
    assert lib.texts["b.md"] == "- Plan the pushes before moving."
    assert lib.skill_for("a").count("inside the tags") == 1
