"""Services a stage needs, checked before it loads a model or plays a single rollout (issue 14).

A stage that talks to something over the network finds out at once, not after all its rollouts:

* the Search-QA retriever at ``env.search_qa.retriever_url`` (one one-query search, Search-R1 API),
* remote vLLM engines at ``generation.vllm.base_url`` (``GET <url>/health``; seed's own engines are
  health-checked when they start),
* the annotator endpoint when the stage's analyzer is ``openai`` (``GET /models``, the client's own check).

Each failure is a ``ServiceUnavailableError`` (``AnalyzerSetupError`` for the annotator) naming the service,
its URL and the fix. The built-in retrievers (``retriever: local`` / ``server``) need no check.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from seed_core.config import SeedConfig
from seed_core.registries import BACKENDS, CLIENTS, ENVS

CHECK_TIMEOUT_S = 10.0
"""Upper bound on one reachability check."""


class ServiceUnavailableError(RuntimeError):
    """A service the stage needs does not answer; the message names it, its URL and the fix."""


def check_retriever(cfg: SeedConfig) -> None:
    """The environment's own service, where it has one: ``check_service(env_cfg, timeout_s)`` of its class
    (Search-QA: the retriever at ``env.search_qa.retriever_url``), so only that environment's stages import it."""
    check = getattr(ENVS.get(cfg.env.name), "check_service", None)
    problem = check(cfg.env, CHECK_TIMEOUT_S) if check is not None else None
    if problem:
        raise ServiceUnavailableError(problem)


def check_engines(cfg: SeedConfig) -> None:
    vllm = cfg.generation.vllm
    if not BACKENDS.entry(cfg.generation.backend).serves or not vllm.base_url:
        return
    for url in (u.strip().rstrip("/") for u in vllm.base_url.split(",") if u.strip()):
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=CHECK_TIMEOUT_S) as response:
                response.read()
        except urllib.error.HTTPError as err:
            reason = f"HTTP {err.code}"
        except (urllib.error.URLError, OSError, ValueError) as err:
            reason = str(getattr(err, "reason", err))
        else:
            continue
        raise ServiceUnavailableError(
            f"the vLLM engine {url} (generation.vllm.base_url) does not answer {url}/health ({reason}); start it "
            f"(`vllm serve MODEL --host 127.0.0.1 --port PORT`) or set generation.vllm.base_url: '' so seed "
            "launches its own engines")


def check_annotator(cfg: SeedConfig, client: str | None) -> None:
    """``client``: the analyzer client the stage will build (``None``: no analyzer)."""
    if client == "openai":
        CLIENTS.get(client)(cfg)  # builds the client, whose constructor checks the endpoint and the key


def check_services(cfg: SeedConfig, *, analyzer: str | None = None) -> None:
    """Every check that applies to ``cfg`` (and to the stage's analyzer client ``analyzer``)."""
    check_retriever(cfg)
    check_engines(cfg)
    check_annotator(cfg, analyzer)
