"""Services a stage needs are checked before the model loads or the first rollout is played (issue 14): a
closed port fails the stage at once, naming the service, the URL and the fix."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from seed_core.analyzer.clients import AnalyzerSetupError
from seed_core.stages.collect import run_collect
from seed_core.config import SeedConfig
from seed_core.stages.evaluate import run_evaluate
from seed_core.runtime.services import ServiceUnavailableError, check_services
from seed_core.stages.rl import run_rl_round
from seed_core.loader import with_overrides
from tests.faults.helpers import closed_port_url
from tests.faults.test_rl_resume import tiny_rl_config


def _no_model(tmp_path: Path) -> Path:
    """A model directory that does not exist: a stage that got as far as loading it would say so instead."""
    return tmp_path / "no-such-model"


def test_an_unreachable_retriever_stops_collect_and_evaluate_before_the_model_loads(tmp_path: Path) -> None:
    url = closed_port_url().replace("/v1", "/retrieve")
    cfg = with_overrides(SeedConfig(), {"env.name": "search_qa", "env.search_qa.retriever_url": url})
    expected = (f"the Search-QA retriever (env.search_qa.retriever_url) failed its check before the first rollout: "
                f"retrieval server {url} is unreachable (")
    with pytest.raises(ServiceUnavailableError) as err:
        run_collect(cfg, _no_model(tmp_path), tmp_path / "collect")
    assert str(err.value).startswith(expected) and "start it" in str(err.value)
    with pytest.raises(ServiceUnavailableError, match="^the Search-QA retriever"):
        run_evaluate(cfg, _no_model(tmp_path), tmp_path / "eval", "vanilla")
    assert not (tmp_path / "collect").exists()


def test_an_unreachable_vllm_engine_stops_the_stage_before_the_model_loads(tmp_path: Path) -> None:
    url = closed_port_url().removesuffix("/v1")
    cfg = with_overrides(SeedConfig(), {"generation.backend": "vllm", "generation.vllm.base_url": url})
    with pytest.raises(ServiceUnavailableError) as err:
        run_collect(cfg, _no_model(tmp_path), tmp_path / "collect")
    text = str(err.value)
    assert text.startswith(f"the vLLM engine {url} (generation.vllm.base_url) does not answer {url}/health (")
    assert "generation.vllm.base_url: ''" in text


def test_rl_checks_the_annotator_endpoint_before_the_first_rollout(tiny_model_dir: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """opid's analyzer is the Stage-1 annotator: with ``openai`` on a closed port, round 0 fails up front."""
    url = closed_port_url()
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    cfg = with_overrides(tiny_rl_config(tiny_model_dir), {"rl.algorithm": "opid", "annotate.client": "openai"})
    monkeypatch.setattr("seed_core.stages.rl.load_policy", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(AnalyzerSetupError, match=f"^cannot reach the analyzer endpoint {url} "):
        run_rl_round(cfg, 0, tiny_model_dir, tmp_path / "rl")


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_live_engine_and_no_network_settings_pass() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        check_services(with_overrides(SeedConfig(), {"generation.backend": "vllm", "generation.vllm.base_url": url}))
        check_services(SeedConfig(), analyzer="oracle")  # the defaults need no service
    finally:
        server.shutdown()
        server.server_close()
