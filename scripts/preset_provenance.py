"""Where each result-changing value of a paper preset comes from: the paper, SEED's released launcher, this preset.

scripts/make_presets.py writes one card per paper preset from these rows (presets/cards/<preset>.md) and refuses
to write them when a preset holds a value its row does not record (``check``); tests/unit/test_preset_cards.py
checks the same. So changing a preset value means editing its row here: the value, and the reason it differs.

Sources (read, not copied):
- Paper: SEED's technical note ``docs/gigpo/seed_algorithm_technical_note.md`` in the public fork zhangdw156/SEED
  (commit 3bfabe7; "note §N" below), SEED issue #6 as cited in shared/docs/seed-algorithm.md §9 (the issue text
  itself was not found in the search index), and the evaluation panel the authors describe (seed-algorithm.md §8).
  "not stated" = no value found there; nothing is guessed.
- Launcher: the fork's paper-path (Stage-1 SFT, then SEED) launchers at commit 8efe6a7. Each
  ``examples/seed_trainer/run_<env>_sft_<teacher>_self.sh`` sets the run's history, update count and skill mode,
  then runs ``examples/seed_trainer/_common/<env>.sh`` with those as overrides (the run_ script's value wins);
  ``verl/trainer/config/ppo_trainer.yaml`` holds what neither sets; ``scripts/sft/`` holds Stage 1.
"""

from __future__ import annotations

from typing import Any, NamedTuple

FORK = "zhangdw156/SEED"
COMMIT = "8efe6a77f8b28bcc7d5557f142c27d8b21e67e20"


class Src(NamedTuple):
    value: Any
    """The value; None when the source states none (then ``where`` says so)."""
    where: str
    """file:line in the fork at ``COMMIT`` (another commit is named), a section of the note, or why there is none."""


class Knob(NamedTuple):
    label: str
    key: str | None
    """The params.yaml key that holds it; None for a behaviour of the code that no key sets."""
    preset: Any
    """The preset's value as its card records it: a test fails when the preset holds another."""
    paper: Src
    launcher: Src
    reason: str = ""
    """Why the preset differs from a stated paper or launcher value (required then)."""


NS = Src(None, "not stated")
YAML = "verl/trainer/config/ppo_trainer.yaml"
NOTE = "note"  # SEED's technical note (module docstring)
RUN = {"alfworld": "run_alfworld_sft_qwen_self.sh", "webshop": "run_webshop_sft_glm_self.sh",
       "search": "run_search_sft_glm_self.sh", "sokoban": "run_sokoban_sft_gemini_self.sh",
       "ezpoints": "run_ezpoints_sft_gemini_self.sh"}
COMMON = {"alfworld": "alfworld.sh", "webshop": "webshop.sh", "search": "search.sh", "sokoban": "sokoban_visual.sh",
          "ezpoints": "ezpoints.sh"}
PAPER_TEXT_BACKBONES = ("Qwen2.5-3B-Instruct", "Qwen2.5-7B-Instruct", "Qwen3-1.7B")
"""Table 1's backbones (note §8); Sokoban and EZPoints use Qwen2.5-VL-3B-Instruct on images (note §9, Table 8)."""


def run_file(env: str) -> str:
    return f"examples/seed_trainer/{RUN[env]}"


def common_file(env: str) -> str:
    return f"examples/seed_trainer/_common/{COMMON[env]}"


# Reasons shared by several environments.
ANALYSIS = ("no recorded reason: 1024 is the fork's yaml default ({yaml}:290), which every paper-path launcher raises. "
            "An analysis cut at 1024 tokens may not parse and then leaves its trajectory out of the teacher mask: "
            "check the parse rate before a paper run, or adopt the launcher's value").format(yaml=YAML)
SFT_LR = ("[inferred] verl's SFT default (seed-algorithm.md §3.4), chosen before the fork's Stage-1 scripts were "
          "readable; the launcher's value is the better-sourced one, not yet adopted")
SFT_LEN = ("[inferred] make_presets.py's choice before the fork's Stage-1 scripts were readable; an analyzer example "
           "longer than this is not trained on whole here")
VISUAL = ("this project's Sokoban and EZPoints are text-only (a text grid; card values in text), so a text model "
          "stands in for the paper's Qwen2.5-VL-3B-Instruct on images: numbers are not comparable with Table 8")
SMALL = ("the paper has no Qwen2.5-1.5B row (note §8); this preset is for smaller GPUs, so no paper number matches it "
         "(the fork's without-SFT launchers have a 1.5b case: examples/seed_trainer_1.5b/run_alfworld.sh:10 @3bfabe7)")
VISUAL_PROMPT = ("the text stand-in shows the observation as tokens, where the launcher's 1024 holds an image "
                 "placeholder; the preset keeps the 2048 of the text launchers")
GAMES_BATCH = ("no recorded reason: make_presets.py gave the text games the ALFWorld mini-batch (its docstring: "
               "Sokoban/EZPoints from verl-agent defaults); the visual launcher's value is not adopted")


def _backbone(env: str, model: str) -> Knob:
    if env in ("sokoban", "ezpoints"):
        paper = Src("Qwen2.5-VL-3B-Instruct", f"{NOTE} §9 (Table 8, image observations)")
        line = {"sokoban": 19, "ezpoints": 18}[env]
        launcher = Src("Qwen2.5-VL-3B-Instruct", f"{common_file(env)}:{line} (MODEL_PATH default)")
        return Knob("Backbone", "model.path", model, paper, launcher, VISUAL)
    known = model in PAPER_TEXT_BACKBONES
    paper = Src(model if known else "Qwen2.5-3B/7B-Instruct, Qwen3-1.7B", f"{NOTE} §8, Table 1")
    line = {"alfworld": 17, "webshop": 31, "search": 17}[env]
    launcher = Src(None, f"any, by MODEL_PATH (default Qwen2.5-3B-Instruct, {common_file(env)}:{line})")
    return Knob("Backbone", "model.path", model, paper, launcher, "" if known else SMALL)


def _shared(env: str, line: dict[str, int], kl: float = 0.01) -> list[Knob]:
    """Rows whose values are the same in every paper preset; ``line``: their line in the env's _common script."""
    c, sft = common_file(env), f"scripts/sft/{env}/train_sft.sh"
    sft_line = 14 if env == "ezpoints" else 13  # ezpoints' script has one more line above DEFAULT_LR
    sft_lr = 2e-6 if env in ("sokoban", "ezpoints") else 5e-6
    return [
        Knob("Group size (rollouts per task)", "rl.group_size", 8, Src(8, f"{NOTE} §4"),
             Src(8, f"{c}:{line['group']}")),
        Knob("Max response tokens per step", "generation.max_new_tokens", 512, NS,
             Src(512, f"{c}:{line['response']}")),
        Knob("RL learning rate", "rl.lr", 1e-6, Src(1e-6, f"{NOTE} §10"), Src(1e-6, f"{c}:{line['lr']}")),
        Knob("KL coefficient (low_var_kl)", "rl.kl_coef", kl, Src(0.01, f"{NOTE} §6 (one value for the paper)"),
             Src(kl, f"{c}:{line['kl']}"),
             "" if kl == 0.01 else "follows the Search launcher (as do OPID's and SDAR's Search scripts, "
             "seed-algorithm.md §3.2-3.3); the note states 0.01 once, for no benchmark in particular"),
        Knob("OPD coefficient (lambda)", "rl.opd_coef", 0.01, Src(0.01, f"{NOTE} §6"),
             Src(0.01, f"{c}:{line['opd']}")),
        Knob("Gate sharpness (beta)", "rl.gate_beta", 5.0, Src(5.0, f"{NOTE} §5"), Src(5.0, f"{c}:{line['opd'] + 1}")),
        Knob("Clip ratio, low", "rl.clip_ratio_low", 0.2, NS, Src(0.2, f"{YAML}:53 (not overridden)")),
        Knob("Clip ratio, high", "rl.clip_ratio_high", 0.2, NS, Src(0.2, f"{YAML}:54 (not overridden)")),
        Knob("Stage-1 rollouts per task", "collect.group_size", 8, Src(8, f"{NOTE} §3"),
             Src(8, f"scripts/sft/{env}/prepare_data.sh:{line['s1'] + 1}") if "s1" in line
             else Src(None, "not read (scripts/sft/<env>/_collect_rollouts.sh)")),
        Knob("SFT epochs", "sft.epochs", 3, Src(3, f"{NOTE} §3"), Src(3, "scripts/sft/_common/trainer.sh:21")),
        Knob("SFT learning rate", "sft.lr", 1e-5, NS, Src(sft_lr, f"{sft}:{sft_line}"), SFT_LR),
        Knob("Evaluation temperature", "generation.eval_temperature", 0.4, NS, Src(0.4, f"{c}:{line['val_t']}")),
    ]


def _alfworld() -> list[Knob]:
    c, r = common_file("alfworld"), run_file("alfworld")
    line = dict(group=21, response=82, lr=87, kl=92, opd=36, val_t=109, s1=80)
    return [
        Knob("RL updates", "rl.rounds", 150, Src(150, f"{NOTE} §10; SEED issue #6"), Src(160, f"{r}:56"),
             "follows the paper: note §10 says 150 in the paper where the scripts 'commonly set 160'; SEED #6, "
             "which raises this difference, reports a reproduction at 70.0 against the paper's 86.0"),
        Knob("Tasks per update", "rl.tasks_per_round", 16, NS, Src(16, f"{c}:19")),
        Knob("Episode length, training and evaluation", "env.max_steps", 30, Src(30, "SEED issue #6"),
             Src(30, f"{c}:146")),
        Knob("History length (turns in the prompt)", "env.history_length", 5, Src(5, "SEED issue #6"),
             Src(5, f"{r}:55")),
        Knob("Max prompt tokens", "generation.max_prompt_tokens", 2048, NS, Src(2048, f"{c}:81")),
        Knob("RL learning-rate warmup", None, 0.0, NS, Src(0.0, f"{YAML}:89 (not overridden)")),
        Knob("Mini-batch (step samples per optimizer step)", "rl.mini_batch_size", 256, NS, Src(256, f"{c}:23")),
        Knob("Entropy coefficient", "rl.entropy_coef", 0.001, NS, Src(0.001, f"{YAML}:72 (not overridden)")),
        Knob("Invalid-action penalty", "env.invalid_action_penalty", 0.1, NS, Src(0.1, f"{c}:114")),
        Knob("Analysis length (analyzer max new tokens)", "rl.analyzer_max_new_tokens", 1024, NS, Src(4096, f"{c}:58"),
             ANALYSIS),
        Knob("Stage-1 tasks", "collect.num_tasks", 180, Src(180, f"{NOTE} §3"),
             Src(180, "scripts/sft/alfworld/prepare_data.sh:80 (30 per task type x 6 types)")),
        Knob("SFT max length", "sft.max_length", 4096, NS, Src(8192, "scripts/sft/alfworld/train_sft.sh:14"), SFT_LEN),
        Knob("Evaluation splits", "eval.splits", ["valid_seen", "valid_unseen"],
             Src(["valid_seen", "valid_unseen"], "Table 1 on valid_seen (seed-algorithm.md §8), Table 7 on "
                 f"valid_unseen ({NOTE} §9)"),
             Src(["valid_seen"], f"{YAML}:359 (eval_in_distribution, not overridden)"),
             "the paper reports both splits; the launcher validates valid_seen only"),
        Knob("Evaluation instances per split", "eval.num_tasks", 128,
             Src(128, "the authors' 128 valid_seen instances (seed-algorithm.md §8)"), Src(128, f"{c}:20")),
        Knob("Scored checkpoint", None, "final update", Src("final update", "SEED issue #6"),
             Src(None, f"validates every 5 updates ({r}:59); which validation a table reports is not in the "
                 "launcher")),
    ] + _shared("alfworld", line)


def _webshop() -> list[Knob]:
    c, r = common_file("webshop"), run_file("webshop")
    line = dict(group=35, response=88, lr=93, kl=98, opd=47, val_t=114, s1=62)
    return [
        Knob("RL updates", "rl.rounds", 150, Src(150, f"{NOTE} §10"), Src(160, f"{r}:56"),
             "follows the paper (note §10: 150 in the paper, the scripts 'commonly' 160); the fork's without-SFT "
             "WebShop launcher runs 150 (examples/seed_trainer_3b/run_webshop.sh:64 @0ae4a49)"),
        Knob("Tasks per update", "rl.tasks_per_round", 16, NS, Src(16, f"{c}:33")),
        Knob("Episode length, training and evaluation", "env.max_steps", 15, NS, Src(15, f"{c}:145")),
        Knob("History length (turns in the prompt)", "env.history_length", 2, NS, Src(2, f"{r}:55")),
        Knob("Max prompt tokens", "generation.max_prompt_tokens", 4096, NS, Src(4096, f"{c}:87")),
        Knob("RL learning-rate warmup", None, 0.0, NS, Src(0.0, f"{YAML}:89 (not overridden)")),
        Knob("Mini-batch (step samples per optimizer step)", "rl.mini_batch_size", 64, NS, Src(64, f"{c}:95")),
        Knob("Entropy coefficient", "rl.entropy_coef", 0.001, NS, Src(0.001, f"{YAML}:72 (not overridden)")),
        Knob("Invalid-action penalty", "env.invalid_action_penalty", 0.1, NS, Src(0.1, f"{c}:119")),
        Knob("Analysis length (analyzer max new tokens)", "rl.analyzer_max_new_tokens", 1024, NS, Src(4096, f"{c}:61"),
             ANALYSIS),
        Knob("Stage-1 tasks", "collect.num_tasks", 180, Src(180, f"{NOTE} §3"),
             Src(180, "scripts/sft/webshop/prepare_data.sh:62")),
        Knob("SFT max length", "sft.max_length", 4096, NS, Src(12288, "scripts/sft/webshop/train_sft.sh:14"), SFT_LEN),
        Knob("Catalogue (products)", "env.webshop.num_products", 1000, NS,
             Src(1000, f"{YAML}:373 (use_small: the 1,000-product catalogue)")),
        Knob("Evaluation split", "eval.splits", ["test"], NS,
             Src(None, "no split key: the WebShop package's validation goals")),
        Knob("Evaluation instances per split", "eval.num_tasks", 128, NS, Src(128, f"{c}:34")),
        Knob("Scored checkpoint", None, "final update", NS,
             Src(None, f"validates every 5 updates ({r}:59); which validation a table reports is not in the "
                 "launcher")),
    ] + _shared("webshop", line)


def _search() -> list[Knob]:
    c, r = common_file("search"), run_file("search")
    line = dict(group=21, response=70, lr=75, kl=81, opd=36, val_t=98, s1=93)
    return [
        Knob("RL updates", "rl.rounds", 150, Src(150, f"{NOTE} §10"), Src(150, f"{r}:56")),
        Knob("Tasks per update", "rl.tasks_per_round", 128, NS, Src(128, f"{c}:19")),
        Knob("Episode length (turns), training and evaluation", "env.max_steps", 4, NS, Src(4, f"{c}:129")),
        Knob("History length (turns in the prompt)", "env.history_length", 4, NS, Src(4, f"{r}:55")),
        Knob("Max prompt tokens", "generation.max_prompt_tokens", 4096, NS, Src(4096, f"{c}:69")),
        Knob("RL learning-rate warmup", None, 0.0, NS, Src(0.1, f"{c}:76 (lr_warmup_steps_ratio)"),
             "this project's RL uses a constant learning rate (no warmup key); the launcher warms up over the "
             "first 10% of updates"),
        Knob("Mini-batch (step samples per optimizer step)", "rl.mini_batch_size", 256, NS, Src(512, f"{c}:78"),
             "no recorded reason: make_presets.py took SDAR's Search value (seed-algorithm.md §3.3); SEED's launcher, "
             "like OPID's, uses 512: twice the optimizer steps per update here"),
        Knob("Entropy coefficient", "rl.entropy_coef", 0.001, NS, Src(0.0, f"{c}:83"),
             "no recorded reason: SDAR's Search value (seed-algorithm.md §3.3); SEED's launcher, like OPID's, "
             "sets 0"),
        Knob("Invalid-action penalty", "env.invalid_action_penalty", 0.01, NS, Src(0.01, f"{c}:103")),
        Knob("Analysis length (analyzer max new tokens)", "rl.analyzer_max_new_tokens", 1024, NS, Src(4096, f"{c}:50"),
             ANALYSIS),
        Knob("Stage-1 tasks", "collect.num_tasks", 180, Src(180, f"{NOTE} §3"),
             Src(180, "scripts/sft/search/prepare_data.sh:93")),
        Knob("SFT max length", "sft.max_length", 4096, NS, Src(12288, "scripts/sft/search/train_sft.sh:14"), SFT_LEN),
        Knob("Evaluation split", "eval.splits", ["test"], NS, Src(["test"], f"{c}:24 (test.parquet)")),
        Knob("Evaluation instances per split", "eval.num_tasks", 512, NS, Src(512, f"{c}:20")),
        Knob("Scored checkpoint", None, "final update", NS,
             Src("final update", f"{c}:139 (test_freq 150 = the last update only)")),
    ] + _shared("search", line, kl=0.001)


def _games(env: str) -> list[Knob]:
    """Sokoban and EZPoints: the paper's visual runs (Table 8), here as text games."""
    c, r = common_file(env), run_file(env)
    sok = env == "sokoban"
    line = dict(group=23, response=82, lr=88, kl=93, opd=37, val_t=110) if sok else \
        dict(group=22, response=77, lr=83, kl=88, opd=34, val_t=105)
    rounds = Src(150, f"{r}:56") if sok else Src(100, f"{r}:56")
    history = Src(2, f"{r}:55") if sok else Src(2, f"{YAML}:352 (the launcher sets none: {r}:55 is empty)")
    return [
        Knob("RL updates", "rl.rounds", 150, Src(150, f"{NOTE} §10 (one count for the paper, no benchmark named)"),
             rounds, "" if sok else "unresolved: the note states 150 once, the EZPoints launcher runs 100; the "
             "preset keeps 150"),
        Knob("Tasks per update", "rl.tasks_per_round", 16, NS, Src(32, f"{c}:21") if sok else Src(16, f"{c}:20"),
             "no recorded reason: make_presets.py uses the text environments' 16 (verl-agent defaults); the visual "
             "launcher uses 32" if sok else ""),
        Knob("Episode length, training and evaluation", "env.max_steps", 15 if sok else 8, NS,
             Src(15, f"{c}:148") if sok else Src(8, f"{c}:142")),
        Knob("History length (turns in the prompt)", "env.history_length", 2, NS, history),
        Knob("Max prompt tokens", "generation.max_prompt_tokens", 2048, NS,
             Src(1024, f"{c}:{81 if sok else 76}"), VISUAL_PROMPT),
        Knob("RL learning-rate warmup", None, 0.0, NS, Src(0.0, f"{YAML}:89 (not overridden)")),
        Knob("Mini-batch (step samples per optimizer step)", "rl.mini_batch_size", 256, NS,
             Src(64, f"{c}:90") if sok else Src(128, f"{c}:85"), GAMES_BATCH),
        Knob("Entropy coefficient", "rl.entropy_coef", 0.001, NS, Src(0.001, f"{YAML}:72 (not overridden)")),
        Knob("Invalid-action penalty", "env.invalid_action_penalty", 0.1, NS, Src(0.1, f"{c}:{115 if sok else 110}")),
        Knob("Analysis length (analyzer max new tokens)", "rl.analyzer_max_new_tokens", 1024, NS,
             Src(2048, f"{c}:{54 if sok else 51}"), ANALYSIS),
        Knob("Stage-1 tasks", "collect.num_tasks", 180, Src(180, f"{NOTE} §3"),
             Src(None, "not read (scripts/sft/<env>/_collect_rollouts.sh)")),
        Knob("SFT max length", "sft.max_length", 4096, NS,
             Src(4096, f"scripts/sft/{env}/train_sft.sh:{14 if sok else 15}")),
        Knob("Evaluation split", "eval.splits", ["test"], NS, Src(None, "no split key: generated tasks")),
        Knob("Evaluation instances per split", "eval.num_tasks", 128, NS, Src(128, f"{c}:{22 if sok else 21}")),
        Knob("Scored checkpoint", None, "final update", NS,
             Src(None, f"validates every 5 updates ({r}:59); which validation a table reports is not in the "
                 "launcher")),
    ] + _shared(env, line)


ENV_KNOBS = {"alfworld": _alfworld, "webshop": _webshop, "search": _search,
             "sokoban": lambda: _games("sokoban"), "ezpoints": lambda: _games("ezpoints")}

NOTES = {
    "alfworld": "The fork's without-SFT launchers (branch exp/iclr, commit 3bfabe7) run ALFWorld differently: "
                "history 2 and 50 steps (examples/seed_trainer_1.5b/run_alfworld.sh:61), 150 updates (:66). The "
                "preset follows the paper path (history 5, 30 steps) that SEED issue #6 states.",
    "webshop": "The paper states no WebShop-specific value beyond the shared ones; the preset follows the launcher.",
    "search": "Search-QA needs a retriever the user provides (docs/gpu.md), as the launcher does (SEARCH_URL, "
              "examples/seed_trainer/_common/search.sh:25); which retriever changes the results.",
    "sokoban": "The launcher's analyzer for visual Sokoban defaults to an OpenAI-compatible vision backend "
               "(_common/sokoban_visual.sh:51); its run_ script sets the policy itself "
               "(run_sokoban_sft_gemini_self.sh:49), as this preset does.",
    "ezpoints": "",
}


ORDER = ("model.path", "rl.rounds", "rl.tasks_per_round", "rl.group_size", "env.max_steps", "env.history_length",
         "generation.max_prompt_tokens", "generation.max_new_tokens", "rl.lr", "RL learning-rate warmup",
         "rl.mini_batch_size", "rl.kl_coef", "rl.entropy_coef", "rl.opd_coef", "rl.gate_beta", "rl.clip_ratio_low",
         "rl.clip_ratio_high", "rl.analyzer_max_new_tokens", "env.invalid_action_penalty", "env.webshop.num_products",
         "collect.num_tasks", "collect.group_size", "sft.epochs", "sft.lr", "sft.max_length", "eval.splits",
         "eval.num_tasks", "generation.eval_temperature", "Scored checkpoint")
"""A card's row order: a row's key, or its label when no key holds it."""


def knobs(env: str, model: str) -> list[Knob]:
    """The card's rows for ``env`` with the backbone ``model``, in ``ORDER``."""
    return sorted([_backbone(env, model), *ENV_KNOBS[env]()], key=lambda k: ORDER.index(k.key or k.label))


def differs(value: Any, src: Src) -> bool:
    return src.value is not None and value != src.value


def counts(rows: list[Knob]) -> tuple[int, int, int]:
    """(differ from the paper, differ from the launcher, values) of a card's rows."""
    return (sum(differs(k.preset, k.paper) for k in rows), sum(differs(k.preset, k.launcher) for k in rows),
            len(rows))


def summary(rows: list[Knob]) -> str:
    paper, launcher, n = counts(rows)
    unstated = sum(k.paper.value is None for k in rows)
    return (f"{paper} of {n} values differ from the paper ({unstated} not stated there), "
            f"{launcher} from SEED's released launcher")


def _get(params: dict[str, Any], dotted: str) -> Any:
    node: Any = params
    for part in dotted.split("."):
        node = node[part]
    return node


def check(name: str, rows: list[Knob], params: dict[str, Any]) -> list[str]:
    """One line per value the preset ``params`` holds that its card does not record (empty: the card is current)."""
    return [f"{name}: {k.key} is {_get(params, k.key)!r} in the preset, its card records {k.preset!r}: update its "
            f"row in scripts/preset_provenance.py (the value, and the reason where it differs)"
            for k in rows if k.key and _get(params, k.key) != k.preset]


def _fmt(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def _cell(src: Src) -> str:
    return src.where if src.value is None else f"{_fmt(src.value)} — {src.where}"


def card_text(name: str, env: str, model: str) -> str:
    rows = knobs(env, model)
    lines = [
        f"# Provenance: {name}",
        "",
        "Generated by scripts/make_presets.py from scripts/preset_provenance.py; edit those, not this file.",
        "",
        f"Summary: {summary(rows)}.",
        "",
        "Each setting that changes a result: its value in the paper (SEED's technical note "
        f"`docs/gigpo/seed_algorithm_technical_note.md` in the public fork {FORK} at 3bfabe7, \"note §N\"; SEED issue "
        "#6; \"not stated\" where neither gives one), in SEED's released launcher (file:line in the fork at "
        f"{COMMIT[:7]}: `{run_file(env)}`, which runs `{common_file(env)}` and wins over it; `{YAML}` for what "
        "neither sets; `scripts/sft/` for Stage 1), and in this preset. \"Differs\" names the sources whose stated "
        "value the preset does not hold.",
        "",
        "| Setting | Key | Paper | Launcher | Preset | Differs | Reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for k in rows:
        diff = ", ".join(s for s, src in (("paper", k.paper), ("launcher", k.launcher)) if differs(k.preset, src))
        key = f"`{k.key}`" if k.key else "(no key)"
        lines.append(f"| {k.label} | {key} | {_cell(k.paper)} | {_cell(k.launcher)} | {_fmt(k.preset)} | {diff} | "
                     f"{k.reason if diff else ''} |")
    if NOTES[env]:
        lines += ["", NOTES[env]]
    return "\n".join(lines) + "\n"
