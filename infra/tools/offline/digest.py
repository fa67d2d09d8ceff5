"""The offline preview as a `pulumi preview --json` document (PreviewDigest, docs/architecture.md contract)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from pulumi.output import Unknown
from pulumi.runtime.rpc import UNKNOWN as UNKNOWN_VALUE  # how the engine writes a value unknown at preview

from infra.tools.offline.engine import PROVIDER_ID, Preview

OFFLINE_NOTE = (
    "offline preview: inputs are as the program declared them, before provider defaults; "
    "computed outputs are placeholders; cloud-side failures are not seen"
)


def to_digest(preview: Preview) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    stack_step = next((s for s in preview.steps if s.type == "pulumi:pulumi:Stack"), None)
    if stack_step is not None:
        state = _state(stack_step, "")
        state["outputs"] = preview.outputs
        steps.append({"op": "create", "urn": stack_step.urn, "newState": state})
    # Like the engine, default providers are internal: referenced by each step, not reported as steps.
    for step in preview.steps:
        if step is stack_step:
            continue
        provider = preview.providers.get(step.type.split(":")[0]) if step.custom else None
        provider_ref = f"{provider}::{PROVIDER_ID}" if provider else ""
        entry = {"op": step.op, "urn": step.urn, "newState": _state(step, provider_ref)}
        if provider_ref:
            entry["provider"] = provider_ref
        steps.append(entry)
    return {
        "config": dict(preview.config),
        "steps": steps,
        "diagnostics": [
            {"urn": d.urn, "message": d.message, "severity": d.severity, "prefix": f"{d.severity}: "}
            for d in preview.diagnostics
        ],
        "duration": int(preview.duration_s * 1e9),
        "changeSummary": dict(Counter(s["op"] for s in steps)),
        "offline": {"engine": "mlinfra", "note": OFFLINE_NOTE},
    }


def _state(step, provider_ref: str) -> dict[str, Any]:
    state = {
        "urn": step.urn,
        "custom": step.custom,
        "type": step.type,
        "inputs": _wire(step.inputs),
        "parent": step.parent,
        "protect": step.protect,
        "retainOnDelete": step.retain_on_delete,
        # In a stable order: the program registers dependencies as its outputs resolve, which varies by run.
        "dependencies": sorted(step.dependencies),
        "propertyDependencies": {k: sorted(v) for k, v in sorted(step.property_dependencies.items())},
    }
    if provider_ref:
        state["provider"] = provider_ref
    return state


def _wire(value: Any) -> Any:
    """Inputs as JSON holds them: unknowns as the engine's sentinel string, never a Python repr."""
    if isinstance(value, Unknown):
        return UNKNOWN_VALUE
    if isinstance(value, Mapping):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_wire(v) for v in value]
    return value
