"""Reading a preview's resources for pricing: numbers, links between resources, owning components."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from infra.tools.preview_json import PolicyResource, PreviewDocument

STACK_TYPE = "pulumi:pulumi:Stack"


class Resources:
    """The priced view of a preview document: every resource by URN, with its links."""

    def __init__(self, document: PreviewDocument):
        self.all = [r for r in document.resources if r.type != STACK_TYPE]
        self.by_urn = {r.urn: r for r in document.resources}

    def declared(self) -> list[PolicyResource]:
        """Resources the stack creates or updates (reads of other stacks' outputs are not billed here)."""
        return [r for r in self.all if r.op != "read"]

    def linked(self, resource: PolicyResource, type_: str, keys: Iterable[str] = ()) -> list[PolicyResource]:
        """Resources of `type_` that `resource` depends on: through the named properties when given and
        known, else through any dependency (the engine's lists are always known, ids often are not)."""
        urns: list[str] = []
        for key in keys:
            urns.extend(resource.property_dependencies.get(key, ()))
        if not urns:
            urns = list(resource.dependencies) + [u for us in resource.property_dependencies.values() for u in us]
        found = [self.by_urn[u] for u in dict.fromkeys(urns) if u in self.by_urn]
        return [r for r in found if r.type == type_]

    def dependents(self, resource: PolicyResource, *types: str) -> list[PolicyResource]:
        """Resources of `types` that depend on `resource`."""
        return [
            r
            for r in self.declared()
            if r.type in types
            and (resource.urn in r.dependencies or any(resource.urn in us for us in r.property_dependencies.values()))
        ]

    def component(self, resource: PolicyResource) -> str:
        """'<Noun> <name>' of the top-level component declaring `resource`, '' at the stack's top level."""
        top = self.top_component(resource)
        return f"{top.type.rsplit(':', 1)[-1]} {top.name}" if top else ""

    def top_component(self, resource: PolicyResource) -> PolicyResource | None:
        """The component just under the stack that `resource` belongs to (itself if it is one), or None."""
        current, seen = resource, set()
        while current is not None and current.urn not in seen:
            seen.add(current.urn)
            parent = self.by_urn.get(current.parent) if current.parent else None
            if parent is None or parent.type == STACK_TYPE:
                return None if current.custom else current
            current = parent
        return None


def number(value: Any) -> float | None:
    """A JSON number or a numeric string (the engine serialises some numbers as strings); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def whole(value: Any) -> int | None:
    n = number(value)
    return int(n) if n is not None and n == int(n) and n >= 0 else None
