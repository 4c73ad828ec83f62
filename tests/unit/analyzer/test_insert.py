"""Episode-skill insertion into agent prompts (seed-algorithm.md §2.5)."""

from __future__ import annotations

from seed_core.skills.insert import insert_episode_skill, render_skill_section

SECTION = (
    "**Episode-Level Skill**\n"
    "Refer to this episode-level skill when deciding what action to take in the current episode:\n"
    "[Open the fridge before searching counters.]"
)
SKILL = "Open the fridge before searching counters."


def test_render_section_three_lines_and_colon() -> None:
    assert render_skill_section("**T**", "Use this", " s ") == "**T**\nUse this:\n[s]"
    assert render_skill_section("**T**", "Use this:", "s") == "**T**\nUse this:\n[s]"


def test_exact_output_after_task_line() -> None:
    prompt = (
        "You are an expert agent operating in the ALFRED Embodied Environment.\n"
        "-= Welcome to TextWorld, ALFRED! =-\n"
        "Your task is to: put a clean egg in microwave.\n"
        "Your admissible actions of the current situation are: ['go to fridge 1', 'look'].\n"
        "\n"
        "Now it's your turn to take an action."
    )
    expected = (
        "You are an expert agent operating in the ALFRED Embodied Environment.\n"
        "-= Welcome to TextWorld, ALFRED! =-\n"
        "Your task is to: put a clean egg in microwave.\n"
        "\n"
        f"{SECTION}\n"
        "\n"
        "Your admissible actions of the current situation are: ['go to fridge 1', 'look'].\n"
        "\n"
        "Now it's your turn to take an action."
    )
    assert insert_episode_skill(prompt, SKILL) == expected


def test_only_the_first_task_line_gets_the_section() -> None:
    prompt = "Role. Your task is to: A.\nhistory: Your task is to: A.\nNow it's your turn to act."
    out = insert_episode_skill(prompt, SKILL)
    assert out.count("**Episode-Level Skill**") == 1
    assert out.startswith(f"Role. Your task is to: A.\n\n{SECTION}\n\nhistory: Your task is to: A.")


def test_marker_priority_beats_position() -> None:
    # "Your question:" comes first in the text, but "Your task is to:" has priority
    prompt = "Your question: who?\nnotes\nYour task is to: answer.\nNow it's your turn."
    out = insert_episode_skill(prompt, SKILL)
    assert out == f"Your question: who?\nnotes\nYour task is to: answer.\n\n{SECTION}\n\nNow it's your turn."
    # "Your current task is:" beats "Your task is:" and "Your question:"
    prompt2 = "Your question: q\nYour task is: t\nYour current task is: c\nrest"
    assert insert_episode_skill(prompt2, SKILL) == (
        f"Your question: q\nYour task is: t\nYour current task is: c\n\n{SECTION}\n\nrest"
    )
    prompt3 = "Your question: q\nYour task is: t\nrest"
    assert insert_episode_skill(prompt3, SKILL) == f"Your question: q\nYour task is: t\n\n{SECTION}\n\nrest"
    assert insert_episode_skill("Your question: q\nrest", SKILL) == f"Your question: q\n\n{SECTION}\n\nrest"


def test_before_turn_anchor_without_task_line() -> None:
    prompt = "Sokoban legend.\nCurrent grid:\n#P_O#\n\nNow it's your turn to make a move."
    out = insert_episode_skill(prompt, SKILL)
    assert out == f"Sokoban legend.\nCurrent grid:\n#P_O#\n\n{SECTION}\n\nNow it's your turn to make a move."


def test_appended_at_end_without_task_line_or_anchor() -> None:
    prompt = "Cards: 3 and 4. The current formula is: ''.\n"
    assert insert_episode_skill(prompt, SKILL) == f"Cards: 3 and 4. The current formula is: ''.\n\n{SECTION}"


def test_blank_skill_leaves_prompt_unchanged() -> None:
    prompt = "Your task is to: x\nNow it's your turn."
    assert insert_episode_skill(prompt, "") == prompt
    assert insert_episode_skill(prompt, "   \n") == prompt
