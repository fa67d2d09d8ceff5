"""Any `pulumi preview --json` document (ours, or the real CLI's) as the resources a policy pack sees.

A step's new state carries the resource's inputs (`newState.inputs`; documents that only have
`newState.outputs` are read from those). Steps without a new state (deletes) are not analyzed; a URN
that appears in several steps (a replacement) is analyzed once, with its last new state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.core.errors import InputError, Problem
from infra.core.shapes import dict_at
from policies.model import Resource, Stack

_LABEL = "--preview-json"


@dataclass(frozen=True)
class PolicyResource:
    urn: str
    type: str
    name: str
    custom: bool
    props: dict[str, Any]
    parent: str = ""
    protect: bool = False
    retain_on_delete: bool = False
    dependencies: tuple[str, ...] = ()
    property_dependencies: dict[str, tuple[str, ...]] = field(default_factory=dict)
    provider: str = ""  # "<provider urn>::<provider id>", as steps reference it
    op: str = "create"


@dataclass(frozen=True)
class PreviewDocument:
    project: str
    stack: str
    config: dict[str, Any]
    resources: list[PolicyResource]
    providers: dict[str, PolicyResource]  # provider urn -> provider resource, when the document has them


def load(path: Path) -> PreviewDocument:
    """Read a preview document from a file; any problem is an InputError naming the flag."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(
            Problem(
                _LABEL,
                f"{path} cannot be read ({error.__class__.__name__}); give a file written "
                "by `pulumi preview --json` or `python -m infra preview --json`",
            )
        ) from None
    try:
        document = json.loads(text)
    except ValueError as error:
        raise InputError(
            Problem(_LABEL, f"{path} is not JSON ({error}); give the output of `pulumi preview --json`")
        ) from None
    return parse(document, str(path))


def parse(document: Any, where: str = "document") -> PreviewDocument:
    if not isinstance(document, dict) or not isinstance(document.get("steps"), list):
        raise InputError(
            Problem(
                _LABEL,
                f"{where} is not a `pulumi preview --json` document; expected one JSON object with a `steps` list",
            )
        )
    latest: dict[str, PolicyResource] = {}
    for i, step in enumerate(document["steps"]):
        resource = _resource(step, f"{where}: steps[{i}]")
        if resource is not None:
            latest[resource.urn] = resource
    resources = list(latest.values())
    providers = {r.urn: r for r in resources if r.type.startswith("pulumi:providers:")}
    project, stack = _project_and_stack(resources)
    config = dict_at(document, "config")
    return PreviewDocument(project, stack, config, resources, providers)


def _resource(step: Any, where: str) -> PolicyResource | None:
    if not isinstance(step, dict):
        raise InputError(Problem(_LABEL, f"{where} is not an object; each step has `op`, `urn` and `newState`"))
    state = step.get("newState")
    if state is None:
        return None
    urn = state.get("urn") or step.get("urn") if isinstance(state, dict) else None
    if (
        not isinstance(state, dict)
        or not isinstance(urn, str)
        or not urn.startswith("urn:pulumi:")
        or not isinstance(state.get("type"), str)
    ):
        raise InputError(Problem(_LABEL, f"{where}.newState needs a `type` and a `urn:pulumi:` URN"))
    _check_types(state, step, where)
    props = state.get("inputs")
    if not isinstance(props, dict):
        props = dict_at(state, "outputs")
    property_dependencies = state.get("propertyDependencies") or {}
    return PolicyResource(
        urn=urn,
        type=state["type"],
        name=urn.rsplit("::", 1)[-1],
        custom=bool(state.get("custom", True)),
        props=props,
        parent=state.get("parent") or "",
        protect=bool(state.get("protect")),
        retain_on_delete=bool(state.get("retainOnDelete")),
        dependencies=tuple(state.get("dependencies") or ()),
        property_dependencies={k: tuple(v or ()) for k, v in property_dependencies.items()},
        provider=state.get("provider") or step.get("provider") or "",
        op=str(step.get("op", "")),
    )


def _is_urn_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(u, str) for u in value)


# What each field of a step's state is in Pulumi's engine events (apitype.ResourceV3 / StepEventStateMetadata).
_FIELD_TYPES: dict[str, tuple[str, Any]] = {
    "inputs": ("an object", lambda v: isinstance(v, dict)),
    "outputs": ("an object", lambda v: isinstance(v, dict)),
    "custom": ("true or false", lambda v: isinstance(v, bool)),
    "protect": ("true or false", lambda v: isinstance(v, bool)),
    "retainOnDelete": ("true or false", lambda v: isinstance(v, bool)),
    "parent": ("a URN string", lambda v: isinstance(v, str)),
    "provider": ("a provider reference string", lambda v: isinstance(v, str)),
    "dependencies": ("a list of URN strings", _is_urn_list),
    "propertyDependencies": (
        "an object of property name to a list of URN strings",
        lambda v: isinstance(v, dict) and all(_is_urn_list(u) for u in v.values()),
    ),
}


def _check_types(state: dict[str, Any], step: dict[str, Any], where: str) -> None:
    """A field present with the wrong type is refused by name, not read as empty (or as a string's characters).
    `where`: the step's place in the document."""
    for key, (expected, ok) in _FIELD_TYPES.items():
        value = state.get(key)
        if value is not None and not ok(value):
            raise InputError(Problem(_LABEL, f"{where}.newState.{key} must be {expected} (got {type(value).__name__})"))
    for key in ("op", "provider"):
        if step.get(key) is not None and not isinstance(step[key], str):
            raise InputError(Problem(_LABEL, f"{where}.{key} must be a string"))


def _project_and_stack(resources: list[PolicyResource]) -> tuple[str, str]:
    # urn:pulumi:<stack>::<project>::<type>::<name>
    for resource in resources:
        parts = resource.urn[len("urn:pulumi:") :].split("::")
        if len(parts) >= 2:
            return parts[1], parts[0]
    return "", ""


def as_stack(document: PreviewDocument) -> Stack:
    """The document's resources as the policy pack's readers take them (policies/readers/)."""
    return Stack(
        Resource(
            type=r.type,
            props=r.props,
            urn=r.urn,
            name=r.name,
            protect=r.protect,
            dependencies=r.dependencies,
            property_dependencies=r.property_dependencies,
        )
        for r in document.resources
    )
