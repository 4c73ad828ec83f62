"""The text environments: the protocol (``base``), one module per environment, named in the ``ENVS`` table
(``seed_core.registries``: ``"sokoban" -> "seed_core.envs.sokoban:SokobanEnv"``). ``make_env`` imports the
configured environment's module only, so importing this package loads no environment (and no engine).
"""

from seed_core.envs.base import ENVS, TextEnv


def make_env(cfg) -> TextEnv:
    """Instantiate the environment named by ``cfg.name`` (an ``EnvConfig``)."""
    return ENVS.get(cfg.name)(cfg)
