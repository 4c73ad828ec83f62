"""The analyzer's prompts and LLM calls in MLflow's GenAI views: a run names the registered versions of the prompts it
sends (``use_prompts``), and its LLM calls under ``traced_llm_calls`` are traces (``LlmCall``), secrets scrubbed.
With ``seed_core.tracking`` (the run and its metrics), the only seed_core modules that import mlflow.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any, Iterator

from seed_core.config import SECRET_VARS, endpoint_env
from seed_core.tracking import MlflowTracker, Tracker

LINKED_PROMPTS = "mlflow.linkedPrompts"  # the run tag MLflow lists a run's prompt versions from


def use_prompts(tracker: Tracker, prompts: dict[str, str], tags: dict[str, str]) -> dict[str, str]:
    """Name -> registry version of each prompt template in ``prompts``, recorded on the tracker's run (an MLflow run
    only, else ``{}``): the tag ``prompt.<name>`` and MLflow's prompt link. A template (with ``tags``) registered
    before keeps its newest such version; a changed one becomes a new version."""
    if not isinstance(tracker, MlflowTracker):
        return {}
    from mlflow.tracing.utils.prompt import update_linked_prompts_tag

    client, run = tracker.client, tracker.client.get_run(tracker.run_id)
    used = [_prompt_version(client, name, template, tags) for name, template in prompts.items()]
    client.set_tag(tracker.run_id, LINKED_PROMPTS, update_linked_prompts_tag(run.data.tags.get(LINKED_PROMPTS), used))
    names = {version.name: str(version.version) for version in used}
    tracker.set_tags({f"prompt.{name}": version for name, version in names.items()})
    return names


def _prompt_version(client: Any, name: str, template: str, tags: dict[str, str]) -> Any:
    if client.get_prompt(name) is None:
        client.create_prompt(name, description="seed's hindsight-analysis prompts (seed_core.analyzer.prompts)")
    same = [v for v in client.search_prompt_versions(name, max_results=10_000)
            if v.template == template and all(v.tags.get(k) == value for k, value in tags.items())]
    if same:
        return max(same, key=lambda v: int(v.version))
    return client.create_prompt_version(name, template, description="registered by a seed run", tags=tags)


_TRACE_TARGET: dict[str, Any] = {}  # while traced_llm_calls is open: the client, experiment, run and secrets


@contextlib.contextmanager
def traced_llm_calls(tracker: Tracker) -> Iterator[None]:
    """While open, an ``LlmCall`` (any thread) is a trace in an MLflow tracker's experiment, linked to its run. The
    tracer exports to the process's tracking URI: this store's until the traces are flushed, then what it was."""
    if not isinstance(tracker, MlflowTracker):
        yield
        return
    import mlflow
    from mlflow.tracking._tracking_service import utils

    before = utils._tracking_uri, os.environ.get("MLFLOW_TRACKING_URI")  # MLflow's own setting, the variable
    mlflow.set_tracking_uri(tracker.client.tracking_uri)  # also resets the tracer: its exporter writes here
    _TRACE_TARGET.update(client=tracker.client, run_id=tracker.run_id, experiment_id=tracker.client.get_run(
        tracker.run_id).info.experiment_id, secrets=[s for s in map(endpoint_env, SECRET_VARS) if s])
    try:
        yield
    finally:
        _TRACE_TARGET.clear()
        mlflow.flush_trace_async_logging()
        mlflow.set_tracking_uri(before[0])  # None unsets the variable too: put it back
        os.environ.update({"MLFLOW_TRACKING_URI": before[1]} if before[1] else {})


class LlmCall:
    """One LLM request's trace (none outside ``traced_llm_calls``), in one thread: a root span (``CHAT_MODEL``: inputs,
    outputs, token usage, latency, status), a child span per HTTP attempt (every retry shows), events (a retry and
    why, an error). A secret (``SECRET_VARS``' values) in any string that goes in becomes ``***``."""

    def __init__(self, name: str, inputs: dict[str, Any], attributes: dict[str, Any], tags: dict[str, str]) -> None:
        target = dict(_TRACE_TARGET)
        self.client, self.secrets, self.root, self.child = target.get("client"), target.get("secrets", []), None, None
        if self.client is not None:
            self.root = self.client.start_trace(name, span_type="CHAT_MODEL", inputs=self._scrub(inputs),
                                                attributes=self._scrub(attributes), tags=self._scrub(tags),
                                                experiment_id=target["experiment_id"], run_id=target["run_id"])

    def _scrub(self, value: Any) -> Any:
        if isinstance(value, str):
            return functools.reduce(lambda text, secret: text.replace(secret, "***"), self.secrets, value)
        if isinstance(value, dict):
            return {self._scrub(k): self._scrub(v) for k, v in value.items()}
        return [self._scrub(v) for v in value] if isinstance(value, (list, tuple)) else value

    def start_child(self, name: str, attributes: dict[str, Any]) -> None:
        if self.root is not None:
            self.child = self.client.start_span(name, trace_id=self.root.trace_id, parent_id=self.root.span_id,
                                                attributes=self._scrub(attributes))

    def end_child(self, attributes: dict[str, Any] | None = None, error: str = "") -> None:
        if self.child is not None:
            if error:
                self.event("exception", {"exception.message": error}, self.child)
            self.client.end_span(self.root.trace_id, self.child.span_id, attributes=self._scrub(attributes or {}),
                                 status="ERROR" if error else "OK")
            self.child = None

    def event(self, name: str, attributes: dict[str, Any], span: Any = None) -> None:
        if self.root is not None:
            from mlflow.entities import SpanEvent

            (span or self.root).add_event(SpanEvent(name, attributes=self._scrub(attributes)))

    def end(self, outputs: Any, attributes: dict[str, Any], usage: tuple[int, int], error: str = "") -> None:
        """End the trace: OK, or ERROR with ``error``; ``usage``: (input, output) tokens of all its attempts."""
        if self.root is None:
            return
        self.end_child(error=error or "no response")  # one still open got no answer
        self.root.set_attribute("mlflow.chat.tokenUsage", {"input_tokens": usage[0], "output_tokens": usage[1],
                                                           "total_tokens": sum(usage)})  # MLflow sums these per trace
        if error:
            self.event("exception", {"exception.message": error})
        self.client.end_trace(self.root.trace_id, outputs=self._scrub(outputs), attributes=self._scrub(attributes),
                              status="ERROR" if error else "OK")
