"""``seed doctor``'s logic (issue 28 item 1) with a fake golden build: the verdict against the committed records
of the same key (match, differs and which part, nothing to compare with), ``--record`` appending this machine with
``match``, and the exit codes. The real build differs between machines, so it is not a CI test here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from seed_app import cli, cli_doctor
from seed_core.golden import append, verdict, weights_sha256


def fake(testbed: str = "aa", rl: str = "bb", key: str = "k1", cpu: str = "CPU A") -> dict[str, Any]:
    return {"cpu_model": cpu, "isa": ["avx2", "fma"], "settings": {"MKL_CBWR": "AVX2"},
            "sources": {"MKL_CBWR": "pinned"},
            "cpu_capability": "AVX2", "torch_threads": 2, "torch": "2.13.0", "key": key,
            "hashes": {"testbed": testbed, "rl_round": rl}, "recorded": "2026-01-01"}


def test_the_verdict_compares_with_the_first_record_of_the_same_key() -> None:
    code, lines = verdict(fake(), [])
    assert code == 1 and "no committed record for this code and these libraries (key k1)" in lines[-1]
    assert lines[0].startswith("seed doctor: CPU A, 2 SIMD flags (no avx512f), torch 2.13.0 at AVX2 with 2 threads, "
                               "MKL_CBWR=AVX2 (pinned)") and lines[1:3] == ["  testbed: aa", "  rl_round: bb"]
    records = [fake(testbed="zz", key="k0"), fake(cpu="Ref CPU"), fake(rl="cc", cpu="CPU B")]
    code, lines = verdict(fake(), records)
    assert code == 0 and lines[-1].startswith("seed doctor: MATCH: the same bits as the reference machine (Ref CPU")
    assert "also recorded with this key: CPU B (differs)" in lines[-1]
    code, lines = verdict(fake(rl="dd"), records)
    assert code == 1 and lines[-1].startswith("seed doctor: DIFFERS (rl_round) from the reference machine (Ref CPU "
                                              "under MKL_CBWR=AVX2)") and "statistical verdict" in lines[-1]


def test_record_appends_with_match(tmp_path: Path) -> None:
    path = tmp_path / "results" / "numerics.json"
    assert append(path, fake())["match"] is True  # the first of its key is the reference
    assert append(path, fake(rl="other"))["match"] is False
    assert append(path, fake(rl="other", key="k2"))["match"] is True  # another key: its own reference
    assert [(m["hashes"]["rl_round"], m["match"]) for m in json.loads(path.read_text())["machines"]] == \
        [("bb", True), ("other", False), ("other", True)]


def test_seed_doctor_exit_codes_and_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "numerics.json"
    builds: list[dict[str, Any]] = [fake(), fake(), fake(testbed="ee")]
    monkeypatch.setattr(cli_doctor, "run_golden", lambda: builds.pop(0))
    first = CliRunner().invoke(cli.app, ["doctor", "--results", str(path), "--record"])
    assert first.exit_code == 1 and f"recorded this machine in {path} (match: True)" in first.output, first.output
    again = CliRunner().invoke(cli.app, ["doctor", "--results", str(path)])
    assert again.exit_code == 0 and "MATCH" in again.output
    other = CliRunner().invoke(cli.app, ["doctor", "--results", str(path)])
    assert other.exit_code == 1 and "DIFFERS (testbed)" in other.output
    assert "MKL_CBWR=COMPATIBLE" in other.output and "COMPATIBLE" not in again.output  # the vendor hint, on DIFFERS
    assert len(json.loads(path.read_text())["machines"]) == 1  # only --record writes
    path.write_text("not json")
    bad = CliRunner().invoke(cli.app, ["doctor", "--results", str(path)])
    assert bad.exit_code == 2 and "is not a numerics results file" in bad.output


def test_weights_hash_follows_every_tensor(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    tensors = {"a": torch.ones(3), "b": torch.zeros(2, 2)}
    for name in ("x", "y", "z"):
        (tmp_path / name).mkdir()
    save_file(tensors, str(tmp_path / "x" / "model.safetensors"))
    save_file(dict(reversed(tensors.items())), str(tmp_path / "y" / "model.safetensors"))
    save_file({**tensors, "a": torch.tensor([1.0, 1.0, 1.0 + 2 ** -23])}, str(tmp_path / "z" / "model.safetensors"))
    assert weights_sha256(tmp_path / "x") == weights_sha256(tmp_path / "y")  # the order of writing does not count
    assert weights_sha256(tmp_path / "x") != weights_sha256(tmp_path / "z")  # one last bit does
