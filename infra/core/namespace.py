"""The `mlinfra` config namespace: the keys a stack file sets under `mlinfra:`, decoded."""

from __future__ import annotations

import json
from typing import Any

from infra.core.errors import InputError, Problem
from infra.core.problems import key_path

NAMESPACE = "mlinfra"


def namespace_values(flat: dict[str, Any]) -> dict[str, Any]:
    """`{"mlinfra:kind": "registry", "aws:region": ...}` -> `{"kind": "registry"}`; structured values decoded."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        namespace, _, name = key.partition(":")
        if namespace != NAMESPACE:
            continue
        if isinstance(value, str) and value[:1] in ("{", "["):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as error:
                raise InputError(Problem(key_path(NAMESPACE, (name,)), f"not valid JSON: {error.msg}")) from None
        out[name] = value
    return out
