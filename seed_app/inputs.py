"""What a pipeline run needs from outside the project, checked before any server or stage starts.

``seed run`` and ``seed sweep`` call ``check_run(cfg)`` once the config has loaded, before they hold the
workspace, start Prefect or MLflow, or launch DVC: a first run on a machine that lacks the model or the data
ends in one line at once, not after the servers started and a stage failed (issue 31). Each check is the
one the stage itself runs later, called early and kept cheap (no model is loaded, no game directory scanned):

* ``model.path``: the model directory ``prepare_model`` resolves (``seed_core.modeling.models.resolve_model_path``:
  relative paths under ``$MODELS_ROOT``, else ``<project>/models``, then the project), unless it names a
  model seed builds itself (``BUILDABLE_MODELS``, the names of ``seed_core.stages.prepare_model.BUILDERS``);
* ALFWorld's evaluation splits under ``$ALFWORLD_DATA`` (the message of ``seed_core.alfworld.games``);
* the data directories ``env.search_qa.data_dir`` and ``env.webshop.data_dir``, the dense retriever's encoder
  and the real WebShop package (the messages of their loaders);
* the endpoints: the Search-QA retriever, remote vLLM engines and the annotator (``seed_core.runtime.services``).

A failure is an ``InputError``, a ``ConfigError``: the command prints it as one line and exits 2. Torch is
never imported here (the ``seed`` command's modules stay torch-free, tests/unit/test_layering.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path
from typing import Any, Callable

from seed_core.config import ConfigError, SeedConfig, models_root, project_root

BUILDABLE_MODELS = ("smollm2-135m-instruct", "testbed", "tiny-llama", "tiny-qwen2")
"""``model.path`` names ``prepare_model`` builds instead of looking them up (its ``BUILDERS``, which imports
torch; tests/unit/test_cli_errors.py keeps the two equal)."""


class InputError(ConfigError):
    """Something a run needs from outside the project is missing; the message names it, the value and the fix."""


def check_run(cfg: SeedConfig) -> None:
    """Every check that applies to ``cfg``: files and directories first, then the endpoints (network)."""
    check_model(cfg)
    check_alfworld(cfg)
    check_data_dirs(cfg)
    check_endpoints(cfg)


def model_candidates(path: str) -> list[Path]:
    """Where ``prepare_model`` looks for ``model.path`` (``resolve_model_path`` in the stage process, whose
    working directory is the project root)."""
    raw = Path(path).expanduser()
    return [raw] if raw.is_absolute() else [models_root() / raw, project_root() / raw]


def check_model(cfg: SeedConfig) -> None:
    """``model.path`` names a Hugging Face model directory on disk, or a model seed builds."""
    path = cfg.model.path
    if Path(path).name in BUILDABLE_MODELS:
        return
    from seed_core.runtime.io import aside_path  # a checkpoint swap killed half-way: the stage renames it back

    candidates = model_candidates(path)
    found = next((c for c in candidates if c.exists() or aside_path(c).is_dir()), None)
    name = Path(path).name
    fix = (f"put the model there, set $MODELS_ROOT to the directory that holds {name}, or pass "
           f"-S model.path=/path/to/{name}; model.path is a Hugging Face model directory on disk or one that seed "
           f"builds ({', '.join(BUILDABLE_MODELS)})")
    if found is None:
        raise InputError(f"model.path {path!r}{_source(cfg)}: model directory {candidates[0]} does not exist; {fix}")
    if found.exists() and not (found / "config.json").is_file():
        raise InputError(f"model.path {path!r}{_source(cfg)}: {found} is not a Hugging Face model directory (no "
                         f"config.json); {fix}")


def check_alfworld(cfg: SeedConfig) -> None:
    """ALFWorld's evaluation splits (``eval.splits``) exist under ``$ALFWORLD_DATA``; training falls back to the
    generated games, so the train split needs nothing from outside."""
    if cfg.env.name != "alfworld":
        return
    from seed_core.alfworld.games import JSON_DIR, data_root, split_games

    root = data_root()
    for split in cfg.eval.splits:
        if split != "train" and not (root is not None and (root / JSON_DIR / split).is_dir()):
            _as_input_error(split_games, split, cfg.env.alfworld)  # no directory: it raises its message at once


def check_data_dirs(cfg: SeedConfig) -> None:
    """The environment's data directory (when one is set), the dense retriever's encoder, the real WebShop."""
    qa, shop = cfg.env.search_qa, cfg.env.webshop
    if cfg.env.name == "search_qa":
        if qa.data_dir and not _in_project(qa.data_dir).is_dir():
            from seed_core.envs.search_qa import load_data

            _as_input_error(load_data, qa)
        if not qa.retriever_url and qa.retrieval_method != "bm25":
            from seed_core.retrieval.dense import resolve_dense_model

            with contextlib.chdir(project_root()):  # where the stage resolves a relative path
                _as_input_error(resolve_dense_model, qa.dense_model)
    if cfg.env.name == "webshop" and shop.backend == "sim" and shop.data_dir:
        root = _in_project(shop.data_dir)
        if not all((root / name).is_file() for name in ("products.json", "goals.json")):
            from seed_core.webshop.catalog import read_catalog

            _as_input_error(read_catalog, root)
    if cfg.env.name == "webshop" and shop.backend == "real" and importlib.util.find_spec("web_agent_site") is None:
        from seed_core.webshop.real import _text_env_class

        _as_input_error(_text_env_class)


def check_endpoints(cfg: SeedConfig) -> None:
    """The retriever URL, remote vLLM engines and the annotator's endpoint answer (``check_services``)."""
    from seed_core.runtime.io import KnownError
    from seed_core.runtime.services import ServiceUnavailableError, check_services

    try:
        check_services(cfg, analyzer=cfg.annotate.client)
    except (ServiceUnavailableError, KnownError) as err:
        raise InputError(_one_line(str(err))) from None


def _as_input_error(check: Callable[..., Any], *args: Any) -> None:
    """Run a loader's own check; its missing-input error becomes an ``InputError`` with the same message."""
    try:
        check(*args)
    except (FileNotFoundError, ImportError, ValueError) as err:
        raise InputError(_one_line(str(err))) from None


def _in_project(path: str) -> Path:
    """A configured path as the stages read it: relative paths from the project root."""
    raw = Path(path).expanduser()
    return raw if raw.is_absolute() else project_root() / raw


def _source(cfg: SeedConfig) -> str:
    """`` (in preset presets/x.yaml)``: where ``cfg`` was loaded from, for the message."""
    if cfg._source is None:
        return ""
    from seed_core.loader import describe_source

    path = cfg._source[0]
    with contextlib.suppress(ValueError):
        path = path.relative_to(project_root())
    return f" (in {describe_source(path)})"


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())
