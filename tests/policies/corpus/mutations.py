"""How corpus entries change a demo stack's preview: each entry is one small mutation of the resources the
offline preview declares (a property set or removed, a statement added to a policy document, a resource
dropped or copied), applied to the `PolicyResource` records the pack is sent through the analyzer protocol."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infra.tools.preview_json import PolicyResource

Resources = list[PolicyResource]
Mutation = Callable[[Resources], Resources]
DELETE = object()


@dataclass(frozen=True)
class Entry:
    """One crafted misconfiguration: the demo stack it mutates, the rule that must catch it, and how."""

    id: str
    stack: str
    rule: str
    mutate: Mutation
    why: str


def _pick(resources: Resources, type_: str, name: str) -> int:
    found = [i for i, r in enumerate(resources) if r.type == type_ and (r.name == name or r.name.endswith(name))]
    if len(found) != 1:
        names = sorted(r.name for r in resources if r.type == type_)
        raise LookupError(f"{len(found)} {type_} named *{name} (there are: {', '.join(names)})")
    return found[0]


def _walk(props: dict, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node: Any = props
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    if isinstance(node, list):
        index = int(last)
        if value is DELETE:
            del node[index]
        elif callable(value):
            node[index] = value(node[index])
        else:
            node[index] = value
    elif value is DELETE:
        node.pop(last, None)
    elif callable(value):
        node[last] = value(node.get(last))
    else:
        node[last] = value


def set_(type_: str, name: str, path: str, value: Any) -> Mutation:
    """Set (or DELETE, or transform with a function of the old value) one property of one resource."""

    def mutate(resources: Resources) -> Resources:
        i = _pick(resources, type_, name)
        props = copy.deepcopy(resources[i].props)
        _walk(props, path, value)
        changed = dataclasses.replace(resources[i], props=props)
        if value is DELETE and "." not in path:  # a removed input no longer links what it named
            links = {k: v for k, v in changed.property_dependencies.items() if k != path}
            kept = {u for v in links.values() for u in v}
            changed = dataclasses.replace(
                changed, property_dependencies=links, dependencies=tuple(u for u in changed.dependencies if u in kept)
            )
        return [*resources[:i], changed, *resources[i + 1 :]]

    return mutate


def option(type_: str, name: str, **changes: Any) -> Mutation:
    """Change a resource option (protect, retain_on_delete) the engine sends."""

    def mutate(resources: Resources) -> Resources:
        i = _pick(resources, type_, name)
        return [*resources[:i], dataclasses.replace(resources[i], **changes), *resources[i + 1 :]]

    return mutate


def drop(type_: str, name: str) -> Mutation:
    def mutate(resources: Resources) -> Resources:
        i = _pick(resources, type_, name)
        return [*resources[:i], *resources[i + 1 :]]

    return mutate


def copy_as(type_: str, name: str, new_name: str, path: str = "", value: Any = None) -> Mutation:
    """Add a copy of one resource under a new name (and URN), with one property changed."""

    def mutate(resources: Resources) -> Resources:
        original = resources[_pick(resources, type_, name)]
        props = copy.deepcopy(original.props)
        if path:
            _walk(props, path, value)
        urn = original.urn.rsplit("::", 1)[0] + "::" + new_name
        return [*resources, dataclasses.replace(original, urn=urn, name=new_name, props=props)]

    return mutate


def relink(type_: str, name: str, prop: str, target_type: str, target_name: str) -> Mutation:
    """Point one input of a resource at another resource of the stack (its dependency, as the engine records it)."""

    def mutate(resources: Resources) -> Resources:
        i = _pick(resources, type_, name)
        target = resources[_pick(resources, target_type, target_name)]
        links = {**resources[i].property_dependencies, prop: (target.urn,)}
        kept = tuple(dict.fromkeys(u for v in links.values() for u in v))
        changed = dataclasses.replace(resources[i], property_dependencies=links, dependencies=kept)
        return [*resources[:i], changed, *resources[i + 1 :]]

    return mutate


def add(resource: Callable[[Resources], PolicyResource]) -> Mutation:
    """Add a resource built from the stack's own (to link it to them)."""

    def mutate(resources: Resources) -> Resources:
        return [*resources, resource(resources)]

    return mutate


def both(*mutations: Mutation) -> Mutation:
    def mutate(resources: Resources) -> Resources:
        for m in mutations:
            resources = m(resources)
        return resources

    return mutate


def with_statement(statement: dict) -> Callable[[Any], str]:
    """A policy document (JSON string) with one more statement."""

    def change(document: Any) -> str:
        parsed = json.loads(document) if isinstance(document, str) else copy.deepcopy(document)
        parsed["Statement"] = [*parsed.get("Statement", []), statement]
        return json.dumps(parsed)

    return change


def in_document(change: Callable[[dict], None]) -> Callable[[Any], str]:
    """A policy document (JSON string) changed in place by `change`."""

    def apply(document: Any) -> str:
        parsed = json.loads(document) if isinstance(document, str) else copy.deepcopy(document)
        change(parsed)
        return json.dumps(parsed)

    return apply


def find(resources: Resources, type_: str, name: str) -> PolicyResource:
    return resources[_pick(resources, type_, name)]
