"""``webshop``: find and buy the product an instruction describes, on WebShop's text pages.

* Engine: ``env.webshop.backend`` ``sim`` (``seed_core.webshop.sim`` over the generated catalogue, from
  ``env.webshop.data_dir`` or built in memory) or ``real`` (``seed_core.webshop.real``: the
  princeton-nlp WebShop when installed). Tasks are goal indices: ``test`` = the first
  ``num_test_goals`` goals, ``train`` = the rest (verl-agent: 0-499 validate, 500+ train);
  ``Task.task_type`` = the product category (beauty, electronics, fashion, food, furniture).
* Reward (verl-agent ``webshop/envs.py``): the purchase score r in [0, 1] (``seed_core.webshop.reward``)
  goes to ``info["task_score"]`` (``types.SCORE_INFO_KEY``; carried as ``StepRecord.score`` /
  ``EvalRecord.score``, the paper's Score = mean r x 100); the training reward is 10 on the
  step that buys with r == 1 (success, the paper's Succ), else 0. The episode ends on ``buy now`` or
  after ``env.max_steps`` (15) steps.
* Prompt (verl-agent WebShop template, paraphrased): role, "Your task is to: <instruction>." (the skill
  goes right after this line), the ``[Observation k: ..., Action k: ...]`` history window (2), the
  current page with the instruction removed and every field quoted, the admissible actions one per
  line (``search[<your query>]`` when the page has a search bar, ``click[x]`` per clickable), then the
  "Now it's your turn to take an action." anchor. Over 20 000 characters the history is dropped.
* Parsing: lower-case; the text between the first ``<action>`` and the next ``</action>``; valid iff the
  tags and a ``<think>...</think>`` block are present, there is no CJK text, and the action is admissible
  on the current page (an unknown click target is invalid); without action tags the last 20
  characters are sent, invalid. An inadmissible action changes nothing.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from seed_core.config import project_root
from seed_core.config_envs import EnvConfig, WebShopConfig
from seed_core.data_gen.webshop_catalog import CATEGORIES, CatalogSpec, generate_catalog
from seed_core.envs.base import TimeLimit
from seed_core.envs.prompt_parts import history_block, project_action_tag
from seed_core.types import SCORE_INFO_KEY, HistoryItem, ParsedAction, StepResult, Task
from seed_core.webshop.catalog import Catalog, Goal, read_catalog
from seed_core.webshop.sim import SEP, ShopSearch, WebShopSim, split_action

WIN_REWARD = 10.0
FALLBACK_CHARS = 20
MAX_PROMPT_CHARS = 20_000
_ROLE = "You are an expert autonomous agent shopping on the WebShop e-commerce website."
_TURN = (
    "Now it's your turn to take an action.\n"
    "First reason step by step about the current page and which admissible action best advances the shopping "
    "goal, inside <think> </think> tags. Then write exactly one admissible action inside <action> </action> tags."
)


WebShopSettings = WebShopConfig
"""``env.webshop``: the typed config section (frozen and hashable, so caches are keyed by it)."""


@lru_cache(maxsize=4)
def load_catalog(settings: WebShopSettings) -> tuple[Catalog, ShopSearch]:
    """The catalogue and its search index, once per process and setting."""
    if settings.data_dir:
        root = Path(settings.data_dir).expanduser()
        catalog = read_catalog(root if root.is_absolute() else project_root() / root)
    else:
        catalog = generate_catalog(CatalogSpec(num_products=settings.num_products))
    return catalog, ShopSearch(catalog.products)


def _make_engine(settings: WebShopSettings) -> Any:
    if settings.backend == "real":
        from seed_core.webshop.real import RealWebShop

        return RealWebShop(settings.num_products, settings.human_goals)
    return WebShopSim(*load_catalog(settings))


def page_text(raw: str, instruction: str) -> str:
    """verl-agent's ``format_obs``: the fields after the instruction, each quoted, joined by `` [SEP] ``."""
    parts = raw.split(SEP)
    if instruction in parts:
        parts = parts[parts.index(instruction) + 1:]
    return SEP.join(f"'{p}'" for p in parts)


class WebShopEnv(TimeLimit):
    name: ClassVar[str] = "webshop"
    splits: ClassVar[tuple[str, ...]] = ("train", "test")
    task_types: ClassVar[tuple[str, ...]] = tuple(CATEGORIES)

    def __init__(self, cfg: EnvConfig) -> None:
        self.cfg = cfg
        self.settings = cfg.webshop
        self._engine: Any = None
        self._task: Task | None = None

    @property
    def engine(self) -> Any:
        if self._engine is None:
            self._engine = _make_engine(self.settings)
        return self._engine

    def make_tasks(self, split: str, n: int, seed: int) -> list[Task]:
        """``n`` goals of ``split`` drawn with ``seed`` (all, in order, when ``n <= 0`` or ``n`` covers it)."""
        pool = list(self.panel_universe(split))
        picks = pool if n <= 0 or n >= len(pool) else random.Random(seed).sample(pool, n)
        return self.panel_tasks(split, picks)

    def panel_universe(self, split: str) -> range:
        """The goal indices of ``split``: ``[0, num_test_goals)`` are test, the rest train."""
        total, n_test = self.engine.num_goals, self.settings.num_test_goals
        if not 0 < n_test < total:
            raise ValueError(f"env.webshop.num_test_goals={n_test} must be in 1..{total - 1} ({total} goals)")
        ranges = {"test": range(0, n_test), "train": range(n_test, total)}
        if split not in ranges:
            raise ValueError(f"webshop: unknown split {split!r}; choose one of {', '.join(ranges)}")
        return ranges[split]

    def panel_source(self) -> dict[str, Any]:
        """A goal index means a goal of this catalogue: the env.webshop keys that build it."""
        keys = ("backend", "data_dir", "num_products", "num_test_goals", "human_goals")
        return {f"env.webshop.{k}": getattr(self.settings, k) for k in keys}

    def panel_tasks(self, split: str, ids: Sequence[int | str]) -> list[Task]:
        universe = self.panel_universe(split)
        if bad := [i for i in ids if int(i) not in universe]:
            raise ValueError(f"webshop: goal {bad[0]} is not a {split!r} goal ({universe.start}..{universe.stop - 1})")
        return [Task(env=self.name, task_id=f"webshop-{split}-{i}", seed=int(i), split=split,
                     task_type=self.engine.goal_category(int(i)), payload={"goal_index": int(i)})
                for i in ids]

    def _reset(self, task: Task) -> str:
        raw = self.engine.reset(int(task.payload.get("goal_index", task.seed)))
        self._task = task
        return page_text(raw, self.engine.instruction)

    def admissible_actions(self) -> list[str]:
        available = self.engine.available_actions()
        search = ["search[<your query>]"] if available["has_search_bar"] else []
        return search + [f"click[{c}]" for c in available["clickables"]]

    def build_prompt(self, observation: str, history: list[HistoryItem], step: int) -> str:
        head = f"{_ROLE}\nYour task is to: {self.task_description()}.\n"
        actions = "Your admissible actions of the current situation are:\n[\n" + ",\n".join(self.admissible_actions())
        tail = f"{actions}\n].\n\n{_TURN}"
        current = f"Your current observation is: {observation}.\n"
        if history:
            full = (f"{head}{history_block(history, step)}\nYou are now at step {step + 1} and your current "
                    f"observation is: {observation}.\n{tail}")
            if len(full) <= MAX_PROMPT_CHARS:
                return full
        return f"{head}{current}{tail}"

    def parse_action(self, response: str) -> ParsedAction:
        parsed = project_action_tag(response, FALLBACK_CHARS)
        return ParsedAction(parsed.action, parsed.valid and self.engine.is_admissible(parsed.action))

    def _step(self, action: str) -> StepResult:
        if self._task is None:
            raise RuntimeError("webshop: call reset(task) before step()")
        admissible = self.engine.is_admissible(action)
        raw, score, bought = self.engine.step(action)
        won = bought and score >= 1.0 - 1e-9
        info = {SCORE_INFO_KEY: score, "admissible": admissible, "bought": bought, "task_type": self._task.task_type}
        return StepResult(page_text(raw, self.engine.instruction), WIN_REWARD if won else 0.0, bought, won, info)

    def task_description(self) -> str:
        return " ".join(self.engine.instruction.split()).rstrip(".")

    # --- expert and oracle (privileged: the goal) ---------------------------------------------------

    def expert_action(self) -> str:
        """Search for the goal (type + attributes, else the goal product's title), open the goal product,
        click each goal option, buy. Needs the simulator (the real backend hides its product data)."""
        sim = self._sim()
        goal, st = sim.goal, sim.state
        assert goal is not None
        if st.kind == "search":
            return f"search[{self._expert_query(sim, goal)}]"
        if st.kind == "results":
            if goal.asin in sim.page_asins():
                return f"click[{goal.asin.lower()}]"
            return "click[next >]" if self.engine.is_admissible("click[next >]") else "click[back to search]"
        if st.kind == "item" and st.asin == goal.asin:
            todo = [v for k, v in goal.goal_options.items() if st.options.get(k) != v]
            return f"click[{todo[0]}]" if todo else "click[buy now]"
        return "click[< prev]"

    @staticmethod
    def _expert_query(sim: WebShopSim, goal: Goal) -> str:
        candidates = [f"{goal.query} {' '.join(goal.attributes)}", goal.name.lower()]
        for query in candidates:
            if goal.asin in sim.engine.search(query)[:10]:
                return query
        return candidates[-1]

    def format_response(self, action: str) -> str:
        parsed = split_action(action)
        why = {"search": "I search for the product the task describes.",
               "click": f"Clicking {parsed[1] if parsed else action} moves me toward buying the right product "
                        "with the requested options."}
        thought = why.get(parsed[0] if parsed else "", "I take the next step.")
        return f"<think>{thought}</think><action>{action}</action>"

    def oracle_skill(self, task: Task, actions: list[str], success: bool) -> dict[str, str]:
        """Hindsight from the goal: the workflow that buys it, or what went wrong in the replayed episode."""
        engine = _make_engine(self.settings)
        engine.reset(int(task.payload.get("goal_index", task.seed)))
        goal = engine.goal
        attrs = " and ".join(goal.attributes) or "the requested features"
        options = ", ".join(goal.goal_options.values()) or "none"
        workflow = (f"search[{goal.query} {' '.join(goal.attributes)}], open the item page of a {goal.query} "
                    f"product whose title or features say {attrs} and whose price is below "
                    f"${goal.price_upper:.2f}, click each required option ({options}) on its item page, "
                    "then click[buy now].")
        if success:
            return {"episode_summary": f"Bought a matching {goal.query} with every requested option in "
                                       f"{len(actions)} steps.",
                    "episode_skill": f"Workflow: {workflow}"}
        invalid, bought, score = [], False, 0.0
        for number, action in enumerate(actions, start=1):
            if not engine.is_admissible(action):
                invalid.append(number)
                continue
            _, score, bought = engine.step(action)
            if bought:
                break
        mistake = self._purchase_mistake(engine, goal) if bought else (
            f"No purchase was made in {len(actions)} steps; once the item page of a matching product is open, "
            "click the required options and then click[buy now] without browsing further.")
        if invalid:
            mistake += (f" Step {invalid[0]} was not an admissible action; copy one action exactly from the "
                        "admissible list inside <action></action>.")
        outcome = f"bought with score {score:.2f}" if bought else "bought nothing"
        return {"episode_summary": f"Failed: {outcome} after {len(actions)} steps.",
                "episode_skill": f"Avoid this mistake: {mistake} Workflow: {workflow}"}

    def instance_values(self, task: Task) -> dict[str, str]:
        """The goal's product, attributes, options and price as type-level phrases (``seed_core.skills.static``)."""
        engine = _make_engine(self.settings)
        engine.reset(int(task.payload.get("goal_index", task.seed)))
        goal = engine.goal
        values = {goal.name: "<product>", goal.query: "<product>", goal.asin: "<product id>",
                  f"${goal.price_upper:.2f}": "<max price>", f"{goal.price_upper:.2f}": "<max price>"}
        values.update({a: "<attributes>" for a in goal.attributes})
        values.update({o: "<options>" for o in goal.goal_options.values()})
        return {k: v for k, v in values.items() if k.strip()}

    @staticmethod
    def _purchase_mistake(engine: Any, goal: Goal) -> str:
        details = engine.breakdown
        if details is None:
            return "The bought item did not match every requirement; check type, features, options and price."
        product = engine.product(engine.state.asin)
        problems = []
        if details.r_type < 1.0:
            problems.append(f"it was a {product.query}, not a {goal.query}")
        if details.missing_attributes:
            problems.append(f"it lacks {', '.join(details.missing_attributes)}")
        if details.wrong_options:
            problems.append(f"the options {', '.join(details.wrong_options)} were not clicked before buying")
        if not details.price_ok:
            problems.append(f"it cost ${product.price:.2f}, over the ${goal.price_upper:.2f} limit")
        return f"The purchase scored {details.score:.2f}: {'; '.join(problems)}."

    def _sim(self) -> WebShopSim:
        if not isinstance(self.engine, WebShopSim) or self._task is None:
            raise RuntimeError("webshop: the expert needs the sim backend and a reset(task) first "
                               "(the real WebShop hides its product data)")
        return self.engine
