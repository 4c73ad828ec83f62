"""Read and write the stage records as parquet with an explicit schema; all writes are atomic.

A file is written to ``<name>.tmp-<pid>``, fsynced, renamed into place, and its directory fsynced, so a
killed stage (or a power cut) never leaves a half-written output that a rerun (or DVC) would take as complete.

Schema evolution: a field typed ``X | None`` is a nullable column. A field with a default (added to a
record after files were written, e.g. ``score``) may be absent from an older file; reading fills it
with the default (``score`` -> ``None``: "not recorded", never a made-up value). A missing column
without a default is a ``DataFileError`` telling to rerun the stage.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterable, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from seed_core.types import AnnotationRecord, EvalRecord, StepRecord

R = TypeVar("R")

_ARROW_TYPES: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    "str": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "list[int]": pa.list_(pa.int64()),
    "list[float]": pa.list_(pa.float64()),
}


class DataFileError(RuntimeError):
    """A stage input is missing, truncated or has the wrong columns; the message names the file."""


_OPTIONAL = " | None"


def schema_of(record_type: type) -> pa.Schema:
    """The explicit parquet schema of a record dataclass (field order = column order; ``X | None`` is nullable)."""
    fields = []
    for f in dataclasses.fields(record_type):
        optional = isinstance(f.type, str) and f.type.endswith(_OPTIONAL)
        base = f.type[: -len(_OPTIONAL)] if optional else f.type
        fields.append(pa.field(f.name, _ARROW_TYPES[base], nullable=optional))
    return pa.schema(fields)


def _defaults(record_type: type) -> dict[str, Any]:
    """Fields with a plain default: the columns an older file may lack."""
    return {f.name: f.default for f in dataclasses.fields(record_type) if f.default is not dataclasses.MISSING}


SCHEMAS = {rt: schema_of(rt) for rt in (StepRecord, AnnotationRecord, EvalRecord)}


def _tmp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def fsync_file(path: Path) -> None:
    """Flush ``path``'s data to disk (a file written by a library that does not fsync, e.g. parquet)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make renames and new entries in directory ``path`` durable (POSIX: fsync the directory itself)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(tmp: Path, path: Path) -> Path:
    """Rename the (already fsynced) ``tmp`` onto ``path`` and fsync the directory that holds it."""
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return path


def fsync_tree(root: Path) -> None:
    """fsync every file under ``root``, then every directory, deepest first (a checkpoint before its swap)."""
    dirs = [Path(root)]
    for path in sorted(Path(root).rglob("*")):
        if path.is_dir():
            dirs.append(path)
        elif path.is_file():
            fsync_file(path)
    for folder in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        fsync_dir(folder)


def aside_path(path: Path) -> Path:
    """Where ``swap_dir`` keeps the previous ``path`` for the moment the new one is renamed in."""
    return path.with_name(f".{path.name}.old")


def swap_dir(tmp: Path, path: Path) -> Path:
    """Replace directory ``path`` by the complete directory ``tmp`` so that a complete one exists at every moment.

    1. fsync ``tmp``; finish any earlier interrupted swap (``recover_dir``)
    2. rename the old ``path`` aside (``.<name>.old``); fsync the parent
    3. rename ``tmp`` to ``path``; fsync the parent
    4. delete the aside copy

    Killed between 2 and 3, only the aside copy exists: ``recover_dir`` (called by every later swap and by
    ``seed_core.models.load_policy``) renames it back. Killed during 4, both exist: the aside copy is deleted.
    """
    tmp, path = Path(tmp), Path(path)
    fsync_tree(tmp)
    recover_dir(path)
    aside = aside_path(path)
    if path.exists():
        os.rename(path, aside)
        fsync_dir(path.parent)
    os.rename(tmp, path)
    fsync_dir(path.parent)
    shutil.rmtree(aside, ignore_errors=True)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_dir(path: Path) -> Path:
    """Undo or finish a ``swap_dir`` of ``path`` that was killed: the aside copy is renamed back when ``path``
    is missing, deleted when ``path`` exists; temporary ``.<name>.tmp-<pid>`` directories of dead processes
    are deleted. Returns ``path``."""
    path = Path(path)
    aside = aside_path(path)
    if aside.is_dir():
        if path.exists():
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.rename(aside, path)
            fsync_dir(path.parent)
    if path.parent.is_dir():
        for tmp in path.parent.glob(f".{path.name}.tmp-*"):
            pid = tmp.name.rsplit("-", 1)[-1]
            if tmp.is_dir() and pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(tmp, ignore_errors=True)
    return path


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_path(path)
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return replace_durably(tmp, path)


def atomic_write_text(path: Path, text: str) -> Path:
    return atomic_write_bytes(Path(path), text.encode())


def write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(Path(path), json.dumps(obj, indent=2, sort_keys=True, default=float) + "\n")


def read_metrics(path: str | Path) -> dict[str, float]:
    """A stage's metrics JSON; ``{}`` when the stage wrote none."""
    return json.loads(Path(path).read_text()) if Path(path).is_file() else {}


def write_records(records: Iterable[Any], path: str | Path, record_type: type) -> Path:
    """Write records of one dataclass type to parquet atomically (an empty list writes an empty table)."""
    path = Path(path)
    schema = SCHEMAS.get(record_type) or schema_of(record_type)
    rows = [dataclasses.asdict(r) for r in records]
    columns = {name: [row[name] for row in rows] for name in schema.names}
    table = pa.table(columns, schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_path(path)
    pq.write_table(table, tmp)
    fsync_file(tmp)
    return replace_durably(tmp, path)


def read_table(path: str | Path, record_type: type) -> pa.Table:
    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"{path} does not exist; run the stage that produces it first")
    schema = SCHEMAS.get(record_type) or schema_of(record_type)
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise DataFileError(f"{path} is not a readable parquet file ({err}); delete it and rerun its stage") from None
    defaults = _defaults(record_type)
    missing = [n for n in schema.names if n not in table.column_names]
    required = [n for n in missing if n not in defaults]
    if required:
        raise DataFileError(f"{path} lacks columns {required} of {record_type.__name__}; rerun its stage")
    for name in missing:  # written before the field existed: fill with its default
        column = schema.field(name)
        table = table.append_column(column, pa.array([defaults[name]] * table.num_rows, type=column.type))
    return table.select(schema.names)


def read_records(path: str | Path, record_type: type[R]) -> list[R]:
    table = read_table(path, record_type)
    return [record_type(**row) for row in table.to_pylist()]


def read_frame(path: str | Path, record_type: type):
    """The records as a pandas DataFrame (for reports and metrics)."""
    return read_table(path, record_type).to_pandas()
