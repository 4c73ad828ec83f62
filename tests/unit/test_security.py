"""No checkpoint runs code, and seed's vLLM engines listen on loopback with a random API key (issue 14)."""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

import pytest
import torch

from seed_core.config import ConfigError, SeedConfig, VLLMConfig
from seed_core.runtime.io import DataFileError
from seed_core.loader import load_config
from seed_core.rollout.vllm_engine import Engine, EngineError, LaunchSpec
from seed_core.rollout.vllm_launch import launch_specs
from seed_core.trainer.scale import load_optimizer, make_accelerator

ROOT = Path(__file__).resolve().parents[2]


def test_every_torch_load_is_weights_only() -> None:
    found = []
    for path in sorted([*(ROOT / "seed_core").rglob("*.py"), *(ROOT / "flows").glob("*.py"),
                        *(ROOT / "tasks").glob("*.py"), *(ROOT / "scripts").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "load" and \
                    getattr(node.func, "value", None) is not None and getattr(node.func.value, "id", "") == "torch":
                flag = {k.arg: k.value for k in node.keywords}.get("weights_only")
                found.append((path.relative_to(ROOT).as_posix(), isinstance(flag, ast.Constant) and flag.value is True))
    assert found and all(ok for _, ok in found), found


class _Payload:
    """Unpickling this runs ``os.system``: what a crafted optimizer.pt would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_optimizer_state_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    torch.save({"state": {}, "param_groups": [], "x": _Payload(marker)}, ckpt / "optimizer.pt")
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    accelerator = make_accelerator(SeedConfig().model.model_copy(update={"device": "cpu"}))
    with pytest.raises(DataFileError, match=r"optimizer.pt holds more than tensors and plain values, so it was "
                                            r"not loaded \(weights_only"):
        load_optimizer(accelerator, optimizer, ckpt)
    assert not marker.exists()
    # a genuine optimizer state still loads
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    torch.save(optimizer.state_dict(), ckpt / "optimizer.pt")
    fresh = torch.optim.AdamW(model.parameters(), lr=1e-3)
    assert load_optimizer(accelerator, fresh, ckpt) and fresh.state_dict()["state"][0]["step"].item() == 1


@pytest.mark.parametrize("flag", ["--host", "--host=0.0.0.0", "--port", "--api-key", "--uds"])
def test_extra_args_may_not_override_host_port_or_key(flag: str) -> None:
    with pytest.raises(ConfigError, match=rf"generation.vllm.extra_args = .*may not set {flag}"):
        load_config(ROOT / "params.yaml", {"generation.vllm.extra_args": [flag, "x"]})
    spec = LaunchSpec(python=Path("/py"), model=Path("/m"), dtype="auto", tensor_parallel_size=1,
                      gpu_memory_utilization=0.5, max_model_len=256, startup_timeout_s=1, extra_args=(flag, "x"))
    with pytest.raises(EngineError, match=f"may not set {flag}"):
        spec.command(8000)


def test_the_engine_host_is_loopback_unless_set() -> None:
    (spec,) = launch_specs(VLLMConfig(), Path("/m"), python=Path("/py"), local_rank=0, use_gpus=False)
    cmd = spec.command(8000)
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and "--api-key" not in cmd
    (spec,) = launch_specs(VLLMConfig(host="10.0.0.5"), Path("/m"), python=Path("/py"), local_rank=0, use_gpus=False)
    assert spec.command(8000)[spec.command(8000).index("--host") + 1] == "10.0.0.5"


FAKE_SERVER = '''
"""A stand-in for vllm.entrypoints.openai.api_server: /health open, /v1 behind VLLM_API_KEY (as vLLM does)."""
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

args = sys.argv[1:]
host, port = args[args.index("--host") + 1], int(args[args.index("--port") + 1])
key = os.environ.get("VLLM_API_KEY")
with open(os.environ["FAKE_RECORD"], "a") as fh:
    fh.write(json.dumps({"host": host, "key": key, "argv": args}) + "\\n")


class H(BaseHTTPRequestHandler):
    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send(200, {})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/v1") and self.headers.get("Authorization") != f"Bearer {key}":
            return self._send(401, {"error": "Unauthorized"})
        self._send(200, {"choices": [{"text": "ok"}]})

    def log_message(self, *a):
        pass


HTTPServer((host, port), H).serve_forever()
'''


def test_launched_engines_get_a_random_key_kept_off_the_command_line(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    fake = tmp_path / "fake"
    (fake / "vllm" / "entrypoints" / "openai").mkdir(parents=True)
    for pkg in ("vllm", "vllm/entrypoints", "vllm/entrypoints/openai"):
        (fake / pkg / "__init__.py").write_text("")
    (fake / "vllm" / "entrypoints" / "openai" / "api_server.py").write_text(FAKE_SERVER)
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("PYTHONPATH", str(fake))
    monkeypatch.setenv("FAKE_RECORD", str(record))
    monkeypatch.setenv("VLLM_API_KEY", "inherited-key")  # never passed on: each engine gets its own
    spec = LaunchSpec(python=Path(sys.executable), model=tmp_path, dtype="auto", tensor_parallel_size=1,
                      gpu_memory_utilization=0.5, max_model_len=256, startup_timeout_s=30)
    engines = [Engine.launch(spec, tmp_path / "logs", i) for i in range(2)]
    try:
        assert engines[0].complete({"prompt": [1]})["text"] == "ok"  # the engine's own client has the key
        assert httpx.post(f"{engines[0].url}/v1/completions", json={}, trust_env=False).status_code == 401
        seen = [json.loads(line) for line in record.read_text().splitlines()]
        keys = [s["key"] for s in seen]
        assert [s["host"] for s in seen] == ["127.0.0.1"] * 2
        assert len(set(keys)) == 2 and all(k and len(k) >= 32 and k != "inherited-key" for k in keys)
        logs = "".join(p.read_text() for p in (tmp_path / "logs").glob("*.log"))
        argv = " ".join(" ".join(s["argv"]) for s in seen)
        assert all(k not in logs and k not in argv for k in keys)
    finally:
        for engine in engines:
            engine.stop()
