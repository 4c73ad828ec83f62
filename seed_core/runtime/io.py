"""Read and write the stage records as parquet with an explicit schema; all writes are atomic.

A file is written to ``<name>.tmp-<pid>``, fsynced, renamed into place, and its directory fsynced, so a
killed stage (or a power cut) never leaves a half-written output that a rerun (or DVC) would take as complete.

Schema evolution: a field typed ``X | None`` is a nullable column. A field with a default (added to a
record after files were written, e.g. ``score``) may be absent from an older file; reading fills it
with the default (``score`` -> ``None``: "not recorded", never a made-up value). A missing column
without a default is a ``DataFileError`` telling to rerun the stage.

Errors users meet (``KnownError``: the message names the cause and the fix) are printed as one line by the stage
CLIs and flows (``seed_core.loader.stage_errors`` / ``one_line_errors``). A write that fails for a full disk or an
unwritable directory (``writing``) removes what it had written and raises ``DiskFullError`` /
``OutputNotWritableError`` naming the path, the space needed and free, and the fix.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Iterable, Iterator, TypeVar

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


class KnownError(Exception):
    """An error whose message names its cause and its fix: a stage CLI or flow prints the message as one line
    (``one_line``), not a traceback. Mixed into the concrete classes (``DataFileError(KnownError, RuntimeError)``)."""


class DataFileError(KnownError, RuntimeError):
    """A stage input is missing, truncated or has the wrong columns; the message names the file."""


class OutputError(KnownError, RuntimeError):
    """An output could not be written; what the write had made so far was removed (``writing``)."""


class DiskFullError(OutputError):
    """No space left (or the disk quota reached) while writing; the message names the path, the space needed and
    free, and the fix."""


class OutputNotWritableError(OutputError):
    """The output directory is read-only or this user may not write it; the message names it and the fix."""


_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_NOT_WRITABLE = {errno.EROFS: "is on a read-only file system", errno.EACCES: "is not writable by this user",
                 errno.EPERM: "is not writable by this user"}
_OS_ERROR_TEXT = re.compile(r"\(os error (\d+)\)")
"""How the Rust writers (safetensors, tokenizers) report an OSError: "No space left on device (os error 28)"."""
_SHORT_WRITE_TEXT = re.compile(r"unexpected pos \d+ vs \d+")
"""torch's zip writer (``torch.save``) on a short write, i.e. a full disk: "unexpected pos 6063872 vs 6063764"."""


def _errno_of(err: BaseException) -> int | None:
    """The OS error behind a failed write, also where a library reported it as text (``_OS_ERROR_TEXT``)."""
    if isinstance(err, OSError) and err.errno:
        return err.errno
    found = _OS_ERROR_TEXT.search(str(err))
    if found:
        return int(found.group(1))
    if _SHORT_WRITE_TEXT.search(str(err)) or "No space left on device" in str(err):
        return errno.ENOSPC
    return None


def _existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _mount_point(path: Path) -> Path:
    path = _existing(path)
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


ELSEWHERE = "set project.data_dir ($MODELS_ROOT for a model directory)"
"""The settings that move outputs to another directory (the messages' fix)."""


def _mb(n: int) -> str:
    return f"{n / 2**20:.0f}" if n >= 2**20 else f"{n / 2**20:.1f}"


def _free_bytes(path: Path) -> int | None:
    try:
        return shutil.disk_usage(_existing(path)).free
    except OSError:
        return None


def output_error(err: BaseException, path: Path, needed_bytes: int = 0,
                 free_bytes: int | None = None) -> OutputError | None:
    """``err`` (raised while writing ``path``) as a ``DiskFullError`` / ``OutputNotWritableError`` with a one-line
    message naming the path and the fix; None when it is neither. ``free_bytes``: default the space free now."""
    code = _errno_of(err)
    if code in _NO_SPACE:
        free = _free_bytes(path) if free_bytes is None else free_bytes
        needed = f"needed ~{_mb(needed_bytes)} MB, " if needed_bytes else ""
        space = f"{needed}free {_mb(free)} MB" if free is not None else needed.rstrip(", ")
        return DiskFullError(f"no space left on {_mount_point(path)} while writing {path} ({space}); free space "
                             f"there or {ELSEWHERE} to a directory on a disk with room")
    if code in _NOT_WRITABLE:
        folder = _existing(Path(path).parent)
        fix = "remount it read-write" if code == errno.EROFS else "give this user write access (chmod/chown)"
        return OutputNotWritableError(f"cannot write {path}: {folder} {_NOT_WRITABLE[code]}; {fix} or "
                                      f"{ELSEWHERE} to a writable directory")
    return None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


@contextlib.contextmanager
def writing(path: Path, *, temp: Path | None = None, needed_bytes: int = 0) -> Iterator[None]:
    """The writes of ``path`` inside: on any error ``temp`` (the temporary file or folder they write) is removed;
    a full disk or an unwritable directory becomes ``DiskFullError`` / ``OutputNotWritableError``
    (``output_error``), whichever library reported it (an OSError, the Rust writers' "os error 28", torch's
    short write). ``needed_bytes``: about how much the write takes; the message gives it with the space that
    was free when the write began (a half-written file still open, e.g. in torch's writer, holds its space)."""
    free = _free_bytes(path)
    try:
        yield
    except OutputError:
        if temp is not None:
            _remove(Path(temp))
        raise
    except Exception as err:
        if temp is not None:
            _remove(Path(temp))
        translated = output_error(err, Path(path), needed_bytes, free)
        if translated is None:
            raise
        raise translated from None


def one_line(err: BaseException) -> str | None:
    """What a CLI prints instead of a traceback: a ``KnownError``'s message, or a full disk / unwritable path that
    a raw OSError reports (e.g. a stage's own ``mkdir``), on one line; None for anything else (a bug)."""
    if isinstance(err, KnownError):
        return " ".join(line.strip() for line in str(err).splitlines() if line.strip())
    if isinstance(err, OSError) and err.filename:
        translated = output_error(err, Path(err.filename))
        return str(translated) if translated is not None else None
    return None


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
    ``seed_core.modeling.models.load_policy``) renames it back. Killed during 4, both exist: the aside copy is deleted.
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
    tmp = _tmp_path(path)
    with writing(path, temp=tmp, needed_bytes=len(data)):
        path.parent.mkdir(parents=True, exist_ok=True)
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
    tmp = _tmp_path(path)
    with writing(path, temp=tmp, needed_bytes=table.nbytes):
        path.parent.mkdir(parents=True, exist_ok=True)
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
