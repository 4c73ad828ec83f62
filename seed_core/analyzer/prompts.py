"""The hindsight-analysis prompt (OPID structure, our wording) and its retry variant.

The analyzer sees one finished trajectory (raw observations, responses, per-step discounted returns)
and its outcome, and answers with one JSON object {episode_summary, episode_skill, step_skills}
(seed-algorithm.md §2.3). SEED uses only the episode-level skill, so by default (``max_step_skills=0``)
the prompt asks for an empty ``step_skills`` object; the JSON shape stays OPID's so one parser fits both.

The wording lives in two templates with ``{{name}}`` placeholders (``analysis_template``, ``retry_template``), the
same text MLflow's prompt registry versions (``registry_prompts``, registered by ``seed_core.tracking.use_prompts``):
each prompt sent is its template rendered by ``render``, so a run that names a registered version names the exact
wording it sent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Sequence

PROMPT_VERSION = "opid-v1"
"""Bump when the wording below changes: annotations (and the SFT data built from them) are keyed by it."""

ANALYSIS_PROMPT = "seed-analysis"
"""Registry name of the analysis prompt that asks for the episode-level skill only (Stage 1, SEED's analyses)."""
STEP_ANALYSIS_PROMPT = "seed-analysis-step-skills"
"""Registry name of the analysis prompt that also asks for step skills (algorithms with ``step_skills``)."""
RETRY_PROMPT = "seed-analysis-retry"
"""Registry name of the re-ask after an answer that did not parse."""
_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")

RETRY_TAIL_CHARS = 2000
"""How much of a failed answer the retry prompt quotes back (OPID: the last 2000 characters)."""

_OUTCOME_LABELS: dict[bool | None, str] = {True: "success", False: "failure", None: "unknown"}

_SKILL_GUIDANCE: dict[str, str] = {
    "success": (
        "The episode succeeded, so distil it into a workflow: the core decision rule and the order of "
        "actions that made it work, stated so the agent can repeat it on a similar task."
    ),
    "failure": (
        "The episode failed, so distil it into avoidance rules: the core mistake, the warning signs that "
        "came before it, and what the agent should do instead."
    ),
    "unknown": (
        "The outcome is unknown, so write either a workflow (the decision rule and action order that "
        "advanced the task) or avoidance rules (the core mistake and its warning signs), whichever the "
        "trajectory supports better."
    ),
}


@dataclass(frozen=True)
class AnalysisStep:
    """One step of the trajectory as the analyzer sees it (seed-algorithm.md §2.2)."""

    index: int
    """0-based step index."""
    observation: str
    """Raw environment observation before the action (no template, no history)."""
    response: str
    """The agent's full response text (reasoning included)."""
    discounted_return: float
    """G_t = sum_{k>=t} gamma^(k-t) r_k."""


def discounted_returns(rewards: Sequence[float], gamma: float = 0.95) -> list[float]:
    """Per-step discounted returns ``G_t = r_t + gamma * G_{t+1}`` (``G_T = r_T``), one per reward.

    ``rewards``: (T,) step rewards of one trajectory; returns (T,) floats. OPID uses gamma = 0.95.
    """
    returns = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        returns[t] = running
    return returns


def outcome_label(success: bool | None) -> str:
    """``success`` / ``failure`` / ``unknown`` as written in the prompt."""
    return _OUTCOME_LABELS[success]


def _step_skills_field(step_skills: bool) -> str:
    if not step_skills:
        return '"step_skills": leave this an empty object {}; only the episode-level skill is used.'
    return (
        '"step_skills": concise, action-oriented decision skills for at most {{max_step_skills}} critical '
        "steps chosen from the candidate step indices, inferred from the whole episode but phrased as "
        "advice the agent can use at that step."
    )


def _step_constraints(step_skills: bool) -> list[str]:
    if not step_skills:
        return ["- Do not write step-level skills: step_skills must be {}."]
    return [
        "- Use the full episode to say what each critical step should have done better.",
        "- Each step skill is one short imperative sentence for the agent at that step, not a retrospective.",
        "- The chosen steps are the keys of step_skills: at most {{max_step_skills}}, "
        "taken from the candidate step indices.",
    ]


PLACEHOLDER = "string"
"""The value every field of the answer skeleton shows; an analysis whose skill is this text copied the skeleton
(``seed_core.analyzer.parse.skill_metrics`` counts them)."""


def _skeleton(max_step_skills: int) -> str:
    value = json.dumps(PLACEHOLDER)
    step_skills = f'{{"0": {value}, "2": {value}}}' if max_step_skills > 0 else "{}"
    return "\n".join([
        "{",
        f'  "episode_summary": {value},',
        f'  "episode_skill": {value},',
        f'  "step_skills": {step_skills}',
        "}",
    ])


def _trajectory_block(steps: Sequence[AnalysisStep]) -> list[str]:
    lines: list[str] = []
    for step in steps:
        lines += [
            f"Step {step.index}",
            f"Observation: {step.observation.strip()}",
            f"Response: {step.response.strip()}",
            f"Return: {step.discounted_return:.6f}",
            "",
        ]
    return lines


def render(template: str, **values: object) -> str:
    """``template`` with each ``{{name}}`` replaced by ``str(values[name])``, in one pass: a value that itself holds
    ``{{...}}`` (an observation, an answer) is inserted as it is. A placeholder without a value is a KeyError."""
    return _PLACEHOLDER.sub(lambda match: str(values[match.group(1)]), template)


def analysis_template(step_skills: bool = False) -> str:
    """The analysis prompt with placeholders: ``task_description``, ``skill_guidance`` (``skill_guidance``),
    ``episode_success`` (``outcome_label``), ``candidate_steps`` (comma-separated indices), ``trajectory`` (the step
    blocks) and, with ``step_skills``, ``max_step_skills``."""
    lines = [
        "Analyse the agent episode below and return only valid JSON.",
        "",
        "Complete all three fields:",
        '1. "episode_summary": a concise summary of what the agent did and how the episode ended.',
        '2. "episode_skill": one reusable skill for this kind of task. {{skill_guidance}}',
        "3. " + _step_skills_field(step_skills),
        "",
        "Constraints:",
        "- Step indices are 0-based.",
        "- Judge progress using the task description and the context of each step.",
        "- Write skills as guidance the agent can follow next time (imperative), "
        "not as a story of this episode.",
        *_step_constraints(step_skills),
        "- Return only these top-level fields: episode_summary, episode_skill, step_skills.",
        "",
        "Return format (one JSON object, no other text):",
        _skeleton(1 if step_skills else 0),
        "",
        "Task description: {{task_description}}",
        "episode_success: {{episode_success}}",
        "Candidate step indices: [{{candidate_steps}}]",
        "",
        "Interaction trajectory:",
        "{{trajectory}}",
    ]
    return "\n".join(lines)


def skill_guidance(success: bool | None) -> str:
    """The ``skill_guidance`` of an episode with this outcome (a workflow, avoidance rules, or either)."""
    return _SKILL_GUIDANCE[outcome_label(success)]


def build_analysis_prompt(
    task_description: str,
    steps: Sequence[AnalysisStep],
    success: bool | None,
    max_step_skills: int = 0,
) -> str:
    """The single user message asking the analyzer for {episode_summary, episode_skill, step_skills}."""
    text = render(analysis_template(max_step_skills > 0), task_description=task_description.strip(),
                  skill_guidance=skill_guidance(success), episode_success=outcome_label(success),
                  candidate_steps=", ".join(str(step.index) for step in steps),
                  trajectory="\n".join(_trajectory_block(steps)), max_step_skills=max_step_skills)
    return text.rstrip("\n") + "\n"


def retry_template() -> str:
    """The re-ask with placeholders: ``original_prompt``, ``error`` and ``previous_output_tail`` (the last
    ``RETRY_TAIL_CHARS`` characters of the answer that did not parse)."""
    return "\n".join([
        "{{original_prompt}}",
        "",
        "Your previous answer could not be used: {{error}}",
        f"The last {RETRY_TAIL_CHARS} characters of your previous answer were:",
        "<<<",
        "{{previous_output_tail}}",
        ">>>",
        "Return exactly one JSON object of this shape and nothing else:",
        _skeleton(0),
    ]) + "\n"


def build_retry_prompt(original_prompt: str, error: str, previous_output: str) -> str:
    """Re-ask after a parse failure: original prompt, the error, the tail of the failed answer, the shape."""
    return render(retry_template(), original_prompt=original_prompt.rstrip("\n"), error=error,
                  previous_output_tail=previous_output[-RETRY_TAIL_CHARS:])


def registry_prompts(step_skills: bool = False, retry: bool = True) -> dict[str, str]:
    """Registry name -> template of the prompts an analysis sends: the analysis prompt (with or without step
    skills) and, when answers that do not parse are re-asked (``annotate.parse_attempts`` > 1), the retry."""
    prompts = {STEP_ANALYSIS_PROMPT if step_skills else ANALYSIS_PROMPT: analysis_template(step_skills)}
    return prompts | ({RETRY_PROMPT: retry_template()} if retry else {})


def registry_tags() -> dict[str, str]:
    """What a registered version holds beside its template: the prompt version the annotations are keyed by and
    the three ``skill_guidance`` texts (a change to either is a new version)."""
    return {"prompt_version": PROMPT_VERSION, **{f"skill_guidance.{k}": v for k, v in _SKILL_GUIDANCE.items()}}
