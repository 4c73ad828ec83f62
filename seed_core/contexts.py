"""Teacher contexts: how the teacher (skill-augmented) prompt ids of one step are built (DESIGN §7).

``TEACHER_CONTEXTS`` maps ``Algorithm.context`` to a record naming its skill source and its builder:

- ``hindsight_after_task_line`` (SEED, OPID; seed-algorithm.md §2.5): the trajectory's hindsight skill is
  inserted into the user message right after the task line, then the chat template is applied. With a
  step skill for this step (OPID ``step_priority`` routing, §1.8), the step-skill prompt is used instead:
  the step section before the "Now it's your turn" anchor.
- ``static_before_chat_template`` (SDAR family; §2.6): the static skill of the task's type is prepended,
  as ``[Privileged Skill Information]`` + newline + skill + blank line, to the *chat-templated* text, i.e.
  before the template's first token, then re-tokenised without a template and cut from the left.

Controls that separate hindsight credit from self-imitation (issue 25; seed-algorithm.md §8: with a gap of ~0
the gate is 0.5 everywhere and L_OPD is self-imitation at weight lambda/2). Both keep the teacher mask of
``hindsight_after_task_line``: a step has a teacher iff its own trajectory's analysis parsed.

- ``hindsight_shuffled``: the skill of *another task's* trajectory whose answer differs (``shuffle_skills``:
  the environment's ``judge_skill`` rejects it for this task), the candidate closest in length, inserted the
  same way. A trajectory with no such candidate gets no teacher.
- ``hindsight_empty``: the same section with nothing between its brackets (presence of a skill, no content).
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
    decode: Callable[[list[int]], str] | None = None
    """ids -> text without special tokens (how a backend's completion text is made); finds the action's tokens."""


def make_encoders(tokenizer: Any, chat_template_kwargs: dict[str, Any], max_prompt_tokens: int) -> Encoders:
    from seed_core.models import make_encoder

    def template(text: str) -> str:
        return tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                             tokenize=False, **(chat_template_kwargs or {}))

    def raw(text: str) -> list[int]:
        ids = [int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]]
        return ids[-max_prompt_tokens:] if len(ids) > max_prompt_tokens else ids

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True)

    return Encoders(chat=make_encoder(tokenizer, chat_template_kwargs, max_prompt_tokens), template=template,
                    raw=raw, decode=decode)


@dataclass(frozen=True)
class StepSkills:
    """The skills available to one step: its trajectory's episode skill and this step's own step skill."""

    episode: str = ""
    step: str = ""


ContextBuilder = Callable[[str, StepSkills, Encoders], "list[int] | None"]
Judge = Callable[[Any, str], bool]
"""(task, skill text) -> whether the skill states a correct plan for that task (``TextEnv.judge_skill``)."""
Pairing = Callable[[dict[str, str], dict[str, Any], "Judge | None"], dict[str, str]]
"""(traj_id -> own skill, traj_id -> Task, judge) -> traj_id -> the skill its teacher sees."""


@dataclass(frozen=True)
class TeacherContext:
    name: str
    source: str
    """``hindsight`` (per-trajectory analyzer annotations) or ``static`` (the static skill library)."""
    build: ContextBuilder
    """(user prompt text, skills, encoders) -> teacher prompt ids, or None when there is no skill."""
    pairing: Pairing | None = None
    """Which trajectory's hindsight skill a trajectory's teacher sees: None = its own; ``shuffle_skills`` = one of
    another task whose answer differs (``hindsight_skills`` applies it)."""


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


def _empty(prompt: str, skills: StepSkills, enc: Encoders) -> list[int] | None:
    """The episode-skill section with nothing in it, where the trajectory has a skill (the same mask)."""
    if not (skills.step.strip() or skills.episode.strip()):
        return None
    return enc.chat(insert_episode_skill(prompt, "", keep_empty=True))


def shuffle_skills(skills: dict[str, str], tasks: dict[str, Any], judge: Judge | None = None) -> dict[str, str]:
    """traj_id -> the skill of a trajectory of *another task* whose answer differs: ``judge(task, skill)`` is
    False for this trajectory's task (without a judge: another task and another text). Among those the closest
    in length (characters), ties broken by the rotation order (the trajectories after this one, then the ones
    before it), so a skill is never its own control and lengths stay comparable. No candidate -> no entry.
    ``tasks``: traj_id -> Task (``task_id`` tells tasks apart)."""
    ids = list(skills)
    out: dict[str, str] = {}
    for k, tid in enumerate(ids):
        task, own = tasks[tid], skills[tid]
        found = [o for o in ids[k + 1:] + ids[:k] if tasks[o].task_id != task.task_id and skills[o] != own
                 and (judge is None or not judge(task, skills[o]))]
        if found:
            out[tid] = skills[min(found, key=lambda o: abs(len(skills[o]) - len(own)))]  # min keeps the first tie
    return out


for _ctx in (TeacherContext("hindsight_after_task_line", "hindsight", _hindsight),
             TeacherContext("static_before_chat_template", "static", _static),
             TeacherContext("hindsight_shuffled", "hindsight", _hindsight, pairing=shuffle_skills),
             TeacherContext("hindsight_empty", "hindsight", _empty)):
    TEACHER_CONTEXTS.register(_ctx.name)(_ctx)


SkillsOf = Callable[[Any], StepSkills]
"""step record -> its skills."""


def hindsight_skills(annotations: Any, *, step_skills: bool = False, pairing: Pairing | None = None,
                     tasks: dict[str, Any] | None = None, judge: Judge | None = None) -> SkillsOf:
    """Skills of a step from the analyzer annotations of its trajectory: the episode skill of those that
    parsed (the others: none, so no teacher), and with ``step_skills`` the step's own skill (§1.8).
    ``pairing`` (``TeacherContext.pairing``) swaps each episode skill for another trajectory's, given ``tasks``
    (traj_id -> Task) and the environment's ``judge``."""
    import json

    episode = {a.traj_id: a.episode_skill for a in annotations if a.ok}
    if pairing is not None:
        episode = pairing(episode, tasks or {}, judge)
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
