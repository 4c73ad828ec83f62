"""The one way a config is made: a params file (``params.yaml``, a preset, a resolved JSON) plus dotted-key
overrides, checked against the schema (``seed_core.config``), then against the registries. Used by ``seed -S``,
``python -m flows.<stage> --params``, ``python -m seed_core.stages.<stage> --config --set`` and ``with_overrides``.
Errors name each bad key, its value, the allowed values and its origin: the file or the override's flag.
The registries are name tables (``seed_core.registries``): checking a name imports no implementation.
A loaded config keeps its params file and overrides, so another process can load it again (``source_args``).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Iterable, Iterator, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from seed_core.algorithms import ALGORITHMS, effective_rl
from seed_core.config import ConfigError, SeedConfig
from seed_core.methods import METHODS
from seed_core.registries import ADVANTAGES, BACKENDS, CLIENTS, DISTILL_LOSSES, ENVS, POLICY_LOSSES
from seed_core.registry import Registry
from seed_core.repro.numerics import RECORD_KEY as NUMERICS_RECORD
from seed_core.runtime.io import one_line
from seed_core.runtime.logs import configure


def parse_yaml(text: str) -> Any:
    """Read YAML the way DVC does (YAML 1.2, ``ruamel.yaml``): ``no``/``yes``/``on``/``off`` stay strings.

    ``dvc exp run -S`` (used by ``seed sweep``) rewrites params.yaml and drops quotes, so
    ``mixed_precision: "no"`` comes back as ``mixed_precision: no``; a YAML 1.1 reader (PyYAML) would turn
    that into ``False`` and reject a config DVC itself reads as the string ``"no"``."""
    return YAML(typ="safe", pure=True).load(text)


MAX_VALUE_CHARS = 1000
"""The longest override value (``-S KEY=VALUE``, a served request's value) that is read at all: every setting fits
in far less, and a longer one is refused before it is parsed (a 200,000-digit number costs the parser, then
becomes ``inf`` or an argument list the system refuses)."""


def check_value_length(key: str, text: str, origin: str = "-S") -> None:
    """A ``ConfigError`` naming ``key`` when its value's text is longer than ``MAX_VALUE_CHARS``."""
    if len(text) > MAX_VALUE_CHARS:
        raise ConfigError(f"{origin} {key}={text[:20]}...: the value is {len(text):,} characters long; a setting's "
                          f"value has at most {MAX_VALUE_CHARS:,}")


def parse_overrides(items: Iterable[str], origin: str = "-S") -> dict[str, Any]:
    """``["rl.opd_coef=0.02", "eval.splits=[a, b]"]`` -> ``{"rl.opd_coef": 0.02, "eval.splits": ["a", "b"]}``; a
    value longer than ``MAX_VALUE_CHARS`` is refused unparsed."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{origin} expects KEY=VALUE, got {item[:80]!r}")
        check_value_length(key.strip(), value, origin)
        out[key.strip()] = parse_yaml(value)
    return out


def plain_value(annotation: Any) -> bool:
    """Whether a schema annotation is a number, a boolean, a ``Literal`` choice or a tuple/list of those: a value
    that cannot name a program, a path or a host (what a served run or a pool's cell may choose freely)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return plain_value(args[0])
    if origin is Literal:
        return True
    if origin in (tuple, list):
        return bool(args) and all(plain_value(a) for a in args if a is not Ellipsis)
    return annotation in (int, float, bool)


def registry_fields(cfg: SeedConfig) -> Iterator[tuple[str, Registry[Any], str]]:
    """Where each registry-key field of the config is checked: (dotted key, registry, value) triples."""
    yield "env.name", ENVS, cfg.env.name
    yield "generation.backend", BACKENDS, cfg.generation.backend
    yield "annotate.client", CLIENTS, cfg.annotate.client
    yield "rl.algorithm", ALGORITHMS, cfg.rl.algorithm
    yield "rl.advantage", ADVANTAGES, cfg.rl.advantage
    yield "rl.policy_loss", POLICY_LOSSES, cfg.rl.policy_loss
    yield "rl.distill_loss", DISTILL_LOSSES, cfg.rl.distill_loss
    if cfg.rl.algorithm in ALGORITHMS:  # a loss the algorithm fixes (skill_sd) must exist too
        algo = ALGORITHMS.get(cfg.rl.algorithm)
        yield f"rl.algorithm={algo.name}: distill_loss", DISTILL_LOSSES, effective_rl(cfg.rl, algo).distill_loss
    for i, method in enumerate(cfg.sweep.methods):  # vanilla, sft, an algorithm, or a "*" method of one
        yield f"sweep.methods[{i}]", METHODS, method


def _close(word: object, names: list[str]) -> str:
    """``; did you mean 'seed'?`` when a known name is close to ``word`` (difflib), else ``""``."""
    close = difflib.get_close_matches(str(word), [str(n) for n in names], n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _known(names: list[str], section: str) -> str:
    return f"; known keys in {section or 'the config'}: {', '.join(names)}" if names else ""


def _short(value: Any) -> str:
    """A value for an error message, never a whole config section."""
    if isinstance(value, dict):
        return f"a mapping with keys {sorted(map(str, value))[:6]}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _field_at(loc: tuple[Any, ...]) -> tuple[type[BaseModel] | None, Any]:
    """(section model holding the last key of ``loc``, that field's annotation or None)."""
    model: Any = SeedConfig
    for part in loc[:-1]:
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None, None
        model = field.annotation
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None, None
    field = model.model_fields.get(loc[-1]) if loc else None
    return model, field.annotation if field is not None else None


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any], origin: str = "-S") -> dict[str, Any]:
    """Set dotted keys in a (nested, plain) config mapping, checked against the schema (a partial file
    may lack the key); an unknown key names the close known ones."""
    for dotted, value in overrides.items():
        parts, node = tuple(dotted.split(".")), data
        for i, key in enumerate(parts):
            section, annotation = _field_at(parts[: i + 1])
            if section is None:  # inside a free-form mapping (chat_template_kwargs)
                node = node if i == len(parts) - 1 else node.setdefault(key, {})
            elif key not in section.model_fields:
                known = list(section.model_fields)
                raise ConfigError(f"{origin} {dotted}={value}: unknown key {key!r}"
                                  f"{_close(key, known) or _known(known, '.'.join(parts[:i]))}")
            elif i < len(parts) - 1:
                if not isinstance(node.setdefault(key, {}), dict) or annotation is None or not (
                        isinstance(annotation, type) and issubclass(annotation, BaseModel)
                        or get_origin(annotation) is dict):
                    raise ConfigError(f"{origin} {dotted}={value}: {'.'.join(parts[: i + 1])} is not a section")
                node = node[key]
        node[parts[-1]] = value
    return data


def _format_error(errors: list[Any], source: str, overrides: dict[str, Any], origin: str) -> str:
    lines = ["invalid config:"]
    for e in errors:
        ctx = e.get("ctx") or {}
        loc = tuple(e["loc"])
        if e["type"] == "unknown_name":
            key, value = ctx["key"], ctx["value"]
        else:
            key, value = ".".join(str(p) for p in loc) or "(top level)", e.get("input")
        hit = next((k for k in overrides if key == k or key.startswith(k + ".")), None)
        where = f"from {origin} {hit}={overrides[hit]}" if hit else f"in {source}"
        if e["type"] == "unknown_name":
            msg = f"not a known {ctx['kind']}{_close(value, ctx['allowed'])}; allowed: {', '.join(ctx['allowed'])}"
        elif e["type"] == "extra_forbidden":
            section, _ = _field_at(loc)
            known = list(section.model_fields) if section else []
            lines.append(f"  {key}: unknown key"
                         f"{_close(loc[-1], known) or _known(known, '.'.join(map(str, loc[:-1])))} ({where})")
            continue
        elif e["type"] == "literal_error":
            allowed = [str(a) for a in get_args(_field_at(loc)[1])]
            msg = f"{e['msg']}{_close(value, allowed)}"
        else:
            msg = e["msg"]
        lines.append(f"  {key} = {_short(value)}: {msg} ({where})")
    return "\n".join(lines)


def validate_config(data: dict[str, Any], source: str = "the config", overrides: dict[str, Any] | None = None,
                    origin: str = "-S") -> SeedConfig:
    """Validate a config mapping against the schema, then its registry keys against the registries; errors name
    each bad key, its value and where it came from: ``source`` (``params.yaml``, ``preset presets/x.yaml``) or,
    for keys in ``overrides``, ``origin`` (``-S``)."""
    try:
        cfg = SeedConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err.errors(), source, overrides or {}, origin)) from None
    for dotted, registry, value in registry_fields(cfg):
        if value not in registry:
            unknown = {"type": "unknown_name", "loc": (), "input": value,
                       "ctx": {"key": dotted, "value": value, "kind": registry.kind, "allowed": registry.names()}}
            raise ConfigError(_format_error([unknown], source, overrides or {}, origin))
    return cfg


def with_overrides(cfg: SeedConfig, overrides: dict[str, Any], origin: str = "-S") -> SeedConfig:
    """A copy of ``cfg`` with dotted-key overrides applied (``{"rl.opd_coef": 0.02}``), re-validated; a loaded
    config's source gets them too (a key set again moves to the end: applied in order, they give this config).

    ``origin`` names where the overrides came from in error messages (``-S``, ``--set``, ``--algorithm``)."""
    data = apply_overrides(cfg.model_dump(), overrides, origin)
    out = validate_config(data, source="the config", overrides=overrides, origin=origin)
    if cfg._source:
        out._source = (cfg._source[0], {**{k: v for k, v in cfg._source[1].items() if k not in overrides}, **overrides})
    return out


def source_args(cfg: SeedConfig) -> list[str]:
    """``--config <params file> --set KEY=VALUE ...`` that load ``cfg`` again in an engine entry point
    (``config_from_args``), each value as JSON, which YAML 1.2 reads back exactly."""
    if cfg._source is None:
        raise ConfigError("this config was built in code, not loaded from a params file, so a launched stage "
                          "(project.accelerate_config) cannot load it: use load_config(<params file>, <overrides>)")
    path, overrides = cfg._source
    return ["--config", str(path), *(arg for k, v in overrides.items() for arg in ("--set", f"{k}={json.dumps(v)}"))]


def describe_source(path: Path) -> str:
    """How an error names a config file: ``params.yaml``, ``preset presets/x.yaml`` or ``config file X``."""
    if path.name == "params.yaml":
        return str(path) if path.parent != Path(".") else "params.yaml"
    return f"preset {path}" if path.parent.name == "presets" else f"config file {path}"


def load_config(path: str | Path, overrides: dict[str, Any] | None = None, origin: str = "-S") -> SeedConfig:
    """Load ``params.yaml`` (or a preset / resolved JSON) into a validated ``SeedConfig``, with dotted-key
    ``overrides`` (from ``origin``: ``-S``, ``--set``, ``--algorithm``) applied before validation."""
    path = Path(path)
    source = describe_source(path)
    if path.is_dir():
        files = sorted(p.name for p in path.glob("*.yaml"))
        raise ConfigError(f"{source} is a directory, not a params file; "
                          + (f"name one of its files, e.g. {path / files[0]} ({', '.join(files)})" if files else
                             "it holds no .yaml file"))
    if not path.is_file():
        siblings = sorted(p.name for p in path.parent.glob(f"*{path.suffix}")) if path.parent.is_dir() else []
        close = _close(path.name, siblings)
        hint = close or (f"; files there: {', '.join(siblings)}" if siblings else "")
        raise ConfigError(f"{source} does not exist{hint}")
    try:
        data = parse_yaml(path.read_text()) or {}
    except YAMLError as err:
        raise ConfigError(f"{source} is not valid YAML/JSON: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must hold a mapping of sections, got {type(data).__name__}")
    if path.suffix == ".json":  # a stage's resolved_config.json: its numerics section is a record, not a setting
        data.pop(NUMERICS_RECORD, None)
    if overrides:
        data = apply_overrides(data, overrides, origin)
    cfg = validate_config(data, source=source, overrides=overrides, origin=origin)
    cfg._source = (path.resolve(), dict(overrides or {}))
    return cfg


def stage_parser(description: str) -> argparse.ArgumentParser:
    """The engine entry points' CLI: ``--config`` (a params file) and repeated ``--set KEY=VALUE``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", default="params.yaml", help="params.yaml, a preset, or a resolved_config.json")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config value, e.g. --set rl.opd_coef=0.02 (YAML-typed)")
    parser.add_argument("--log-level", default=None, help="DEBUG, INFO (default: $SEED_LOG_LEVEL or INFO), WARNING")
    return parser


def config_from_args(args: argparse.Namespace) -> SeedConfig:
    """The entry point's config (``--config`` + ``--set``); also sends the engine's log lines to stderr."""
    configure(getattr(args, "log_level", None))
    one_line_errors(_main_module().rsplit(".", 1)[-1])
    try:
        overrides = parse_overrides(args.set, origin="--set")
    except ConfigError as err:
        raise SystemExit(str(err)) from None
    return load_config(args.config, overrides or None, origin="--set")


@contextlib.contextmanager
def stage_errors(stage: str, *errors: type[BaseException]) -> Iterator[None]:
    """An engine entry point's known bad-setup or bad-input ``errors``, and every error ``seed_core.runtime.io.one_line``
    knows (a ``KnownError``: unloadable weights, a damaged input; a full disk, an unwritable output directory),
    exit with one line, ``seed <stage>: <message>`` (the message names the fix), not a traceback."""
    try:
        yield
    except errors as err:
        raise SystemExit(f"seed {stage}: {err}") from None
    except Exception as err:
        from seed_core.runtime.io import one_line

        message = one_line(err)
        if message is None:
            raise
        raise SystemExit(f"seed {stage}: {message}") from None


def _main_module() -> str:
    """The running program's module (``seed_core.stages.sft`` under ``python -m``), else its file's stem."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return spec.name if spec is not None and spec.name else Path(sys.argv[0] or "seed").stem


def one_line_errors(stage: str) -> None:
    """From here on, an error that ``seed_core.runtime.io.one_line`` knows ends the process, uncaught, with
    ``seed <stage>: <message>`` on stderr (exit status 1) instead of a traceback; any other error keeps its
    traceback. For the entry points that do not wrap their work in ``stage_errors`` (and the flows)."""
    previous = getattr(sys.excepthook, "seed_previous", sys.excepthook)

    def hook(kind: type[BaseException], err: BaseException, tb: Any) -> None:
        message = one_line(err) if isinstance(err, Exception) else None
        if message is None:
            previous(kind, err, tb)
        else:
            print(f"seed {stage}: {message}", file=sys.stderr)

    hook.seed_previous = previous  # type: ignore[attr-defined]
    sys.excepthook = hook
