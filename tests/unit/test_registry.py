from pathlib import Path

import pytest

from seed_core.registry import Registry, UnknownNameError


def test_register_get_and_names():
    reg: Registry[int] = Registry("widget")
    reg.register("b")(2)
    reg.register("a")(1)
    assert reg.get("a") == 1 and reg.names() == ["a", "b"] and "b" in reg


def test_unknown_name_lists_known_names():
    reg: Registry[int] = Registry("widget")
    reg.register("alpha")(1)
    with pytest.raises(UnknownNameError, match="unknown widget 'beta'; known widgets: alpha"):
        reg.get("beta")


def test_reregistering_a_different_object_fails_but_same_object_is_idempotent():
    reg: Registry[object] = Registry("widget")
    obj = object()
    reg.register("x")(obj)
    reg.register("x")(obj)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("x")(object())


def test_a_table_entry_is_known_without_importing_it_and_imported_on_first_get() -> None:
    import subprocess
    import sys

    code = ("import sys\nfrom seed_core.registries import ENVS\n"
            "assert 'sokoban' in ENVS and 'seed_core.envs.sokoban' not in sys.modules\n"
            "cls = ENVS.get('sokoban')\n"
            "print(cls.__module__, ENVS.get('sokoban') is cls, 'seed_core.envs.webshop' in sys.modules)")
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["seed_core.envs.sokoban", "True", "False"]


def test_registering_over_a_table_entry_must_name_the_same_object() -> None:
    reg: Registry[object] = Registry("widget", {"ok": "seed_core.registry:load_ref"})
    assert reg.names() == ["ok"] and reg.ref("ok") == "seed_core.registry:load_ref"
    from seed_core.registry import load_ref

    reg.register("ok")(load_ref)  # the object the entry names
    assert reg.get("ok") is load_ref
    other: Registry[object] = Registry("widget", {"ok": "seed_core.registry:load_ref"})
    with pytest.raises(ValueError, match="already in the table as 'seed_core.registry:load_ref'"):
        other.register("ok")(object())
