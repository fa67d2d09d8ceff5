"""Provider input schemas, derived from the installed provider SDKs (pulumi_aws, pulumi_kubernetes, ...).

Each SDK resource has an input type (`<Resource>Args`, or `<Resource>InitArgs` where that name is
taken) whose properties carry the provider's wire names and nested input types. Walking those gives
the same property tree as the provider schema, so a key the provider would reject is found offline.
"""

from __future__ import annotations

import collections.abc
import difflib
import functools
import importlib
import sys
import typing
from dataclasses import dataclass
from typing import Any, Union

from pulumi import Output, _types
from pulumi.runtime import rpc

# Shapes: ("scalar",), ("list", shape), ("map", shape), ("object", input_type_class)
Shape = tuple


@dataclass(frozen=True)
class UnknownProperty:
    path: str
    suggestion: str | None

    def message(self) -> str:
        hint = f" (did you mean '{self.suggestion}'?)" if self.suggestion else ""
        return f"unknown input property '{self.path}'{hint}"


@functools.cache
def resource_input_class(token: str) -> type | None:
    """The SDK input type of resource type `token`, e.g. `aws:s3/bucket:Bucket`; None if unknown."""
    package, _, rest = token.partition(":")
    module_name = rest.rsplit(":", 1)[0]
    _import_package(package)
    for module in rpc._RESOURCE_MODULES.get(rpc._module_key(package, module_name), []):
        class_name = module.mod_info["classes"].get(token)  # type: ignore[attr-defined]
        if class_name:
            cls = getattr(importlib.import_module(module.mod_info["fqn"]), class_name)  # type: ignore[attr-defined]
            defining = sys.modules[cls.__module__]
            for candidate in (f"{class_name}InitArgs", f"{class_name}Args"):
                args_cls = getattr(defining, candidate, None)
                if args_cls is not None and args_cls.__module__ == cls.__module__ and _types.is_input_type(args_cls):
                    return args_cls
    return None


_PACKAGES = {"aws": "pulumi_aws", "kubernetes": "pulumi_kubernetes", "gcp": "pulumi_gcp"}


def _import_package(package: str) -> None:
    if package in _PACKAGES:
        importlib.import_module(_PACKAGES[package])


def is_known_package(token: str) -> bool:
    return token.partition(":")[0] in _PACKAGES


def is_custom_resource(token: str) -> bool:
    """A Kubernetes custom resource (`kubernetes:<group>/<version>:<Kind>` of a CRD): an API group and
    version the provider SDK does not have at all. A misspelt kind of a built-in group is not one."""
    package, _, rest = token.partition(":")
    if package != "kubernetes" or ":" not in rest:
        return False
    _import_package(package)
    return not rpc._RESOURCE_MODULES.get(rpc._module_key(package, rest.rsplit(":", 1)[0]))


@functools.cache
def object_properties(input_cls: type) -> dict[str, Shape]:
    return {name: shape_of(tp) for name, tp in _types.input_type_types(input_cls).items()}


def shape_of(tp: Any) -> Shape:
    tp = _unwrap(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (list, collections.abc.Sequence, typing.Sequence) and args:
        return ("list", shape_of(args[0]))
    if origin in (dict, collections.abc.Mapping, typing.Mapping) and len(args) == 2:
        return ("map", shape_of(args[1]))
    if isinstance(tp, type) and _types.is_input_type(tp):
        return ("object", tp)
    return ("scalar",)


def _unwrap(tp: Any) -> Any:
    """Strip Optional, Input (Awaitable/Output) and the TypedDict twins the SDK adds to unions."""
    while typing.get_origin(tp) is Union:
        members = [
            a
            for a in typing.get_args(tp)
            if a is not type(None)
            and typing.get_origin(a) not in (collections.abc.Awaitable, typing.Awaitable, Output)
            and a is not dict
            and not typing.is_typeddict(a)
        ]
        typed = [a for a in members if isinstance(a, type) and _types.is_input_type(a)]
        tp = typed[0] if typed else (members[0] if members else Any)
    if typing.get_origin(tp) is Output:
        return _unwrap(typing.get_args(tp)[0])
    return tp


def unknown_properties(token: str, inputs: dict[str, Any]) -> list[UnknownProperty]:
    """Every input property (nested ones included) that the provider schema of `token` does not have."""
    input_cls = resource_input_class(token)
    if input_cls is None:
        return []
    found: list[UnknownProperty] = []
    _walk(inputs, ("object", input_cls), "", found)
    return found


def has_input(token: str, name: str) -> bool:
    input_cls = resource_input_class(token)
    return input_cls is not None and name in object_properties(input_cls)


def _walk(value: Any, shape: Shape, path: str, found: list[UnknownProperty]) -> None:
    kind = shape[0]
    if kind == "object" and isinstance(value, dict):
        properties = object_properties(shape[1])
        for key, item in value.items():
            here = f"{path}.{key}" if path else key
            if key not in properties:
                close = difflib.get_close_matches(key, list(properties), n=1)
                found.append(UnknownProperty(here, close[0] if close else None))
            else:
                _walk(item, properties[key], here, found)
    elif kind == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, shape[1], f"{path}[{i}]", found)
    elif kind == "map" and isinstance(value, dict):
        for key, item in value.items():
            _walk(item, shape[1], f'{path}["{key}"]', found)
