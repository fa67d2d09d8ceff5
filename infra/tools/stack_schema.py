"""JSON schema of a stack file (`stacks/Pulumi.<stack>.yaml`) for editors and the YAML language server."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from infra.core.namespace import NAMESPACE
from infra.kinds import CLOUDS, KINDS, STACK_KINDS


def stack_file_schema() -> dict[str, Any]:
    variants = [(row.kind, row.cloud, row.model) for row in STACK_KINDS]
    models = [model for _, _, model in variants]
    model_refs, top = models_json_schema(
        [(m, "validation") for m in models], by_alias=True, ref_template="#/$defs/{model}"
    )
    defs = top.get("$defs", {})
    config_properties: dict[str, Any] = {
        f"{NAMESPACE}:kind": {"enum": list(KINDS), "description": "Stack kind."},
        f"{NAMESPACE}:cloud": {"enum": list(CLOUDS), "description": "Cloud of the stack (default aws)."},
    }
    per_kind = []
    for kind, cloud, model in variants:
        schema = defs[model.__name__]
        keys, exact = [], {}
        for key, prop in schema["properties"].items():
            if key in ("kind", "cloud"):
                continue
            name = f"{NAMESPACE}:{key}"
            known = config_properties.get(name)
            if known is None:
                config_properties[name] = prop
            elif known != prop and prop not in known.get("anyOf", [known]):
                # Same key, another shape on another cloud: either at the top, the exact one per (kind, cloud).
                config_properties[name] = {"anyOf": [*known.get("anyOf", [known]), prop]}
            exact[name] = prop
            keys.append(name)
        cloud_is = {"const": cloud} if cloud != "aws" else {"enum": ["aws"]}
        condition: dict[str, Any] = {
            "properties": {f"{NAMESPACE}:kind": {"const": kind}},
            "required": [f"{NAMESPACE}:kind"],
        }
        if cloud != "aws":
            condition["properties"][f"{NAMESPACE}:cloud"] = cloud_is
            condition["required"] = [f"{NAMESPACE}:kind", f"{NAMESPACE}:cloud"]
        else:
            condition["properties"][f"{NAMESPACE}:cloud"] = cloud_is  # absent counts as aws
        per_kind.append(
            {
                "if": condition,
                "then": {
                    "properties": exact,
                    "propertyNames": {
                        "anyOf": [
                            {"enum": [f"{NAMESPACE}:kind", f"{NAMESPACE}:cloud", *keys]},
                            {"not": {"pattern": f"^{NAMESPACE}:"}},
                        ]
                    },
                },
            }
        )
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
