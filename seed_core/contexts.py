"""Teacher contexts: how the teacher (skill-augmented) prompt ids of one step are built (DESIGN §7).

``TEACHER_CONTEXTS`` maps ``Algorithm.context`` to a record naming its skill source and its builder:

- ``hindsight_after_task_line`` (SEED, OPID; seed-algorithm.md §2.5): the trajectory's hindsight skill is
  inserted into the user message right after the task line, then the chat template is applied. With a
  step skill for this step (OPID ``step_priority`` routing, §1.8), the step-skill prompt is used instead:
  the step section before the "Now it's your turn" anchor.
- ``static_before_chat_template`` (SDAR family; §2.6): the static skill of the task's type is prepended,
  as ``[Privileged Skill Information]`` + newline + skill + blank line, to the *chat-templated* text, i.e.
  before the template's first token, then re-tokenised without a template and cut from the left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from seed_core.skill_insert import insert_episode_skill, insert_step_skill
from seed_core.registry import Registry

STATIC_SKILL_HEADER = "[Privileged Skill Information]"


@dataclass(frozen=True)
class Encoders:
    """Text -> ids functions of one tokenizer; every result is cut from the left to the prompt budget."""

    chat: Callable[[str], list[int]]
    """user text -> chat-templated prompt ids (with the generation prompt)."""
    template: Callable[[str], str]
    """user text -> chat-templated prompt *text* (special tokens as text)."""
    raw: Callable[[str], list[int]]
    """text -> ids, no template, no added special tokens."""


def make_encoders(tokenizer: Any, chat_template_kwargs: dict[str, Any], max_prompt_tokens: int) -> Encoders:
    from seed_core.models import make_encoder

    def template(text: str) -> str:
        return tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                             tokenize=False, **(chat_template_kwargs or {}))

    def raw(text: str) -> list[int]:
        ids = [int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]]
        return ids[-max_prompt_tokens:] if len(ids) > max_prompt_tokens else ids

    return Encoders(chat=make_encoder(tokenizer, chat_template_kwargs, max_prompt_tokens), template=template,
                    raw=raw)


@dataclass(frozen=True)
class StepSkills:
    """The skills available to one step: its trajectory's episode skill and this step's own step skill."""

    episode: str = ""
    step: str = ""


ContextBuilder = Callable[[str, StepSkills, Encoders], "list[int] | None"]


@dataclass(frozen=True)
class TeacherContext:
    name: str
    source: str
    """``hindsight`` (per-trajectory analyzer annotations) or ``static`` (the static skill library)."""
    build: ContextBuilder
    """(user prompt text, skills, encoders) -> teacher prompt ids, or None when there is no skill."""


TEACHER_CONTEXTS: Registry[TeacherContext] = Registry("teacher context")


def _hindsight(prompt: str, skills: StepSkills, enc: Encoders) -> list[int] | None:
    if skills.step.strip():  # step_priority: a step with a step skill is scored with the step prompt only
        return enc.chat(insert_step_skill(prompt, skills.step))
    if skills.episode.strip():
        return enc.chat(insert_episode_skill(prompt, skills.episode))
    return None


def static_teacher_text(templated_prompt: str, skill: str) -> str:
    """SDAR's teacher text: header, skill, blank line, then the chat-templated prompt (§2.6)."""
    return f"{STATIC_SKILL_HEADER}\n{skill.strip()}\n\n{templated_prompt}"


def _static(prompt: str, skills: StepSkills, enc: Encoders) -> list[int] | None:
    if not skills.episode.strip():
        return None
    return enc.raw(static_teacher_text(enc.template(prompt), skills.episode))


for _ctx in (TeacherContext("hindsight_after_task_line", "hindsight", _hindsight),
             TeacherContext("static_before_chat_template", "static", _static)):
    TEACHER_CONTEXTS.register(_ctx.name)(_ctx)


SkillsOf = Callable[[Any], StepSkills]
"""step record -> its skills."""


def hindsight_skills(annotations: Any, *, step_skills: bool = False) -> SkillsOf:
    """Skills of a step from the analyzer annotations of its trajectory: the episode skill of those that
    parsed (the others: none, so no teacher), and with ``step_skills`` the step's own skill (§1.8)."""
    import json

    episode = {a.traj_id: a.episode_skill for a in annotations if a.ok}
    steps: dict[tuple[str, int], str] = {}
    if step_skills:
        for a in annotations:
            if a.traj_id not in episode:
                continue  # an analysis that failed gives no teacher signal at all
            try:
                parsed = json.loads(a.step_skills or "{}")
            except json.JSONDecodeError:
                parsed = {}
            for key, text in (parsed.items() if isinstance(parsed, dict) else ()):
                if str(key).lstrip("-").isdigit() and isinstance(text, str) and text.strip():
                    steps[(a.traj_id, int(key))] = text

    def of(record: Any) -> StepSkills:
        return StepSkills(episode=episode.get(record.traj_id, ""), step=steps.get((record.traj_id, record.step), ""))

    return of


def static_skills(library: Any) -> SkillsOf:
    """Skills of a step from the static library (``seed_core.static_skills``): its task type's text."""
    def of(record: Any) -> StepSkills:
        return StepSkills(episode=library.skill_for(record.task_type, record.task_id))

    return of
