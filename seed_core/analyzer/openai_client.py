"""The ``openai`` analyzer client: chat completions against any OpenAI-compatible endpoint (Stage 1's analyzer,
``annotate.client: openai``; ``CLIENTS`` in ``seed_core.registries``). The factory checks the endpoint before
returning (fail fast); endpoint faults are retried with backoff, then recorded in ``RawAnalysis.error``. Under
``seed_core.tracing.traced_llm_calls`` each request is an MLflow trace (``LlmCall``): its HTTP attempts (the SDK's
retries and ours) as child spans with their status, token usage, latency and the error, the key scrubbed out. Its own
module, so only the stages that can select it (``seed_core.lineage.stage_code``) depend on its code.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from seed_core.analyzer.clients import AnalysisRequest, AnalyzerClient, AnalyzerSetupError, RawAnalysis
from seed_core.config import endpoint_env, env_file
from seed_core.tracing import LlmCall

if TYPE_CHECKING:
    from seed_core.config import AnnotateConfig, SeedConfig
    from seed_core.envs.base import TextEnv

_PLACEHOLDER_KEY = "EMPTY"
"""Sent when only OPENAI_BASE_URL is set: local servers (vLLM, llama.cpp) accept any key."""
_DEFAULT_BASE_URL = "https://api.openai.com/v1"
BACKOFF_S = 0.5
"""First wait of our own retries (empty answer, unreadable body); doubles per retry up to ``MAX_BACKOFF_S``,
minus up to 25% jitter, like the SDK's own backoff for timeouts, 429 and 5xx."""
MAX_BACKOFF_S = 8.0
CHECK_TIMEOUT_S = 10.0
"""Upper bound on the reachability check before any work (``GET /models``)."""


def public_url(url: str) -> str:
    """``url`` without user info, query or fragment: safe to print (no credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class OpenAIClient:
    """Chat completions against an OpenAI-compatible endpoint, ``annotate.concurrency`` calls at a time.

    Per call: the SDK retries timeouts, connection errors, 429 (honouring Retry-After) and 5xx with
    exponential backoff and jitter (``annotate.max_retries``); this client also retries, with the same
    budget, what the SDK takes as success: a 200 with an empty answer, no choices or a body that is not
    JSON. ``reasoning_content`` (or ``reasoning``) is prepended to the answer; token usage and latency
    (all retries included) are recorded. What still fails is returned as ``RawAnalysis.error``, with
    the API key scrubbed out. A malformed *answer* is the caller's to re-ask (``annotate_trajectories``).
    """

    def __init__(self, cfg: "AnnotateConfig", *, base_url: str | None, api_key: str,
                 backoff_s: float = BACKOFF_S) -> None:
        from openai import DefaultHttpxClient, OpenAI

        self.cfg = cfg
        self.identity = ("openai", cfg.model)
        self.url = public_url(base_url or _DEFAULT_BASE_URL)
        self.backoff_s = backoff_s
        self.requests_sent = 0
        """Chat completion requests this client has sent over HTTP, every retry (the SDK's and ours) included."""
        self._count_lock = threading.Lock()
        self._local = threading.local()
        """This thread's request: its trace (``call``) and HTTP requests sent (``sent``)."""
        self._secret = "" if api_key == _PLACEHOLDER_KEY else api_key
        self._sdk = OpenAI(
            base_url=base_url, api_key=api_key, timeout=cfg.timeout_s, max_retries=cfg.max_retries,
            http_client=DefaultHttpxClient(event_hooks={"request": [self._on_request],  # the SDK's defaults + hooks
                                                        "response": [self._on_response]}),
        )

    def _on_request(self, request: Any) -> None:
        """Count every chat request sent (all threads); open its child span in this thread's trace, closing the
        previous attempt's first when no answer came (a timeout or a dropped connection that the SDK retried)."""
        if not request.url.path.endswith("/chat/completions"):
            return
        with self._count_lock:  # ``analyze`` sends a batch from several threads
            self.requests_sent += 1
        call: LlmCall | None = getattr(self._local, "call", None)
        if call is not None:
            call.end_child(error="no response (timed out or the connection dropped)")
            self._local.sent += 1
            call.start_child(f"POST {request.url.path}", {"attempt": self._local.sent})

    def _on_response(self, response: Any) -> None:
        call: LlmCall | None = getattr(self._local, "call", None)
        if call is not None and response.request.url.path.endswith("/chat/completions"):
            status, retry_after = response.status_code, response.headers.get("retry-after", "")
            call.end_child({"http.status_code": status, **({"retry_after": retry_after} if retry_after else {})},
                           error=f"HTTP {status}" if status >= 400 else "")

    def check_endpoint(self) -> None:
        """Fail fast, before any work: one ``GET /models``. Unreachable, or the key rejected ->
        ``AnalyzerSetupError`` saying what to set; any other answer (a 404 too) counts as reachable."""
        from openai import APIConnectionError, APIStatusError, AuthenticationError, PermissionDeniedError

        sdk = self._sdk.with_options(max_retries=1, timeout=min(self.cfg.timeout_s, CHECK_TIMEOUT_S))
        try:
            sdk.models.list()
        except APIConnectionError as err:  # refused, DNS, TLS, timeout
            raise AnalyzerSetupError(
                f"cannot reach the analyzer endpoint {self.url} ({self._scrub(err)}): start the server or "
                "set OPENAI_BASE_URL to a running OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1), "
                "or use annotate.client: oracle for the offline rule-based analyzer"
            ) from None
        except (AuthenticationError, PermissionDeniedError) as err:
            raise AnalyzerSetupError(
                f"the analyzer endpoint {self.url} rejected the API key (HTTP {err.status_code}): "
                "set OPENAI_API_KEY to a valid key for this endpoint"
            ) from None
        except APIStatusError:
            pass  # it answered: reachable (servers without /models answer 404)

    def analyze(self, requests: list[AnalysisRequest]) -> list[RawAnalysis]:
        if len(requests) <= 1:
            return [self._call(r) for r in requests]
        workers = max(1, min(self.cfg.concurrency, len(requests)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(self._call, requests))

    def _call(self, request: AnalysisRequest) -> RawAnalysis:
        """One request, traced (``LlmCall``): the model's answer, or the error that ended it."""
        inputs = {"model": self.cfg.model, "messages": [{"role": "user", "content": request.prompt}],
                  "temperature": self.cfg.temperature, "max_completion_tokens": self.cfg.max_tokens}
        call = LlmCall("analyzer.chat", inputs, {"endpoint": self.url, "traj_id": request.traj_id},
                       {"traj_id": request.traj_id})
        self._local.call, self._local.sent, raw = call, 0, None
        try:
            raw = self._attempts(request, call)
            return raw
        finally:
            self._local.call = None
            text, error = (raw.text, raw.error) if raw is not None else ("", "interrupted")
            usage = (raw.prompt_tokens, raw.completion_tokens) if raw is not None else (0, 0)
            call.end({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]},
                     {"http_requests": self._local.sent, "retries": max(self._local.sent - 1, 0),
                      "latency_s": raw.latency_s if raw is not None else 0.0}, usage, error)

    def _attempts(self, request: AnalysisRequest, call: LlmCall) -> RawAnalysis:
        start = time.perf_counter()
        tokens = [0, 0]
        error = ""
        for attempt in range(self.cfg.max_retries + 1):
            if attempt:
                call.event("retry", {"attempt": attempt + 1, "reason": error})
                time.sleep(self._backoff(attempt - 1))
            try:
                response = self._sdk.chat.completions.create(
                    model=self.cfg.model,
                    messages=[{"role": "user", "content": request.prompt}],
                    temperature=self.cfg.temperature,
                    max_completion_tokens=self.cfg.max_tokens,
                )
            except ValueError as err:  # a 200 whose body is not JSON (json.JSONDecodeError): retry
                error = f"unreadable response body ({self._scrub(err)})"
                continue
            except Exception as err:  # the SDK already retried what can be retried; record it
                return RawAnalysis("", *tokens, latency_s=time.perf_counter() - start, error=self._scrub(err))
            if response.usage:
                tokens[0] += response.usage.prompt_tokens
                tokens[1] += response.usage.completion_tokens
            text, error, retry = self._read(response)
            if not retry:
                return RawAnalysis(text, *tokens, latency_s=time.perf_counter() - start, error=error)
        calls = self.cfg.max_retries + 1
        error = f"{error} (after {calls} call{'s' if calls > 1 else ''})"
        return RawAnalysis("", *tokens, latency_s=time.perf_counter() - start, error=error)

    @staticmethod
    def _read(response: Any) -> tuple[str, str, bool]:
        """(text, error, worth retrying) of one completion."""
        if not response.choices:
            return "", "the endpoint returned no choices", True
        choice = response.choices[0]
        content = choice.message.content or ""
        if not content.strip():
            if choice.finish_reason == "length":  # deterministic: the budget went to reasoning
                return "", ("empty answer (finish_reason=length): the completion hit max_completion_tokens; "
                            "raise annotate.max_tokens"), False
            return "", "empty answer", True
        extra = choice.message.model_extra or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning") or ""
        return (f"{reasoning}\n{content}" if isinstance(reasoning, str) and reasoning else content), "", False

    def _backoff(self, retry: int) -> float:
        return min(self.backoff_s * 2.0**retry, MAX_BACKOFF_S) * (1.0 - 0.25 * random.random())

    def _scrub(self, err: Exception) -> str:
        message = f"{type(err).__name__}: {err}"
        return message.replace(self._secret, "***") if self._secret else message


def openai_client(
    cfg: "SeedConfig", *, env: "TextEnv | None" = None, backend: Any = None,
    checkpoint: str | Path | None = None,
) -> AnalyzerClient:
    """Needs OPENAI_BASE_URL (any compatible server) and/or OPENAI_API_KEY (api.openai.com by default);
    checks that the endpoint answers and accepts the key before returning (fail fast, before any work)."""
    base_url = endpoint_env("OPENAI_BASE_URL")
    api_key = endpoint_env("OPENAI_API_KEY")
    if base_url is None and api_key is None:
        raise AnalyzerSetupError(
            "annotate.client = 'openai' needs an endpoint: set OPENAI_BASE_URL (an OpenAI-compatible "
            f"server, e.g. http://127.0.0.1:8000/v1) and/or OPENAI_API_KEY in the environment or in "
            f"{env_file()}, or use annotate.client: oracle for the offline rule-based analyzer"
        )
    client = OpenAIClient(cfg.annotate, base_url=base_url, api_key=api_key or _PLACEHOLDER_KEY)
    client.check_endpoint()
    return client
