"""Passages of a retrieval corpus and their file format (Search-R1 / FlashRAG ``jsonl``).

One JSON object per line, ``{"id": "...", "contents": "\\"Title\\"\\ntext"}``: the first line of
``contents`` is the quoted title, the rest the passage text (the wiki-18 layout Search-R1 serves).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable



@dataclass(frozen=True)
class Passage:
    id: str
    contents: str

    @property
    def title(self) -> str:
        return self.contents.split("\n", 1)[0].strip().strip('"')

    @property
    def text(self) -> str:
        parts = self.contents.split("\n", 1)
        return parts[1].strip() if len(parts) > 1 else ""


def make_contents(title: str, text: str) -> str:
    """``"Title"`` on the first line, the text on the next (the wiki-18 ``contents`` layout)."""
    return f'"{title}"\n{text}'


def write_corpus(passages: Iterable[Passage], path: str | Path) -> Path:
    from seed_core.runtime.io import atomic_write_text  # pyarrow-heavy module: import on write only

    lines = [json.dumps({"id": p.id, "contents": p.contents}, ensure_ascii=False) for p in passages]
    return atomic_write_text(Path(path), "\n".join(lines) + "\n")


def read_corpus(path: str | Path) -> list[Passage]:
    """Every passage of a ``jsonl`` corpus; a missing file or a line without ``contents`` is an error
    naming the file and line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"retrieval corpus {path} does not exist; generate it with "
                                "`python -m seed_core.data_gen.generate search_qa` or point at a Search-R1 corpus jsonl")
    passages: list[Passage] = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                passages.append(Passage(id=str(row.get("id", number - 1)), contents=str(row["contents"])))
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise ValueError(f"{path}:{number} is not a corpus row {{'id', 'contents'}} ({err!r})") from None
    if not passages:
        raise ValueError(f"retrieval corpus {path} is empty")
    return passages
