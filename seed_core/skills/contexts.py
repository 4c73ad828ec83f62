"""Teacher contexts: how the teacher (skill-augmented) prompt ids of one step are built (DESIGN §7).

``TEACHER_CONTEXTS`` maps ``Algorithm.context`` to a record naming its skill source and its builder:

- ``hindsight_after_task_line`` (SEED, OPID; seed-algorithm.md §2.5): the trajectory's hindsight skill is
  inserted into the user message right after the task line, then the chat template is applied. With a
  step skill for this step (OPID ``step_priority`` routing, §1.8), the step-skill prompt is used instead:
  the step section before the "Now it's your turn" anchor.
- ``static_before_chat_template`` (SDAR family; §2.6): the static skill of the task's type is prepended,
  as ``[Privileged Skill Information]`` + newline + skill + blank line, to the *chat-templated* text, i.e.
  before the template's first token, then re-tokenised without a template.

Every round's teacher prompts pass ``check_teacher_rows`` (issue 44): a teacher prompt whose response boundary moved
(it does not end with the template's tail, as the student's does) or that holds no skill fails the round in one
line naming the row; one the skill pushes over ``generation.max_prompt_tokens`` is cut from the left as OPID does
(it loses the system turn, the task line or the skill itself) and counted in a warning naming the budget that fits.

Controls that separate hindsight credit from self-imitation (issue 25; seed-algorithm.md §8: with a gap of ~0
the gate is 0.5 everywhere and L_OPD is self-imitation at weight lambda/2). Both keep the teacher mask of
``hindsight_after_task_line``: a step has a teacher iff its own trajectory's analysis parsed.

- ``hindsight_shuffled``: the skill of *another task's* trajectory whose answer differs (``shuffle_skills``:
  the environment's ``judge_skill`` rejects it for this task), the candidate closest in length, inserted the
  same way. A trajectory with no such candidate gets no teacher.
- ``hindsight_empty``: the same section with nothing between its brackets (presence of a skill, no content).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Callable

from seed_core.modeling.models import encode_prompt, make_encoder
from seed_core.registry import Registry
from seed_core.runtime.io import KnownError
from seed_core.skills.insert import insert_episode_skill, insert_step_skill

log = logging.getLogger(__name__)

STATIC_SKILL_HEADER = "[Privileged Skill Information]"


@dataclass(frozen=True)
class Encoders:
    """Text -> ids functions of one tokenizer. ``chat`` cuts from the left to the prompt budget as the generation
    backends do (the student's prompt as it was sampled from); the teacher's (``full``, ``raw``) do not cut:
    ``check_teacher_rows`` does, and counts what the skill cut."""

    chat: Callable[[str], list[int]]
    """user text -> chat-templated prompt ids (with the generation prompt), cut to ``budget`` from the left."""
    template: Callable[[str], str]
    """user text -> chat-templated prompt *text* (special tokens as text)."""
    raw: Callable[[str], list[int]]
    """text -> ids, no template, no added special tokens, not cut."""
    decode: Callable[[list[int]], str] | None = None
    """ids -> text without special tokens (how a backend's completion text is made); finds the action's tokens."""
    full: Callable[[str], list[int]] | None = None
    """``chat`` without the cut (teacher prompts); None: ``chat``."""
    budget: int = 0
    """``generation.max_prompt_tokens``: ``check_teacher_rows`` cuts teacher prompts to it (0: no cut)."""
    tail: tuple[int, ...] = ()
    """The template's ids after the user content (end of turn + generation prompt): every prompt ends with them,
    so the response ids follow them in the student's row and in the teacher's alike."""


def make_encoders(tokenizer: Any, chat_template_kwargs: dict[str, Any], max_prompt_tokens: int) -> Encoders:
    """The encoders of ``tokenizer``; ``tail`` = the common suffix of two one-character prompts' ids."""
    def template(text: str) -> str:
        return tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                             tokenize=False, **(chat_template_kwargs or {}))

    def raw(text: str) -> list[int]:
        return [int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]]

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True)

    def full(text: str) -> list[int]:
        return encode_prompt(tokenizer, text, chat_template_kwargs)

    return Encoders(chat=make_encoder(tokenizer, chat_template_kwargs, max_prompt_tokens), template=template,
                    raw=raw, decode=decode, full=full, budget=max_prompt_tokens,
                    tail=tuple(common_suffix(full("0"), full("1"))))


def common_suffix(a: list[int], b: list[int]) -> list[int]:
    """The longest list both ``a`` and ``b`` end with."""
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return a[len(a) - n:]


class TeacherRowError(KnownError, ValueError):
    """A teacher row would not re-score the student's sampled tokens after the student's prompt with a skill."""


def check_teacher_rows(rows: list[str], prompts: list[list[int]], teachers: list[list[int] | None],
                       enc: Encoders) -> list[list[int] | None]:
    """The teacher prompts as the teacher rows use them, or one line naming a row (its trajectory and step) and the
    fix. A teacher row is ``teacher + response_ids`` with the student's sampled ``response_ids`` (``build_samples``
    passes the very same lists), so for each row with a teacher (None: no skill, no teacher) it must hold:

    - both prompts end with ``enc.tail`` (end of turn + generation prompt): the response starts where it did;
    - ``teacher != prompt``: the skill is in the teacher's context (else it is self-distillation).

    A teacher prompt over ``enc.budget`` (``generation.max_prompt_tokens``) is cut from the left to it, as the
    student's was when it was sampled (OPID ``truncation=left``), and rechecked; where the student's prompt was under
    the budget the skill is what cut it (the teacher lost the system turn, the task line or the skill itself), and
    where the cut leaves it equal to the student's the skill is gone: both are counted in one warning per call that
    names the budget that fits. Not an error: small CPU budgets (256 in the test configurations) cut prompts.
    Encoders without a tail (hand-made ones in tests) skip the checks. Cost: per row one length test, two
    comparisons of ``len(tail)`` ids and one list comparison, against the tokenisation that built them."""
    budget, k, out, cut, lost, longest = enc.budget, len(enc.tail), [], 0, 0, 0
    fix = "the teacher context (seed_core/skills/contexts.py TEACHER_CONTEXTS) is wrong"
    for row, prompt, teacher in zip(rows, prompts, teachers, strict=True):
        if teacher is not None and k:
            if tuple(teacher[-k:]) != enc.tail or tuple(prompt[-k:]) != enc.tail:
                raise TeacherRowError(f"{row}: the teacher prompt ends with {teacher[-k:]}, the student's with "
                                      f"{prompt[-k:]}, not both with the template's tail {list(enc.tail)}: the "
                                      f"response would not start at the same place; {fix}")
            if teacher == prompt:
                raise TeacherRowError(f"{row}: the teacher prompt equals the student's ({len(prompt)} tokens): "
                                      f"the skill is not in the teacher's context; {fix}")
        if teacher is not None and budget and len(teacher) > budget:
            longest, teacher = max(longest, len(teacher)), teacher[-budget:]
            cut, lost = cut + (len(prompt) < budget), lost + (k > 0 and teacher == prompt)
        out.append(teacher)
    if cut or lost:
        log.warning("%d of %d teacher prompts were cut from the left by their skill and %d lost it entirely (the "
                    "longest %d tokens, generation.max_prompt_tokens=%d): raise generation.max_prompt_tokens to at "
                    "least %d", cut, len(rows), lost, longest, budget, longest)
    return out


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
    chat = enc.full or enc.chat
    if skills.step.strip():  # step_priority: a step with a step skill is scored with the step prompt only
        return chat(insert_step_skill(prompt, skills.step))
    if skills.episode.strip():
        return chat(insert_episode_skill(prompt, skills.episode))
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
    return (enc.full or enc.chat)(insert_episode_skill(prompt, "", keep_empty=True))


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
    """Skills of a step from the static library (``seed_core.skills.static``): its task type's text."""
    def of(record: Any) -> StepSkills:
        return StepSkills(episode=library.skill_for(record.task_type, record.task_id))

    return of
