"""Which ``params.yaml`` keys a piece of code reads: ``with recording() as reads: ...`` collects the dotted
key of every leaf config field read (``cfg.rl.lr`` -> ``rl.lr``), on any copy of the config (the key comes
from the section's class, and each section class sits at one place in ``SeedConfig``). A section dumped as a
whole (``cfg.generation.vllm.model_dump_json()``) reads all its keys; dumps of the whole ``SeedConfig``
(resolved_config.json, the RL fingerprint, MLflow params) are not reads: they are records (see
``seed_core.lineage.stage_params``). ``with loading() as loads: ...`` collects the name-table entries the code looks up."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from pydantic import BaseModel

from seed_core import loader
from seed_core.config import SeedConfig, Section


def section_paths(model: type[BaseModel] = SeedConfig, prefix: str = "") -> dict[type, str]:
    out: dict[type, str] = {model: prefix}
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, Section):
            inner = section_paths(kind, f"{prefix}{name}.")
            assert not set(inner) & set(out), f"{kind.__name__} sits at two places in SeedConfig"
            out |= inner
    return out


PATHS = section_paths()


def _leaves(section: Section) -> set[str]:
    cls = type(section)
    out: set[str] = set()
    for name in cls.model_fields:
        value = section.__dict__[name]
        out |= _leaves(value) if isinstance(value, Section) else {PATHS[cls] + name}
    return out


@contextmanager
def recording() -> Iterator[set[str]]:
    reads: set[str] = set()
    get, dump, dump_json = Section.__getattribute__, Section.model_dump, Section.model_dump_json

    def getattribute(self: Section, name: str) -> Any:
        value = get(self, name)
        cls = type(self)
        if not paused and cls in PATHS and name in cls.model_fields and not isinstance(value, Section):
            reads.add(PATHS[cls] + name)
        return value

    def whole(method):
        def wrapper(self: Section, *args: Any, **kwargs: Any) -> Any:
            if type(self) is not SeedConfig and not paused:
                reads.update(_leaves(self))
            return method(self, *args, **kwargs)
        return wrapper

    paused: list[int] = []  # validation (a config built or loaded inside the stage) checks every key: not reads
    init, validate = Section.__init__, Section.model_validate.__func__

    def quiet_init(self: Section, **data: Any) -> None:
        paused.append(1)
        try:
            init(self, **data)
        finally:
            paused.pop()

    def quiet_validate(cls: type, *args: Any, **kwargs: Any) -> Any:
        paused.append(1)
        try:
            return validate(cls, *args, **kwargs)
        finally:
            paused.pop()

    check = loader.validate_config

    def quiet_check(*args: Any, **kwargs: Any) -> SeedConfig:  # the registry check after the schema's
        paused.append(1)
        try:
            return check(*args, **kwargs)
        finally:
            paused.pop()

    Section.__getattribute__ = getattribute  # type: ignore[method-assign]
    Section.model_dump, Section.model_dump_json = whole(dump), whole(dump_json)  # type: ignore[method-assign]
    Section.__init__, Section.model_validate = quiet_init, classmethod(quiet_validate)  # type: ignore[method-assign]
    loader.validate_config = quiet_check
    try:
        yield reads
    finally:
        Section.__getattribute__ = get  # type: ignore[method-assign]
        Section.model_dump, Section.model_dump_json = dump, dump_json  # type: ignore[method-assign]
        Section.__init__, Section.model_validate = init, classmethod(validate)  # type: ignore[method-assign]
        loader.validate_config = check


@contextmanager
def loading() -> Iterator[set[str]]:
    """The ``"module:attr"`` of every name-table entry (``seed_core.registries``) looked up while the block runs
    (``Registry.get``; a cached entry counts again), so a test can check that each is in the stage's fingerprint."""
    from seed_core.registry import Registry

    loads: set[str] = set()
    get = Registry.get

    def recording_get(self: Registry, name: str) -> Any:
        if (ref := self.ref(name)) is not None:
            loads.add(ref)
        return get(self, name)

    Registry.get = recording_get  # type: ignore[method-assign]
    try:
        yield loads
    finally:
        Registry.get = get  # type: ignore[method-assign]
