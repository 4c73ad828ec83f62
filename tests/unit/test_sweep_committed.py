"""Committed sweep-cell results (``seed_core.sweep.committed``): reused only under their own key and seed."""

from __future__ import annotations

import json

from seed_core.sweep.committed import committed_path, read_committed, write_committed


def test_a_committed_cell_is_read_back_only_under_its_own_key_and_seed(tmp_path):
    results = {"seed": 3, "success": {"grpo": 0.5}}
    path = write_committed(tmp_path, 3, "abc123", results)
    assert path == tmp_path / "sweep" / "cells" / "seed_3-abc123.json"
    assert read_committed(tmp_path, 3, "abc123") == {**results, "config_hash": "abc123"}
    assert read_committed(tmp_path, 3, "other") is None  # another config, methods or base model
    assert read_committed(tmp_path, 4, "abc123") is None
    # a file renamed by hand (or edited) under another key or seed is not trusted
    committed_path(tmp_path, 4, "abc123").write_text(json.dumps({**results, "config_hash": "abc123"}))
    assert read_committed(tmp_path, 4, "abc123") is None
    committed_path(tmp_path, 5, "k").write_text("{not json")
    assert read_committed(tmp_path, 5, "k") is None
