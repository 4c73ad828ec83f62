"""The static skill library of one environment: SDAR's teacher context (seed-algorithm.md §2.6).

Format (a directory; write your own and point ``rl.static_skills_dir`` at it):

    general_skills.md      skills for every task (may be empty)
    <file>.md              one text per task type
    skill_mapping.json     {"<task type or task-id substring>": "<file>.md", ...}

The skill of a task = ``general_skills.md`` + blank line + the file its type maps to: first an exact
match of the task type, else the first key (in sorted order) that is a substring of the task id (SDAR's
gamefile-substring rule), else the general skills alone.

Default: ``aggregate`` builds it deterministically from the Stage-1 annotations (written by the annotate
stage to ``data/annotate/static_skills``), so it exists for every environment without hand-writing. As in
the paper's static baselines, a task type's text is *type-level* skills (workflow and pitfalls), never one
episode's replay, de-duplicated and bounded to ``annotate.static_skill_tokens`` tokens:

1. **Statements.** Each parsed episode skill is split into sentences (and lines / bullets).
2. **Episode bookkeeping goes**: step references ("At step 3", "in 5 steps", "after 2 turns").
3. **Instance values are summarized.** An environment may define ``instance_values(task) -> {value: phrase}``
   (the values that belong to one instance: EZPoints' two card values, a WebShop goal's product, attributes,
   options and price, a Search-QA question's entities, an ALFWorld goal's object and receptacle types). Every
   whole-word occurrence of a value becomes its type-level phrase (``<product>``), a run of one phrase joined by
   ",", "and", "or", "then" or spaces becomes one. An empty phrase cuts out a *list* of the values ("the card
   numbers 4 and 8, each once" -> "the card numbers, each once"), only where it stands in plain words: a
   single value, or one in quotes or next to an operator (``'4'``, ``4+8``), stays, so step 4 drops it.
4. **Statements that still name one instance are dropped**: one naming a value of its episode's
   ``instance_values``; a number that is not a constant of the type (constants: the numbers in the first
   prompt of *every* annotated episode of the type, from at least two tasks, that are no task's instance value:
   EZPoints' target 12, not a card value its rules text happens to contain); quoted
   text that is neither in every first prompt of the type (``'='``) nor a phrase of step 3 (an agent's own
   answer ``'Paris'``, a formula ``'4+'``); a capitalized word found in its episode's first prompt but not in
   every first prompt of the type (a person, a card name); or a move-by-move replay (three or more
   comma-separated single words not closed by "and"/"or": "up, up, left"). A dropped sentence keeps those of
   its ';'-clauses that pass and have ``MIN_CLAUSE_WORDS`` words or more.
5. **De-duplication**: statements equal up to case, spacing and punctuation are one; a statement whose word
   set overlaps an already kept one by ``NEAR_DUPLICATE`` (Jaccard) or more is merged into it.
6. **Ranking and budget**: by the number of distinct tasks a statement came from, then occurrences, then
   shorter first, then text. ``general`` = statements found under two or more task types (at most
   ``general`` of them, within half the budget), left out of the type texts; then each type's text takes its
   statements in rank order while ``skill_for`` (general + type text, what is put into the prompt) stays
   within the budget (a statement that does not fit is skipped; a shorter one may still fit). The chosen
   statements are written workflow first (those found in a successful episode's skill), then pitfalls (found
   only in failed ones), each part in rank order, as the paper's libraries read.

Tokens are counted with the policy's tokenizer (``token_counter``: the base model in
``<data_dir>/models/base``, else ``model.path``); without one, ``estimate_tokens``: one token per 3
characters, rounded up (BPE tokenizers average 3-4 characters per English token, so the estimate errs long).
The skill section's own title and instruction lines (``seed_core.skills.insert``) come on top of the budget.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from seed_core.config import AnnotateConfig, SeedConfig, project_root
from seed_core.runtime.io import DataFileError, atomic_write_text

GENERAL_FILE = "general_skills.md"
MAPPING_FILE = "skill_mapping.json"


@dataclass(frozen=True)
class StaticSkills:
    general: str = ""
    texts: dict[str, str] = field(default_factory=dict)
    """file name -> skill text of one task type."""
    mapping: dict[str, str] = field(default_factory=dict)
    """task type (or task-id substring) -> file name in ``texts``."""

    def skill_for(self, task_type: str, task_id: str = "") -> str:
        """general + the text of the task's type (module docstring); '' when both are empty."""
        name = self.mapping.get(task_type)
        if name is None:
            name = next((self.mapping[k] for k in sorted(self.mapping) if k and k in task_id), None)
        parts = [self.general.strip(), self.texts.get(name, "").strip() if name else ""]
        return "\n\n".join(p for p in parts if p)

    def write(self, out_dir: str | Path) -> Path:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / GENERAL_FILE, self.general.strip() + "\n")
        for name, text in sorted(self.texts.items()):
            atomic_write_text(out / name, text.strip() + "\n")
        atomic_write_text(out / MAPPING_FILE, json.dumps(self.mapping, indent=2, sort_keys=True) + "\n")
        return out


def load(skills_dir: str | Path) -> StaticSkills:
    """Read a library directory; a clear error names what is missing."""
    root = Path(skills_dir)
    mapping_path = root / MAPPING_FILE
    if not mapping_path.is_file():
        raise DataFileError(f"{mapping_path} does not exist; a static skill library needs {GENERAL_FILE}, "
                            f"{MAPPING_FILE} and one .md per task type (seed_core/skills/static.py)")
    try:
        mapping = json.loads(mapping_path.read_text())
    except json.JSONDecodeError as err:
        raise DataFileError(f"{mapping_path} is not valid JSON ({err})") from None
    if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
        raise DataFileError(f"{mapping_path} must map task types to file names, got {mapping!r}")
    texts = {}
    for name in sorted(set(mapping.values())):
        path = root / name
        if not path.is_file():
            raise DataFileError(f"{mapping_path} names {name}, which is not in {root}")
        texts[name] = path.read_text()
    general = (root / GENERAL_FILE).read_text() if (root / GENERAL_FILE).is_file() else ""
    return StaticSkills(general=general, texts=texts, mapping={str(k): v for k, v in mapping.items()})


def _file_name(task_type: str) -> str:
    return (re.sub(r"[^A-Za-z0-9_.-]+", "_", task_type).strip("._") or "task") + ".md"


def _bullets(skills: Iterable[str]) -> str:
    return "\n".join(f"- {s.strip()}" for s in skills)


NEAR_DUPLICATE = 0.8
"""Word-set Jaccard overlap at which two statements count as one (module docstring, step 5)."""

DEFAULT_BUDGET = AnnotateConfig().static_skill_tokens
"""``annotate.static_skill_tokens``' default."""


def estimate_tokens(text: str) -> int:
    """Token estimate without a tokenizer: one per 3 characters, rounded up (module docstring)."""
    return -(-len(text) // 3)


@dataclass(frozen=True)
class Note:
    """One parsed episode skill and what is known of its episode (module docstring)."""

    skill: str
    task_id: str = ""
    """The task it came from: statements are ranked by the number of distinct tasks behind them."""
    prompt: str = ""
    """The episode's first prompt (step 4's constants and entities)."""
    values: dict[str, str] = field(default_factory=dict)
    """The task's ``instance_values``: value -> type-level phrase, ``""`` to cut it out (step 3)."""
    success: bool | None = None
    """Whether the episode succeeded: its statements are workflow, else pitfalls (step 6's order)."""


_STEP_REFS = (
    re.compile(r"\b(?:at|in|on|from|by|after|before|until)\s+(?:step|turn|round)\s+\d+\b,?\s*", re.I),
    re.compile(r"\s*\b(?:in|after|within|for)\s+\d+\s+(?:steps?|turns?|moves?|rounds?)\b", re.I),
)
_SEPARATOR = r"(?:\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|then)\s+|\s+)"
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")
_CAPITALIZED = re.compile(r"\b[A-Z][A-Za-z]+\b")
_QUOTED = re.compile(r"(?<!\w)'([^'\n]{1,80})'(?!\w)|\"([^\"\n]{1,80})\"")
_REPLAY = re.compile(r"(?<![\w,])\w+(?:,\s+\w+){2,}(?!\w|,\s*\w|,?\s+(?:and|or)\b)")
_NOT_CUT_NEXT_TO = set("'\"+*/=^-<>[]")


def statements(skill: str) -> list[str]:
    """Sentences of one skill text (lines and bullets first)."""
    out = []
    for line in skill.splitlines():
        line = re.sub(r"^\s*(?:[-*\u2022]|\d+[.)])\s+", "", line).strip()
        out += [part.strip() for part in re.split(r"(?<=[.!?])\s+(?=[A-Z<'\"(\[])", line) if part.strip()]
    return out


def _tidy(text: str) -> str:
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\s+([,.;:!?)\]])", r"\1", text)
    text = re.sub(r"([(\[])\s+", r"\1", text)
    text = re.sub(r"([,;:])(?:\s*[,;])+", r"\1", text).strip(" ,;")
    return text[:1].upper() + text[1:]


def _cut(text: str, values: Iterable[str]) -> str:
    """Remove runs of two or more ``values`` that stand as plain words (step 3); a single one, or one in quotes
    or a formula, stays."""
    alternation = "|".join(re.escape(v) for v in sorted(values, key=len, reverse=True))
    one = rf"(?<![\w$])(?:{alternation})(?!\w)"
    run = re.compile(rf"\s*{one}(?:{_SEPARATOR}{one})+", re.I)

    def drop(match: re.Match[str]) -> str:
        before = text[: match.start()].rstrip()[-1:]
        after = text[match.end():].lstrip()[:1]
        return match.group(0) if before in _NOT_CUT_NEXT_TO or after in _NOT_CUT_NEXT_TO else ""

    return run.sub(drop, text)


def abstract(statement: str, values: dict[str, str]) -> str:
    """``statement`` without episode bookkeeping and with its instance values summarized (steps 2-3)."""
    text = statement
    for pattern in _STEP_REFS:
        text = pattern.sub(" ", text)
    phrases = sorted({p for p in values.values() if p})
    markers = [chr(0xE000 + i) for i in range(len(phrases))]  # private-use characters: no value matches them
    for value in sorted((v for v in values if values[v] and v.strip()), key=len, reverse=True):
        marker = markers[phrases.index(values[value])]
        text = re.sub(rf"(?<![\w$]){re.escape(value)}(?!\w)", lambda _, m=marker: m, text, flags=re.I)
    for marker, phrase in zip(markers, phrases):
        text = re.sub(rf"{marker}(?:{_SEPARATOR}{marker})+", marker, text).replace(marker, phrase)
    cut = [v for v in values if not values[v] and v.strip()]
    return _tidy(_cut(text, cut) if cut else text)


@dataclass(frozen=True)
class _TypeView:
    """What step 4 knows of a task type: the first prompts of its tasks and the numbers all of them hold."""

    prompts: tuple[str, ...]
    constants: frozenset[str]

    @classmethod
    def of(cls, notes: Sequence[Note]) -> "_TypeView":
        prompts = tuple(sorted({n.task_id: n.prompt for n in notes if n.prompt and n.task_id}.values()))
        numbers = [set(_NUMBER.findall(p)) for p in prompts]
        values = {v.strip() for n in notes for v in n.values}  # a card value is no constant, even if a rule names it
        constants = frozenset(set.intersection(*numbers) - values) if len(prompts) >= 2 else frozenset()
        return cls(prompts, constants)

    def everywhere(self, term: str, word: bool) -> bool:
        return bool(self.prompts) and all(_contains(p, term, word) for p in self.prompts)


def _contains(text: str, term: str, word: bool) -> bool:
    if not word:
        return term.lower() in text.lower()
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.I) is not None


def instance_specific(statement: str, note: Note, view: _TypeView) -> bool:
    """Whether ``statement`` (already ``abstract``-ed) still names one instance (step 4)."""
    if any(v.strip() and _contains(statement, v, word=True) for v in note.values):
        return True
    if any(n not in view.constants for n in _NUMBER.findall(statement)):
        return True
    if _REPLAY.search(statement):
        return True
    phrases = {p.lower() for p in note.values.values() if p}
    quoted = [q for a, b in _QUOTED.findall(statement) if (q := (a or b).strip()) and q.lower() not in phrases]
    if view.prompts and any(not view.everywhere(q, word=False) for q in quoted):
        return True
    names = _CAPITALIZED.findall(statement)
    return any(_contains(note.prompt, w, word=True) and not view.everywhere(w, word=True) for w in names)


MIN_CLAUSE_WORDS = 6
"""A clause kept from an instance-specific sentence has at least this many words (step 4)."""


def _type_level(statement: str, note: Note, view: "_TypeView") -> list[str]:
    """``statement`` when it is type-level; else its ';'-clauses that are (with ``MIN_CLAUSE_WORDS``)."""
    if not instance_specific(statement, note, view):
        return [statement] if len(_key(statement).split()) >= 3 else []
    clauses = [_tidy(c).rstrip(".") + "." for c in statement.split(";")] if ";" in statement else []
    return [c for c in clauses if len(_key(c).split()) >= MIN_CLAUSE_WORDS and not instance_specific(c, note, view)]


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9<>]+", " ", text.lower()).strip()


def _jaccard(a: str, b: str) -> float:
    x, y = set(a.split()), set(b.split())
    return len(x & y) / max(len(x | y), 1)


@dataclass
class _Candidate:
    spellings: Counter[str] = field(default_factory=Counter)
    """The texts found for this statement (equal up to case, spacing and punctuation) and how often."""
    tasks: set[str] = field(default_factory=set)
    workflow: bool = False
    """Found in a successful episode's skill (else only in failed ones: a pitfall)."""

    @property
    def text(self) -> str:
        """The commonest spelling; ties: one ending a sentence, then the first in text order."""
        return _spelling(self.spellings)

    @property
    def count(self) -> int:
        return sum(self.spellings.values())

    def rank(self) -> tuple[int, int, int, str]:
        return (-len(self.tasks), -self.count, len(self.text), self.text)


def _spelling(spellings: Counter[str]) -> str:
    return min(spellings, key=lambda t: (-spellings[t], not t.endswith((".", "!", "?")), t))


def type_statements(notes: Sequence[Note]) -> list[_Candidate]:
    """The type-level statements of one task type's notes, de-duplicated and ranked (steps 1-6)."""
    view = _TypeView.of(notes)
    found: dict[str, _Candidate] = {}
    for i, note in enumerate(notes):
        for text in (t for raw in statements(note.skill) for t in _type_level(abstract(raw, note.values), note, view)):
            c = found.setdefault(_key(text), _Candidate())
            c.spellings[text] += 1
            c.tasks.add(note.task_id or f"#{i}")
            c.workflow |= note.success is True
    kept: list[_Candidate] = []
    for c in sorted(found.values(), key=_Candidate.rank):
        twin = next((k for k in kept if _jaccard(_key(k.text), _key(c.text)) >= NEAR_DUPLICATE), None)
        if twin is None:
            kept.append(c)
        else:
            twin.tasks |= c.tasks
            twin.workflow |= c.workflow
            twin.spellings.update({twin.text: c.count})  # counted for the kept text
    return sorted(kept, key=_Candidate.rank)


def _render(general: Sequence[str], own: Sequence[str]) -> str:
    """What ``skill_for`` returns for these statements."""
    return "\n\n".join(part for part in (_bullets(general), _bullets(own)) if part)


def _fit(ranked: Iterable[str], general: Sequence[str], budget: int, count: Callable[[str], int]) -> list[str]:
    chosen: list[str] = []
    for text in ranked:
        if count(_render(general, [*chosen, text])) <= budget:
            chosen.append(text)
    return chosen


def _shared_text(candidates: Sequence[_Candidate]) -> str:
    return _spelling(sum((c.spellings for c in candidates), Counter()))


def aggregate(notes_by_type: dict[str, Sequence[Note | str]], budget_tokens: int = DEFAULT_BUDGET,
              count_tokens: Callable[[str], int] = estimate_tokens, general: int = 3) -> StaticSkills:
    """Deterministic, bounded library of type-level skills from episode skills grouped by task type
    (``Note`` or plain text; module docstring)."""
    ranked = {t: type_statements([n if isinstance(n, Note) else Note(n) for n in notes_by_type[t]])
              for t in sorted(notes_by_type)}
    spread: dict[str, list[_Candidate]] = defaultdict(list)
    for candidates in ranked.values():
        for c in candidates:
            spread[_key(c.text)].append(c)
    shared = sorted((cs for cs in spread.values() if len(cs) >= 2),
                    key=lambda cs: (-len(cs), -sum(len(c.tasks) for c in cs), _shared_text(cs)))
    common = _fit([_shared_text(cs) for cs in shared[:general]], [], budget_tokens // 2, count_tokens)
    texts, mapping = {}, {}
    for task_type, candidates in ranked.items():
        own = [c for c in candidates if not any(_jaccard(_key(c.text), _key(g)) >= NEAR_DUPLICATE for g in common)]
        chosen = _fit([c.text for c in own], common, budget_tokens, count_tokens)
        workflow = {c.text for c in own if c.workflow}
        ordered = [t for t in chosen if t in workflow] + [t for t in chosen if t not in workflow]
        fits = count_tokens(_render(common, ordered)) <= budget_tokens
        name = _file_name(task_type)
        texts[name] = _bullets(ordered if fits else chosen)
        mapping[task_type] = name
    return StaticSkills(general=_bullets(common), texts=texts, mapping=mapping)


def token_counter(cfg: SeedConfig) -> tuple[Callable[[str], int], str]:
    """(text -> token count, what counts): the policy's tokenizer (``<data_dir>/models/base``, else
    ``model.path``), or ``estimate_tokens`` when neither directory holds one."""
    from transformers import AutoTokenizer

    from seed_core.modeling.models import resolve_model_path

    candidates = [project_root() / cfg.project.data_dir / "models" / "base"]
    try:
        candidates.append(resolve_model_path(cfg.model.path))
    except (OSError, ValueError):  # no such directory (the testbed before prepare_model): the other or the estimate
        pass
    for candidate in candidates:
        if (candidate / "tokenizer_config.json").is_file():
            try:
                tok = AutoTokenizer.from_pretrained(candidate, local_files_only=True)
            except (OSError, ValueError, TypeError):
                continue
            return (lambda text: len(tok(text, add_special_tokens=False)["input_ids"])), str(candidate)
    return estimate_tokens, "estimate (3 characters per token)"


def resolve(static_skills_dir: str, default_dir: str | Path) -> StaticSkills:
    """The user's library when ``rl.static_skills_dir`` is set, else the aggregated one in ``default_dir``."""
    return load(static_skills_dir or default_dir)


def default_dir(cfg: SeedConfig) -> Path:
    """Where the annotate stage writes the aggregated library: ``<data_dir>/annotate/static_skills``."""
    return project_root() / cfg.project.data_dir / "annotate" / "static_skills"


def for_config(cfg: SeedConfig) -> StaticSkills:
    """``rl.static_skills_dir`` when set, else the aggregated library of this project's annotate stage."""
    return resolve(cfg.rl.static_skills_dir, default_dir(cfg))
