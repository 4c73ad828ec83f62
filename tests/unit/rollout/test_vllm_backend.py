"""seed_core.rollout.vllm_backend / vllm_engine / vllm_worker against loopback fake vLLM servers.

The fake speaks the subset seed uses: ``GET /health``, ``GET /v1/models``, ``POST /v1/completions``
(token-id prompts, ``return_token_ids``, ``logprobs``), ``POST /collective_rpc`` and
``POST /reset_prefix_cache``; it records every request. A completion answers ``[10 + seed, 11, EOS, 12]``
so a test can tell which request (by its seed) produced which answer, and that the cut keeps the EOS.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from seed_core.config import GenerationConfig, VLLMConfig
from seed_core.modeling.models import encode_prompt
from seed_core.rollout import vllm_engine
from seed_core.rollout.backends import BACKENDS, eos_ids
from seed_core.rollout.vllm_backend import VLLMBackend, split_evenly
from seed_core.rollout.vllm_engine import Engine, EngineError, EnginePool, LaunchSpec
from seed_core.rollout.vllm_launch import engine_devices

PROMPTS = ["push the box up", "12 = ?", "left", "think", "Symbols: # wall, _ floor. Go."]


class FakeVLLM:
    """A fake vLLM server on 127.0.0.1; ``fail_first`` completions answer HTTP ``fail_status``."""

    def __init__(self, root: str, eos: int, fail_first: int = 0, fail_status: int = 500) -> None:
        self.root, self.eos = root, eos
        self.fail_first, self.fail_status = fail_first, fail_status
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/health":
                    self._send(200, {})
                elif self.path == "/v1/models":
                    self._send(200, {"data": [{"id": "served-name", "root": fake.root}]})
                else:
                    self._send(404, {"error": "no route"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with fake.lock:
                    fake.requests.append((self.path, body))
                    failing = self.path == "/v1/completions" and fake.fail_first > 0
                    fake.fail_first -= int(failing)
                if failing:
                    self._send(fake.fail_status, {"error": "scripted failure"})
                elif self.path == "/v1/completions":
                    first = 10 + int(body.get("seed") or 0)
                    ids = [first, 11, fake.eos, 12]
                    self._send(200, {"choices": [{"index": 0, "text": "ignored", "token_ids": ids,
                                                  "logprobs": {"token_logprobs": [-0.5, -0.25, -0.125, -1.0]}}]})
                elif self.path == "/collective_rpc":
                    self._send(200, {"results": [{"seconds": 0.01}]})
                elif self.path == "/reset_prefix_cache":
                    self._send(200, {"success": True})
                else:
                    self._send(404, {"error": "no route"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]

    def completions(self) -> list[dict[str, Any]]:
        return [b for p, b in self.requests if p == "/v1/completions"]


@pytest.fixture
def make_server(tiny_policy) -> Iterator[Any]:
    servers: list[FakeVLLM] = []

    def make(root: str | None = None, **kw: Any) -> FakeVLLM:
        server = FakeVLLM(root or str(tiny_policy.source), eos_ids(tiny_policy)[0], **kw)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.server.shutdown()
        server.server.server_close()


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_engine, "BACKOFF_S", 0.01)


def remote_backend(policy, *urls: str, pool: EnginePool | None = None, **gen: Any) -> VLLMBackend:
    cfg = GenerationConfig(backend="vllm", vllm=VLLMConfig(base_url=",".join(urls), max_model_len=4096), **gen)
    return VLLMBackend(policy, cfg, pool=pool or EnginePool())


def test_request_carries_our_token_ids_stop_ids_and_sampling(tiny_policy, make_server) -> None:
    server = make_server()
    backend = remote_backend(tiny_policy, server.url, max_prompt_tokens=12, top_p=0.9, top_k=5)
    backend.generate(PROMPTS[:2], temperature=0.7, max_new_tokens=9, seed=100)
    sent = sorted(server.completions(), key=lambda body: body["seed"])  # requests arrive in any order
    expected = [encode_prompt(tiny_policy.tokenizer, p)[-12:] for p in PROMPTS[:2]]
    assert [b["prompt"] for b in sent] == expected  # same ids hf would feed, cut from the left
    for i, body in enumerate(sent):
        assert body["model"] == "served-name" and body["max_tokens"] == 9 and body["seed"] == 100 + i
        assert body["stop_token_ids"] == eos_ids(tiny_policy)
        assert body["return_token_ids"] is True and body["logprobs"] == 0
        assert (body["temperature"], body["top_p"], body["top_k"]) == (0.7, 0.9, 5)
        assert (body["repetition_penalty"], body["presence_penalty"], body["min_p"]) == (1.0, 0.0, 0.0)


def test_greedy_request_has_neutral_sampling_and_no_seed_without_one(tiny_policy, make_server) -> None:
    server = make_server()
    remote_backend(tiny_policy, server.url, top_p=0.5, top_k=3).generate(["up"], temperature=0, max_new_tokens=4)
    (body,) = server.completions()
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.0, 1.0, 0)
    assert "seed" not in body


def test_completion_keeps_tokens_through_the_first_eos_and_decodes_with_our_tokenizer(tiny_policy, make_server) -> None:
    server = make_server()
    (c,) = remote_backend(tiny_policy, server.url).generate(["up"], temperature=1.0, max_new_tokens=8, seed=5)
    eos = eos_ids(tiny_policy)[0]
    assert c.token_ids == [15, 11, eos]  # the fake's trailing 12 (after EOS) is dropped
    assert c.logprobs == [-0.5, -0.25, -0.125]
    assert c.text == tiny_policy.tokenizer.decode([15, 11, eos], skip_special_tokens=True)


def test_prompts_split_across_two_engines_in_contiguous_chunks_and_order_is_kept(tiny_policy, make_server) -> None:
    a, b = make_server(), make_server()
    out = remote_backend(tiny_policy, a.url, b.url).generate(PROMPTS, temperature=1.0, max_new_tokens=4, seed=0)
    assert [c.token_ids[0] for c in out] == [10, 11, 12, 13, 14]  # answer i came from request seed i
    assert sorted(body["seed"] for body in a.completions()) == [0, 1, 2]
    assert sorted(body["seed"] for body in b.completions()) == [3, 4]
    assert split_evenly(5, 2) == [range(0, 3), range(3, 5)] and split_evenly(1, 3)[1:] == [range(1, 1)] * 2


def test_server_errors_are_retried_then_succeed(tiny_policy, make_server) -> None:
    server = make_server(fail_first=2)
    (c,) = remote_backend(tiny_policy, server.url).generate(["up"], temperature=1.0, max_new_tokens=4, seed=1)
    assert c.token_ids[0] == 11 and len(server.completions()) == 3


def test_persistent_failure_names_the_url_after_three_attempts(tiny_policy, make_server) -> None:
    server = make_server(fail_first=99)
    with pytest.raises(EngineError, match=rf"{server.url}/v1/completions failed after 3 attempts \(HTTP 500"):
        remote_backend(tiny_policy, server.url).generate(["up"], temperature=1.0, max_new_tokens=4)
    assert len(server.completions()) == 3


def test_bad_request_is_not_retried_and_shows_the_server_message(tiny_policy, make_server) -> None:
    server = make_server(fail_first=1, fail_status=400)
    with pytest.raises(EngineError, match=r"rejected the request \(HTTP 400\): .*scripted failure"):
        remote_backend(tiny_policy, server.url).generate(["up"], temperature=1.0, max_new_tokens=4)
    assert len(server.completions()) == 1


def test_unreachable_engine_is_a_clear_error(tiny_policy) -> None:
    port = vllm_engine.free_port()
    with pytest.raises(EngineError, match=rf"cannot read http://127.0.0.1:{port}/v1/models.*base_url"):
        remote_backend(tiny_policy, f"http://127.0.0.1:{port}").generate(["up"], temperature=0, max_new_tokens=2)


def test_weights_are_reloaded_only_when_the_source_changes(tiny_policy, make_server, tmp_path: Path) -> None:
    server = make_server(root=str(tmp_path / "older-checkpoint"))
    pool = EnginePool()
    backend = remote_backend(tiny_policy, server.url, pool=pool)
    backend.generate(["up"], temperature=0, max_new_tokens=2)
    backend.generate(["up"], temperature=0, max_new_tokens=2)
    rpc = [b for p, b in server.requests if p == "/collective_rpc"]
    assert rpc == [{"method": "reload_weights", "kwargs": {"weights_path": str(tiny_policy.source)}}]
    # reload, cache reset, then the requests; the second generate goes straight to the engine
    assert server.paths() == ["/collective_rpc", "/reset_prefix_cache", "/v1/completions", "/v1/completions"]
    other = tmp_path / "next-round"
    other.mkdir()
    (other / "config.json").write_text((Path(tiny_policy.source) / "config.json").read_text())
    remote_backend(replace(tiny_policy, source=other), server.url, pool=pool).generate(
        ["up"], temperature=0, max_new_tokens=2)
    assert server.requests[-3][1]["kwargs"] == {"weights_path": str(other.resolve())}


def test_pool_keys_one_slot_for_the_trainable_policy_and_one_per_frozen_directory(tiny_policy, tmp_path: Path) -> None:
    cfg = GenerationConfig(backend="vllm", vllm=VLLMConfig(python=sys.executable))
    other = tmp_path / "ckpt"
    other.mkdir()
    (other / "config.json").write_text((Path(tiny_policy.source) / "config.json").read_text())
    trainable = VLLMBackend(tiny_policy, cfg).pool_key()
    assert VLLMBackend(replace(tiny_policy, source=other), cfg).pool_key() == trainable
    tiny_policy.model.requires_grad_(False)
    frozen_a, frozen_b = VLLMBackend(tiny_policy, cfg).pool_key(), VLLMBackend(replace(tiny_policy, source=other),
                                                                                    cfg).pool_key()
    assert len({trainable, frozen_a, frozen_b}) == 3 and frozen_a.startswith("frozen:")
    (other / "config.json").write_text(json.dumps({"hidden_size": 7}))  # another shape cannot be reloaded in place
    tiny_policy.model.requires_grad_(True)
    assert VLLMBackend(replace(tiny_policy, source=other), cfg).pool_key() != trainable


def test_missing_vllm_python_says_how_to_get_one(tiny_policy, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = GenerationConfig(backend="vllm", vllm=VLLMConfig(python=str(tmp_path / "nope" / "python")))
    with pytest.raises(EngineError, match=r"generation.vllm.python = .*nope.*run scripts/setup_vllm.sh \(GPU\) or set "
                                          r"generation.vllm.python"):
        BACKENDS.get("vllm")(tiny_policy, cfg)
    monkeypatch.setattr(vllm_engine, "default_python", lambda: tmp_path / ".venv-vllm" / "bin" / "python")
    with pytest.raises(EngineError, match=r"default vLLM environment: no Python interpreter at .*\.venv-vllm.*setup_vllm"):
        BACKENDS.get("vllm")(tiny_policy, GenerationConfig(backend="vllm"))


def test_prompt_longer_than_the_engine_window_is_refused(tiny_policy, make_server) -> None:
    server = make_server()
    cfg = GenerationConfig(backend="vllm", vllm=VLLMConfig(base_url=server.url, max_model_len=256))
    with pytest.raises(ValueError, match=r"max_new_tokens 250 exceeds generation.vllm.max_model_len 256"):
        VLLMBackend(tiny_policy, cfg, pool=EnginePool()).generate(["up"], temperature=0, max_new_tokens=250)
    assert server.completions() == []


def test_engine_that_dies_at_startup_reports_its_log(tmp_path: Path) -> None:
    """This venv's python has no vllm: the engine exits at once and the error quotes its log."""
    spec = LaunchSpec(python=Path(sys.executable), model=tmp_path, dtype="auto", tensor_parallel_size=1,
                      gpu_memory_utilization=0.5, max_model_len=256, startup_timeout_s=30)
    with pytest.raises(EngineError, match=r"exited with code 1 before answering .*/health; log .*engine0-port\d+\.log "
                                          r"ends with:\n(.|\n)*No module named 'vllm'"):
        Engine.launch(spec, tmp_path / "logs")


def test_gpu_placement_per_local_rank_and_engine() -> None:
    assert engine_devices(0, 0, num_engines=1, tensor_parallel_size=1) == "0"
    assert engine_devices(1, 1, num_engines=2, tensor_parallel_size=2) == "6,7"  # (1*2+1)*2
    assert engine_devices(0, 1, num_engines=2, tensor_parallel_size=1, visible="4,5,6") == "5"
    with pytest.raises(EngineError, match=r"needs GPU #3 but only 3 are visible"):
        engine_devices(1, 1, num_engines=2, tensor_parallel_size=1, visible="4,5,6")


def test_launch_command_pins_the_sampling_semantics(tmp_path: Path) -> None:
    spec = LaunchSpec(python=Path("/py"), model=tmp_path, dtype="float32", tensor_parallel_size=2,
                      gpu_memory_utilization=0.4, max_model_len=1024, startup_timeout_s=1,
                      extra_args=("--enforce-eager",), devices="2,3")
    cmd = " ".join(spec.command(8123))
    for flag in ("--tensor-parallel-size 2", "--generation-config vllm", "--logprobs-mode processed_logprobs",
                 "--worker-extension-cls seed_vllm_worker.SeedWorkerExtension", "--port 8123 ", "--enforce-eager"):
        assert flag in cmd
    env = spec.environment(tmp_path)
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and env["VLLM_SERVER_DEV_MODE"] == "1"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)


def test_an_engine_s_sockets_go_to_its_own_directory_and_go_with_it(tmp_path: Path, monkeypatch) -> None:
    """vLLM binds ~8 ZeroMQ sockets in ``VLLM_RPC_BASE_PATH`` (default: the system temp directory) and leaves
    them there when stopped; each engine gets a directory of its own in its log directory, removed by ``stop``
    (tests/vllm/test_vllm_real.py checks that a real engine binds there)."""
    import socket
    import tempfile

    monkeypatch.delenv("VLLM_RPC_BASE_PATH", raising=False)
    spec = LaunchSpec(python=Path("/py"), model=tmp_path, dtype="float32", tensor_parallel_size=1,
                      gpu_memory_utilization=0.4, max_model_len=1024, startup_timeout_s=1)
    log_dir = Path(tempfile.mkdtemp(prefix="seed-vllm-"))  # short, as launch_group's; pytest's tmp_path may not be
    try:
        ipc = vllm_engine.ipc_directory(log_dir, 3)
        assert ipc is not None and ipc.parent == log_dir and ipc.name.startswith("ipc3-")
        assert spec.environment(tmp_path, ipc_dir=ipc)["VLLM_RPC_BASE_PATH"] == str(ipc)
        monkeypatch.setenv("VLLM_RPC_BASE_PATH", "/theirs")  # a path the user exported wins
        assert spec.environment(tmp_path, ipc_dir=ipc)["VLLM_RPC_BASE_PATH"] == "/theirs"
        bound = socket.socket(socket.AF_UNIX)
        bound.bind(str(ipc / "0b1e8c2a-live-socket"))
        process = subprocess.Popen(["sleep", "60"], start_new_session=True)
        Engine("http://127.0.0.1:9", tmp_path, process=process, ipc_dir=ipc).stop(grace_s=5)
        bound.close()
        assert process.poll() is not None and not ipc.exists() and log_dir.exists()
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    # a socket path past Linux's 107 bytes cannot bind: such a log directory leaves vLLM its default place
    assert vllm_engine.ipc_directory(tmp_path / ("x" * 80), 0) is None


def test_supervisor_stops_the_engine_when_its_parent_is_gone() -> None:
    worker = Path(vllm_engine.__file__).with_name("vllm_worker.py")
    start = time.monotonic()
    # parent pid 1 is never ours: the supervisor sees a dead parent at its first poll and stops `sleep 60`
    proc = subprocess.run([sys.executable, str(worker), "--parent-pid", "1", "--", "sleep", "60"],
                          start_new_session=True, capture_output=True, text=True, timeout=30)
    assert time.monotonic() - start < 10
    assert "parent process 1 exited; stopping the engine" in proc.stdout


def test_server_without_dev_mode_cannot_be_reloaded_and_says_why(tiny_policy, make_server, tmp_path: Path) -> None:
    server = make_server(root=str(tmp_path))  # serves another directory; its /collective_rpc is missing
    backend = remote_backend(tiny_policy, server.url)
    original = server.server.RequestHandlerClass.do_POST

    def no_rpc(handler: Any) -> None:
        if handler.path == "/collective_rpc":
            handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
            return handler._send(404, {"detail": "Not Found"})
        return original(handler)

    server.server.RequestHandlerClass.do_POST = no_rpc  # type: ignore[method-assign]
    with pytest.raises(EngineError, match=r"cannot load .* into http://127.0.0.1:\d+: .*HTTP 404.*VLLM_SERVER_DEV_MODE=1"):
        backend.generate(["up"], temperature=0, max_new_tokens=2)
    assert server.completions() == []


@pytest.mark.parametrize("on_cpu", [True, False], ids=["one-at-a-time", "all-kept"])
def test_on_cpu_launching_a_group_first_stops_the_other_groups_this_process_launched(tmp_path: Path,
                                                                                     on_cpu: bool) -> None:
    """A CPU engine holds its model in the machine's RAM: the ALFWorld rehearsal's policy and frozen-analyzer
    engines on two ranks ran out of 24 GB. On CPU a new group stops the launched ones (a remote server is never
    stopped) and a later request relaunches; on GPUs every group stays."""
    started: list[subprocess.Popen[bytes]] = []

    def launch() -> list[Engine]:  # a real process group in place of a vLLM server
        started.append(subprocess.Popen(["sleep", "60"], start_new_session=True))
        return [Engine("http://127.0.0.1:9", tmp_path, process=started[-1], log_path=tmp_path / "log")]

    pool = EnginePool(one_at_a_time=lambda: on_cpu)
    remote = pool.get("remote|http://127.0.0.1:8", lambda: [Engine("http://127.0.0.1:8", None)])
    try:
        policy = pool.get("policy|k", launch)
        analyzer = pool.get(f"frozen:{tmp_path}|k", launch)
        assert analyzer is not policy and started[1].poll() is None
        assert (started[0].poll() is not None) == on_cpu  # the policy's engine was stopped only on CPU
        again = pool.get("policy|k", launch)
        assert (again is policy) != on_cpu and len(started) == (3 if on_cpu else 2)
        assert pool.get("remote|http://127.0.0.1:8", launch) is remote  # never stopped, never relaunched
    finally:
        pool.stop_all()
    assert all(p.poll() is not None for p in started)
