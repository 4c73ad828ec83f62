"""Robust extraction of the analyzer's JSON answer (seed-algorithm.md §2.4; pure functions).

Analyzer output is often not clean JSON: reasoning text before it (``reasoning_content`` is prepended),
markdown fences, helper objects, single quotes, trailing commas. Fallback order, as in OPID:
candidate texts = each fenced ```json block, then the whole text, each also with trailing commas
removed; in each, ``json`` ``raw_decode(strict=False)`` at every '{'; if no decoded object has an
``episode_skill``, balanced-brace slices through ``ast.literal_eval``. The first object with
``episode_skill`` wins, else the first object found.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from seed_core.analyzer.prompts import PLACEHOLDER

_FENCED_JSON = re.compile(r"```json\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


class AnalysisParseError(ValueError):
    """The analyzer's answer holds no usable JSON object (no object, or no non-empty episode_skill)."""


@dataclass(frozen=True)
class ParsedAnalysis:
    """The three fields of one analysis; ``step_skills`` maps 0-based step index -> skill."""

    episode_summary: str
    episode_skill: str
    step_skills: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> str:
        """Canonical JSON text (the Stage-1 SFT target): fixed key order, string step keys."""
        return json.dumps(
            {
                "episode_summary": self.episode_summary,
                "episode_skill": self.episode_skill,
                "step_skills": {str(k): v for k, v in self.step_skills.items()},
            },
            ensure_ascii=False,
        )


def _candidate_texts(text: str) -> list[str]:
    bases = [m.group(1) for m in _FENCED_JSON.finditer(text)] + [text]
    out: list[str] = []
    for base in bases:
        out.append(base)
        without_commas = _TRAILING_COMMA.sub(r"\1", base)
        if without_commas != base:
            out.append(without_commas)
    return out


def _balanced_slices(text: str) -> Iterator[str]:
    """Every ``{ ... }`` span whose braces balance, ignoring braces inside '...' or "..." strings."""
    for start, char in enumerate(text):
        if char != "{":
            continue
        depth, quote, escaped = 0, "", False
        for pos in range(start, len(text)):
            c = text[pos]
            if quote:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == quote:
                    quote = ""
            elif c in "'\"":
                quote = c
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    yield text[start : pos + 1]
                    break


def _decode_objects(text: str) -> list[dict[Any, Any]]:
    decoder = json.JSONDecoder(strict=False)
    objects: list[dict[Any, Any]] = []
    for start, char in enumerate(text):
        if char != "{":
            continue
        try:
            obj, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            objects.append(obj)
    if any("episode_skill" in obj for obj in objects):
        return objects
    # Python-literal fallback (single quotes). Also tried when JSON found only nested helpers, e.g.
    # the "{}" inside {'episode_skill': 'x', 'step_skills': {}} (OPID tries it only if nothing decodes).
    for chunk in _balanced_slices(text):
        try:
            obj = ast.literal_eval(chunk)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(obj, dict):
            objects.append(obj)
    return objects


def find_analysis_object(text: str) -> dict[Any, Any] | None:
    """The object that holds the analysis: the first with ``episode_skill``, else the first found."""
    first: dict[Any, Any] | None = None
    for candidate in _candidate_texts(text):
        for obj in _decode_objects(candidate):
            if "episode_skill" in obj:
                return obj
            if first is None:
                first = obj
    return first


def _as_text(value: Any) -> str:
    """A field value as stripped text; a list of strings (a rule list) is joined with spaces."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return " ".join(v.strip() for v in value if v.strip())
    return ""


def _step_index(key: Any) -> int | None:
    if isinstance(key, bool):
        return None
    try:
        index = int(str(key).strip())
    except ValueError:
        return None
    return index if index >= 0 else None


def _step_skills(raw: Any, candidate_steps: Sequence[int], max_step_skills: int) -> dict[int, str]:
    if not isinstance(raw, dict) or max_step_skills <= 0:
        return {}
    allowed = set(candidate_steps)
    skills: dict[int, str] = {}
    for key, value in raw.items():
        index, skill = _step_index(key), _as_text(value)
        if index is None or not skill or (allowed and index not in allowed) or index in skills:
            continue
        skills[index] = skill
        if len(skills) == max_step_skills:
            break
    return skills


def parse_analysis(
    text: str, candidate_steps: Sequence[int] = (), max_step_skills: int = 0
) -> ParsedAnalysis:
    """Parse one analyzer answer; raises ``AnalysisParseError`` with the reason when it is unusable.

    ``step_skills`` keys are cast to int (others dropped), kept only if in ``candidate_steps`` (when
    given), and truncated to the first ``max_step_skills`` in output order (0 = episode-level only).
    """
    obj = find_analysis_object(text)
    if obj is None:
        snippet = text.strip()[:200] or "<empty>"
        raise AnalysisParseError(f"no JSON object found in the analyzer answer (starts: {snippet!r})")
    skill = _as_text(obj.get("episode_skill"))
    if not skill:
        state = "is empty" if "episode_skill" in obj else "is missing"
        raise AnalysisParseError(
            f"the JSON object's 'episode_skill' field {state}; found keys {sorted(map(str, obj))}"
        )
    return ParsedAnalysis(
        episode_summary=_as_text(obj.get("episode_summary")),
        episode_skill=skill,
        step_skills=_step_skills(obj.get("step_skills"), candidate_steps, max_step_skills),
    )


def skill_metrics(skills: list[str], prefix: str) -> dict[str, float]:
    """``<prefix>/skill_words_mean`` (words per parsed skill, 0 without skills), ``<prefix>/distinct_skills``
    (how many different skill texts: 1 of N means the analyzer says the same thing about every episode) and
    ``<prefix>/placeholder_share`` = #{skills that are the answer skeleton's ``PLACEHOLDER``} / #skills (0 without
    skills): such an answer parses, and the teacher is then shown the word "string" as its skill (a 135M stand-in
    annotator copied the skeleton in 3 of 4 answers, and the analyzer SFT'd on them copied it too, rehearsal at
    609a0d8)."""
    words = [len(s.split()) for s in skills]
    copied = sum(s.strip().lower() == PLACEHOLDER for s in skills)
    return {f"{prefix}/skill_words_mean": sum(words) / len(words) if words else 0.0,
            f"{prefix}/distinct_skills": float(len(set(skills))),
            f"{prefix}/placeholder_share": copied / len(skills) if skills else 0.0}
