"""Which instance types each stack kind accepts (data: data/roles.json)."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Literal

from infra.catalog.aws.lookup import instance_type

Role = Literal["training", "serving"]


@functools.cache
def _roles() -> dict:
    return json.loads(resources.files("infra.catalog").joinpath("data/roles.json").read_text(encoding="utf-8"))


def types_for(role: Role) -> tuple[str, ...]:
    return tuple(_roles()[role])


def role_problem(name: str, role: Role) -> str | None:
    """Why `name` cannot be used for `role` (unknown, or meant for the other role), or None."""
    try:
        instance_type(name)
    except LookupError as error:
        return str(error)
    if name in types_for(role):
        return None
    other: Role = "serving" if role == "training" else "training"
    what = f"is a {other} type" if name in types_for(other) else f"is not a supported {role} type"
    return f"{name} {what}; {role} takes one of: {', '.join(types_for(role))}"
