"""JSON schema of a stack file (`stacks/Pulumi.<stack>.yaml`) for editors and the YAML language server."""
from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from infra.config.stack import KINDS, NAMESPACE


def stack_file_schema() -> dict[str, Any]:
    models = list(KINDS.values())
    model_refs, top = models_json_schema([(m, "validation") for m in models], by_alias=True,
                                         ref_template="#/$defs/{model}")
    defs = top.get("$defs", {})
    config_properties: dict[str, Any] = {f"{NAMESPACE}:kind": {"enum": list(KINDS), "description": "Stack kind."}}
    per_kind = []
    for kind, model in KINDS.items():
        schema = defs[model.__name__]
        keys = []
        for key, prop in schema["properties"].items():
            if key == "kind":
                continue
            config_properties.setdefault(f"{NAMESPACE}:{key}", prop)
            keys.append(f"{NAMESPACE}:{key}")
        per_kind.append({
            "if": {"properties": {f"{NAMESPACE}:kind": {"const": kind}}, "required": [f"{NAMESPACE}:kind"]},
            "then": {"propertyNames": {"anyOf": [
                {"enum": [f"{NAMESPACE}:kind", *keys]}, {"not": {"pattern": f"^{NAMESPACE}:"}}]}},
        })
    for model in models:
        defs.pop(model.__name__, None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "mlinfra stack file (Pulumi.<stack>.yaml)",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": config_properties,
                "required": [f"{NAMESPACE}:kind"],
                "allOf": per_kind,
            }
        },
        "$defs": defs,
    }
