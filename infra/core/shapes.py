"""Reading loosely shaped documents (provider inputs, preview JSON, IAM policies) without surprises: a value
that is not the expected shape reads as empty, never as an exception (pure)."""

from __future__ import annotations

from typing import Any


def dict_at(value: Any, *keys: str) -> dict[str, Any]:
    """`value[k1][k2]...` when every step is a dict and the last one is a dict too, else {}."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


def list_at(value: Any, *keys: str) -> list[Any]:
    """`value[k1][k2]...` when every step is a dict and the last one is a list, else []."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, list) else []


def as_list(value: Any) -> list[Any]:
    """A list as is, a tuple as a list, None as [], anything else as a list of one (IAM's one-or-many fields)."""
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]
