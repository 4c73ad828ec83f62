"""What every section of the typed config (``seed_core.config``) is built on: ``Section`` (frozen, no unknown key,
docstrings as field descriptions, no inf/nan) and ``ConfigError`` (a malformed params file or preset)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigError(ValueError):
    """params.yaml or a preset is malformed; the message names the key, the value and the fix."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)
