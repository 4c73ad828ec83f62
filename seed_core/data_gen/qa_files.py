"""Question files of the Search-QA environment: ``QAItem`` and its parquet layout (Search-R1's).

A split is ``<data_dir>/<split>.parquet`` with one row per question. The columns Search-R1 uses
(``question``, ``golden_answers``, ``data_source``) are read from the user's own files
(``nq_hotpotqa_train`` style); seed's generated files add ``id`` and ``gold_docs`` (titles of the
passages on the gold path, in hop order). verl-style processed files that keep the question in
``extra_info.question`` and the answers in ``reward_model.ground_truth.target`` are read too.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from seed_core.runtime.io import atomic_write_bytes


SEARCH_R1_SOURCES = ("nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
"""The seven evaluation sets of Search-R1, in the order of the paper's table."""
GENERATED_SOURCES = ("single_hop", "multi_hop")


@dataclass(frozen=True)
class QAItem:
    id: str
    question: str
    golden_answers: tuple[str, ...]
    data_source: str
    gold_docs: tuple[str, ...] = ()
    """Titles of the passages on the gold path (hop order); empty for external data."""


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        pa.field("id", pa.string(), nullable=False),
        pa.field("question", pa.string(), nullable=False),
        pa.field("golden_answers", pa.list_(pa.string()), nullable=False),
        pa.field("data_source", pa.string(), nullable=False),
        pa.field("gold_docs", pa.list_(pa.string()), nullable=False),
    ])


def write_split(items: Sequence[QAItem], path: str | Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {
        "id": [i.id for i in items],
        "question": [i.question for i in items],
        "golden_answers": [list(i.golden_answers) for i in items],
        "data_source": [i.data_source for i in items],
        "gold_docs": [list(i.gold_docs) for i in items],
    }
    buffer = io.BytesIO()
    pq.write_table(pa.table(columns, schema=_schema()), buffer)
    return atomic_write_bytes(Path(path), buffer.getvalue())


def _answers(row: dict[str, Any]) -> list[str]:
    answers = row.get("golden_answers")
    if answers is None:
        truth = (row.get("reward_model") or {}).get("ground_truth") or {}
        answers = truth.get("target") if isinstance(truth, dict) else truth
    if isinstance(answers, str):
        answers = [answers]
    return [str(a) for a in answers or []]


def read_split(path: str | Path) -> list[QAItem]:
    """Every question of a split file; a row without a question or answers is an error naming the row."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Search-QA split {path} does not exist; generate it with "
                                "`python -m seed_core.data_gen.generate search_qa --out DIR` or point env.search_qa.data_dir "
                                "at a directory holding Search-R1's <split>.parquet files")
    rows = pq.read_table(path).to_pylist()
    items: list[QAItem] = []
    for number, row in enumerate(rows):
        question = row.get("question") or (row.get("extra_info") or {}).get("question")
        answers = _answers(row)
        if not question or not answers:
            raise ValueError(f"{path} row {number} has no question or no golden answers; expected the "
                             "Search-R1 columns question, golden_answers, data_source")
        items.append(QAItem(
            id=str(row.get("id") or f"{path.stem}_{number}"),
            question=str(question).strip(),
            golden_answers=tuple(answers),
            data_source=str(row.get("data_source") or "unknown"),
            gold_docs=tuple(row.get("gold_docs") or ()),
        ))
    return items
