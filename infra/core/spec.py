"""Base of every config model: frozen, unknown keys rejected, camelCase keys as in the stack files."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Spec(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,  # "yes" is not a boolean and true is not a day count
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=True,
    )
