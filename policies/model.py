"""What rules are and what they read: plain resource records, rule records, the stack view (pure).

Rules never see the policy SDK: `policies.adapters` turns the SDK's arguments into `Resource` records
(unwrapping its unknown-checking proxies, so a value the engine cannot know during a preview is the
`UNKNOWN` marker instead of an exception) and rule results into violations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

Enforcement = Literal["mandatory", "advisory"]

# The policy SDK's sentinels for values that cannot be known during a preview (pulumi_policy.proxy).
_UNKNOWN_SENTINELS = frozenset(
    {
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # boolean
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
        "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
        "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
        "e48ece36-62e2-4504-bad9-02848725956a",  # archive
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
    }
)


class _Unknown:
    """A value computed by the cloud that a preview cannot know (an id, an ARN of a new resource)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN = _Unknown()


def is_unknown(value: Any) -> bool:
    return value is UNKNOWN


def plain(value: Any) -> Any:
    """Plain dicts and lists from the SDK's proxies; unknown sentinels become `UNKNOWN`."""
    if isinstance(value, str):
        return UNKNOWN if value in _UNKNOWN_SENTINELS else value
    if isinstance(value, Mapping):
        target = _proxy_target(value)
        return {k: plain(v) for k, v in target.items()}
    if isinstance(value, (list, tuple)) or _is_list_proxy(value):
        target = _proxy_target(value) if _is_list_proxy(value) else value
        return [plain(v) for v in target]
    return value


def _proxy_target(value: Any) -> Any:
    try:
        return value["__target"]  # pulumi_policy.proxy._DictProxy / _ListProxy expose their target so
    except (KeyError, IndexError, TypeError):
        return value


def _is_list_proxy(value: Any) -> bool:
    return type(value).__name__ == "_ListProxy"


@dataclass(frozen=True)
class Resource:
    """One resource as a rule sees it: its type, input properties and the options the engine sends."""

    type: str
    props: Mapping[str, Any]
    urn: str = ""
    name: str = ""
    protect: bool = False
    parent: str = ""
    dependencies: tuple[str, ...] = ()
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))

    def get(self, key: str, default: Any = None) -> Any:
        return self.props.get(key, default)

    @property
    def label(self) -> str:
        """How messages name the resource: its Pulumi name, or its type when it has none."""
        return f"'{self.name}'" if self.name else self.type


@dataclass(frozen=True)
class Finding:
    """A stack rule's violation: the resource it is about ("" for the stack as a whole) and the message."""

    urn: str
    message: str


@dataclass(frozen=True)
class ResourceRule:
    name: str
    description: str
    enforcement: Enforcement
    types: tuple[str, ...]  # resource types the rule reads; the check is not called for others
    check: Callable[[Resource], list[str]]

    def applies_to(self, resource_type: str) -> bool:
        return resource_type in self.types


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    enforcement: Enforcement
    check: Callable[[Stack, Mapping[str, Any]], list[Finding]]
    config_schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # JSON schema per property

    def defaults(self) -> dict[str, Any]:
        return {k: v["default"] for k, v in self.config_schema.items() if "default" in v}


Rule = ResourceRule | StackRule


class Stack:
    """Every resource of a stack, with the links a rule follows (parents and property dependencies).

    Links use the engine's dependency lists, not property values: during a real preview the id of a
    resource that does not exist yet is unknown, but the dependency on it is always known.
    """

    def __init__(self, resources: Iterable[Resource]):
        self.resources = list(resources)
        self._by_urn = {r.urn: r for r in self.resources if r.urn}
        self._by_type: dict[str, list[Resource]] = {}
        self._referring: dict[tuple[str, str], list[Resource]] = {}
        self._derived: dict[str, Any] = {}
        for r in self.resources:
            self._by_type.setdefault(r.type, []).append(r)
            for prop, urns in r.property_dependencies.items():
                for urn in urns:
                    self._referring.setdefault((prop, urn), []).append(r)

    def get(self, urn: str) -> Resource | None:
        return self._by_urn.get(urn)

    def derived(self, key: str, compute: Callable[[Stack], Any]) -> Any:
        """`compute(self)`, computed once per stack (for a fact about the whole stack that rules ask for once per
        resource: asked anew each time, it makes a rule's pass quadratic in the stack's size)."""
        if key not in self._derived:
            self._derived[key] = compute(self)
        return self._derived[key]

    def of_type(self, *types: str) -> list[Resource]:
        if len(types) == 1:
            return list(self._by_type.get(types[0], ()))
        return [r for r in self.resources if r.type in types]

    def linked(self, resource: Resource, prop: str) -> list[Resource]:
        """The resources that `resource`'s property `prop` depends on."""
        return [self._by_urn[u] for u in resource.property_dependencies.get(prop, ()) if u in self._by_urn]

    def referring(self, target: Resource, prop: str, *types: str) -> list[Resource]:
        """Resources of `types` whose property `prop` depends on `target`."""
        return [r for r in self._referring.get((prop, target.urn), ()) if r.type in types]
