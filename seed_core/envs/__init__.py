"""Registry of text environments; each module registers its class under its config name.

Heavy engines (alfworld, retrieval) are imported lazily inside their modules, so importing this
package is cheap on any machine.
"""

from seed_core.envs import alfworld, ezpoints, search_qa, sokoban, webshop  # noqa: F401  (registration side effects)
from seed_core.envs.base import ENVS, TextEnv


def make_env(cfg) -> TextEnv:
    """Instantiate the environment named by ``cfg.name`` (an ``EnvConfig``)."""
    return ENVS.get(cfg.name)(cfg)
