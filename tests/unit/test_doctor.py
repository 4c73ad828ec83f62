"""``seed doctor``'s logic (issue 28 item 1) with a fake golden build: the verdict against the committed records
of the same key (match, differs and which part, nothing to compare with), ``--record`` appending this machine with
``match``, and the exit codes (0 match, 1 differs, 2 bad input, 3 no record, 4 the build failed).

The key (issue 43 item 5) covers the numerics code only: a docstring or a comment does not change it, code outside
the build's closure is not in it, and the committed results must hold a reference record of today's key, made on
the reference CPU; on that CPU, today's real build must give that record's hashes (elsewhere that test is
skipped: another CPU may give other bits)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from seed_app import cli, cli_doctor
from seed_core.repro import golden, numerics
from seed_core.lineage.code_closure import ROOT
from seed_core.repro.golden import DIFFERS, MATCH, NO_RECORD, append, verdict, weights_sha256


def fake(testbed: str = "aa", rl: str = "bb", key: str = "k1", cpu: str = "CPU A") -> dict[str, Any]:
    return {"cpu_model": cpu, "isa": ["avx2", "fma"], "settings": {"MKL_CBWR": "AVX2"},
            "sources": {"MKL_CBWR": "pinned"},
            "cpu_capability": "AVX2", "torch_threads": 2, "torch": "2.13.0", "key": key,
            "hashes": {"testbed": testbed, "rl_round": rl}, "recorded": "2026-01-01"}


def test_the_verdict_compares_with_the_first_record_of_the_same_key() -> None:
    code, lines = verdict(fake(), [])
    assert code == NO_RECORD == 3 and "NO RECORD for this numerics code and these libraries (key k1)" in lines[-1]
    assert lines[0].startswith("seed doctor: CPU A, 2 SIMD flags (no avx512f), torch 2.13.0 at AVX2 with 2 threads, "
                               "MKL_CBWR=AVX2 (pinned)") and lines[1:3] == ["  testbed: aa", "  rl_round: bb"]
    records = [fake(testbed="zz", key="k0"), fake(cpu="Ref CPU"), fake(rl="cc", cpu="CPU B")]
    code, lines = verdict(fake(), records)
    assert code == MATCH == 0 and lines[-1].startswith("seed doctor: MATCH: the same bits as the reference machine (Ref CPU")
    assert "also recorded with this key: CPU B (differs)" in lines[-1]
    code, lines = verdict(fake(rl="dd"), records)
    assert code == DIFFERS == 1 and lines[-1].startswith("seed doctor: DIFFERS (rl_round) from the reference machine (Ref CPU "
                                              "under MKL_CBWR=AVX2)") and "statistical verdict" in lines[-1]


def test_a_key_recorded_only_on_another_cpu_is_bridged_to_the_reference_by_an_earlier_key() -> None:
    """CPU B gave one set of bits for k1 and k2, the reference CPU A has k1: k2's reference is A's k1 hashes, marked
    as bridged. Without B's k1 record, or with B's k1 bits unlike its k2 bits, there is no bridge."""
    from seed_core.repro.golden import reference

    ref_k1, b_k1, b_k2 = fake(), fake(testbed="xx", rl="yy", cpu="CPU B"), fake(testbed="xx", rl="yy", key="k2",
                                                                                  cpu="CPU B")
    bridged = reference([ref_k1, b_k1, b_k2], "k2")
    assert bridged["cpu_model"] == "CPU A" and bridged["hashes"] == ref_k1["hashes"] and bridged["key"] == "k2"
    assert bridged["bridged"] == {"from_key": "k1", "via_cpu": "CPU B"}
    assert reference([ref_k1, b_k2], "k2") is b_k2  # no bridge: the key's own first record, as before
    assert reference([ref_k1, fake(testbed="xx", cpu="CPU B"), b_k2], "k2") is b_k2  # B's bits moved: none
    direct = fake(rl="zz", key="k2")
    assert reference([ref_k1, b_k1, b_k2, direct], "k2") is direct  # a reference-CPU record wins over a bridge
    code, lines = verdict(fake(key="k2"), [ref_k1, b_k1, b_k2])  # the reference CPU checks the inference
    assert code == MATCH and "bridged by CPU B's equal records of both keys" in lines[-1]
    assert verdict(fake(rl="moved", key="k2"), [ref_k1, b_k1, b_k2])[0] == DIFFERS
    assert reference([], "k1") is None and reference([ref_k1], "k2") is None


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
    assert first.exit_code == 3 and f"recorded this machine in {path} (match: True)" in first.output, first.output
    again = CliRunner().invoke(cli.app, ["doctor", "--results", str(path)])
    assert again.exit_code == 0 and "MATCH" in again.output
    other = CliRunner().invoke(cli.app, ["doctor", "--results", str(path)])
    assert other.exit_code == 1 and "DIFFERS (testbed)" in other.output
    assert "MKL_CBWR=COMPATIBLE" in other.output and "COMPATIBLE" not in again.output  # the vendor hint, on DIFFERS
    assert len(json.loads(path.read_text())["machines"]) == 1  # only --record writes
    builds.append(fake(key="k2", cpu="CPU B"))  # a new key recorded away from the reference CPU: a warning
    elsewhere = CliRunner().invoke(cli.app, ["doctor", "--results", str(path), "--record"])
    assert elsewhere.exit_code == 3 and "WARNING: this machine (CPU B) becomes the reference of key k2, but the " \
                                        "reference CPU is CPU A (the first record)" in elsewhere.stderr
    path.write_text("not json")
    bad = CliRunner().invoke(cli.app, ["doctor", "--results", str(path)])
    assert bad.exit_code == 2 and "is not a numerics results file" in bad.output


def test_a_failed_build_exits_4_and_the_help_names_every_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> dict[str, Any]:
        raise RuntimeError("the golden build failed (exit 1): out of memory")

    monkeypatch.setattr(cli_doctor, "run_golden", fail)
    failed = CliRunner().invoke(cli.app, ["doctor"])
    assert failed.exit_code == 4 and failed.stderr == "seed doctor: the golden build failed (exit 1): out of memory\n"
    text = " ".join(CliRunner().invoke(cli.app, ["doctor", "--help"]).output.split())
    for code in ("0 MATCH", "1 DIFFERS", "2 bad input", "3 NO RECORD", "4 the build itself failed"):
        assert code in text, (code, text)


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


def test_the_key_ignores_docstrings_and_comments_and_follows_code(tmp_path: Path) -> None:
    base = '"""Module doc."""\n\n\ndef f(x):\n    """Doc."""\n    return x * 2  # twice\n'
    variants = {"same": '"""Another doc."""\ndef f(x):\n    # a comment\n    return (x *\n            2)\n',
                "code": '"""Module doc."""\n\n\ndef f(x):\n    """Doc."""\n    return x * 3\n'}
    (tmp_path / "base.py").write_text(base)
    for name, text in variants.items():
        (tmp_path / f"{name}.py").write_text(text)
    digest = golden.code_digest
    assert digest(tmp_path / "base.py") == digest(tmp_path / "same.py") != digest(tmp_path / "code.py")


def test_the_key_covers_the_builds_numerics_code_only() -> None:
    """The build's closure under its own config: seed's losses and the hf rollout, not another environment, the
    vLLM backend, the CLI or the check itself; ``NOT_NUMERICS`` names only files of that closure."""
    files = {f.relative_to(ROOT).as_posix() for f in golden.numerics_files()}
    assert {"seed_core/repro/golden_build.py", "seed_core/losses/distill.py", "seed_core/rollout/backends.py",
            "seed_core/envs/ezpoints.py", "seed_core/modeling/testbed.py", "seed_core/repro/numerics.py"} <= files
    assert not files & {"seed_core/repro/golden.py", "seed_core/envs/alfworld.py", "seed_core/rollout/vllm_backend.py",
                        *golden.NOT_NUMERICS}
    assert not [f for f in files if not f.startswith("seed_core/")], "only the engine computes the numbers"
    from seed_core.lineage.code_closure import reachable
    from seed_core.lineage.stage_code import RL_STAGE, selection

    closure = {f.relative_to(ROOT).as_posix() for f in
               reachable(golden.BUILD, select=selection(RL_STAGE, golden.golden_config()))}
    assert set(golden.NOT_NUMERICS) <= closure, "a NOT_NUMERICS entry the build no longer imports: drop it"


def committed_records() -> list[dict[str, Any]]:
    return json.loads((ROOT / golden.RESULTS).read_text())["machines"]


RERECORD = ("run `seed doctor --record` on the reference CPU model ({cpu}, the first record's) and commit "
            "benchmarks/results/numerics.json")


def reference_of_today() -> dict[str, Any]:
    """The committed reference record of today's key (the first record of the key), checked to be on the
    reference CPU; fails, saying how to re-record, when there is none."""
    records, key = committed_records(), golden.key()
    ref = golden.reference(records, key)
    assert ref is not None, (f"the numerics code changed (key {key}) and nobody re-recorded: "
                             + RERECORD.format(cpu=records[0]["cpu_model"]))
    assert cli_doctor.same_cpu(ref, records[0]), \
        f"key {key}'s reference was recorded on another CPU ({ref['cpu_model']}): " + \
        RERECORD.format(cpu=records[0]["cpu_model"])
    return ref


def test_the_committed_results_have_a_reference_record_of_todays_numerics_code() -> None:
    reference_of_today()


def test_todays_build_gives_the_recorded_hashes_on_the_reference_cpu() -> None:
    """The real build (~15-40 s) against the record of today's key: fails when code outside the key (a wrong
    ``NOT_NUMERICS`` entry, a file the closure misses) changed the bits, or the record was made from other code."""
    ref = reference_of_today()  # a bridged reference is checked here, on the reference CPU
    if numerics.cpu()["cpu_model"] != ref["cpu_model"]:
        pytest.skip(f"not the reference CPU model ({ref['cpu_model']}): its bits may differ (a model name such as "
                    "'Intel(R) Xeon(R) Processor' can stand for several chips)")
    mine = cli_doctor.run_golden()
    assert mine["key"] == ref["key"] and mine["hashes"] == ref["hashes"], (mine["hashes"], ref["hashes"])
