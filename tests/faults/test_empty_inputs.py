"""Every stage refuses empty inputs with an error naming the file or split (issue 14), before loading a model."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seed_core.config import SeedConfig
from seed_core.runtime.io import DataFileError, write_records
from seed_core.loader import with_overrides
from seed_core.types import EvalRecord, StepRecord
from tests.faults.helpers import write_collect

NO_MODEL = Path("/nonexistent/model")
"""Passed as the model: reaching the model load would raise a different error."""


def _search_qa_with_empty(tmp_path: Path, split: str) -> SeedConfig:
    data = tmp_path / "qa"
    data.mkdir()
    schema = pa.schema([("question", pa.string()), ("golden_answers", pa.list_(pa.string())),
                        ("data_source", pa.string())])
    pq.write_table(pa.table({"question": ["q?"], "golden_answers": [["a"]], "data_source": ["nq"]}, schema=schema),
                   data / ("test.parquet" if split == "train" else "train.parquet"))
    pq.write_table(schema.empty_table(), data / f"{split}.parquet")
    return with_overrides(SeedConfig(), {"env.name": "search_qa", "env.search_qa.data_dir": str(data)})


def test_collect_refuses_an_empty_train_split(tmp_path: Path) -> None:
    from seed_core.stages.collect import run_collect

    with pytest.raises(DataFileError, match=r"env 'search_qa' has no tasks in split 'train' \(asked for 8\)"):
        run_collect(_search_qa_with_empty(tmp_path, "train"), NO_MODEL, tmp_path / "out")


def test_evaluate_refuses_an_empty_split(tmp_path: Path) -> None:
    from seed_core.stages.evaluate import run_evaluate

    with pytest.raises(DataFileError, match=r"env 'search_qa' has no tasks in split 'test'"):
        run_evaluate(_search_qa_with_empty(tmp_path, "test"), NO_MODEL, tmp_path / "out", "vanilla")


def test_sft_refuses_an_empty_annotation_set_and_clears_stale_outputs(tmp_path: Path) -> None:
    from seed_core.stages.sft import run_sft

    annotate = tmp_path / "annotate"
    annotate.mkdir()
    (annotate / "sft_examples.jsonl").write_text("")
    write_collect(tmp_path / "collect", 2)
    with pytest.raises(DataFileError, match=r"sft_examples.jsonl holds no examples: Stage 1 annotated no"):
        run_sft(with_overrides(SeedConfig(), {"sft.include_expert": True}), NO_MODEL, annotate, tmp_path / "sft",
                collect_dir=tmp_path / "collect")


def test_sft_refuses_missing_expert_rows_and_an_interrupted_run_does_not_look_done(tmp_path: Path) -> None:
    from seed_core.stages.sft import run_sft

    annotate, out = tmp_path / "annotate", tmp_path / "sft"
    annotate.mkdir()
    (annotate / "sft_examples.jsonl").write_text(json.dumps({"prompt": "p", "target": "t"}) + "\n")
    write_records([], tmp_path / "collect" / "expert.parquet", StepRecord)
    cfg = with_overrides(SeedConfig(), {"sft.include_expert": True, "collect.expert_episodes": 2})
    with pytest.raises(DataFileError, match=r"expert.parquet has 0 rows but collect.expert_episodes = 2"):
        run_sft(cfg, NO_MODEL, annotate, out, collect_dir=tmp_path / "collect")
    out.mkdir()
    for name in ("metrics.json", "resolved_config.json", "loss.csv"):  # a previous run's outputs
        (out / name).write_text("old")
    with pytest.raises(Exception, match="nonexistent"):  # the model load fails after the stale outputs went
        run_sft(with_overrides(cfg, {"collect.expert_episodes": 0}), NO_MODEL, annotate, out,
                collect_dir=tmp_path / "collect")
    assert sorted(p.name for p in out.iterdir()) == []


def test_report_refuses_an_empty_evaluation(tmp_path: Path) -> None:
    from seed_core.stages.report import run_report

    write_records([], tmp_path / "eval" / "sft" / "episodes.parquet", EvalRecord)
    with pytest.raises(DataFileError, match=r"sft/episodes.parquet has 0 rows; rerun the evaluate@sft stage"):
        run_report({"sft": tmp_path / "eval" / "sft"}, {}, tmp_path / "reports", SeedConfig())
