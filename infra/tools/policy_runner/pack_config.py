"""Policy pack config as the Pulumi CLI builds it: each policy's enforcement level and schema defaults,
the pack's initial config, then the user's `--policy-pack-config` file and `--policy-config` values,
checked against each policy's config schema before anything runs."""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from infra.core.errors import InputError, Problem
from infra.tools.policy_runner.analyzer_client import LEVEL_VALUES, PackInfo

_TYPES = {"number": (int, float), "integer": (int,), "string": (str,), "boolean": (bool,)}


class _NotFinite(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NotFinite(f"{name} is not a number the engine can send; use a finite number")


def _finite(value: Any) -> Any:
    """`value` when every number in it is finite (1e999 parses as infinity; gRPC cannot send it)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise _NotFinite("a number too large to send; use a finite number")
    if isinstance(value, dict):
        for item in value.values():
            _finite(item)
    elif isinstance(value, list):
        for item in value:
            _finite(item)
    return value


MAX_DEPTH = 64  # of arrays and objects: a pack config is a few levels deep


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON `text` (brackets inside strings not counted). Measured
    before parsing: a RecursionError caught inside the parser leaves CPython 3.11's ast module broken for the
    rest of the process."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def loads(text: str) -> Any:
    """JSON as the engine can pass it on: no NaN, Infinity or overflowing numbers; at most MAX_DEPTH levels."""
    if _depth(text) > MAX_DEPTH:
        raise _NotFinite(f"nested more than {MAX_DEPTH} levels deep")
    return _finite(json.loads(text, parse_constant=_reject_constant))


def read_file(path: Path) -> dict[str, Any]:
    """A `pulumi preview --policy-pack-config` file: {policy: level | {enforcementLevel?, property: value}}."""
    label = "--policy-pack-config"
    try:
        document = loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(Problem(label, f"{path} cannot be read ({error.__class__.__name__})")) from None
    except _NotFinite as error:
        raise InputError(Problem(label, f"{path}: {error}")) from None
    except ValueError as error:
        raise InputError(Problem(label, f"{path} is not JSON ({error})")) from None
    if not isinstance(document, dict):
        raise InputError(Problem(label, f"{path} must be a JSON object keyed by policy name"))
    return {k: ({"enforcementLevel": v} if isinstance(v, str) else v) for k, v in document.items()}


def parse_assignments(texts: Iterable[str]) -> dict[str, dict[str, Any]]:
    """`--policy-config POLICY.PROPERTY=VALUE` values (VALUE as JSON when it parses, else a string)."""
    config: dict[str, dict[str, Any]] = {}
    for text in texts:
        key, sep, raw = text.partition("=")
        policy, dot, prop = key.partition(".")
        if not sep or not dot or not policy or not prop:
            raise InputError(
                Problem(
                    f"--policy-config {text}",
                    "expected POLICY.PROPERTY=VALUE, e.g. stack-hourly-cost-under-ceiling.maxHourlyCostUsd=500",
                )
            )
        try:
            value = loads(raw)
        except _NotFinite as error:
            raise InputError(Problem(f"--policy-config {key}", str(error))) from None
        except ValueError:
            value = raw
        config.setdefault(policy, {})[prop] = value
    return config


def resolve(info: PackInfo, *user: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The config to send with Configure: for every policy its level and properties."""
    policies = {p.name: p for p in info.policies}
    config: dict[str, dict[str, Any]] = {}
    for p in info.policies:
        config[p.name] = {
            "enforcementLevel": p.enforcement,
            **{k: v["default"] for k, v in p.config_schema.items() if isinstance(v, dict) and "default" in v},
        }
    for name, values in info.initial_config.items():
        config.setdefault(name, {}).update(values)
    problems: list[Problem] = []
    for layer in user:
        for name, settings in layer.items():
            if name not in policies:
                close = difflib.get_close_matches(name, list(policies), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                problems.append(Problem(f"policy config {name}", f"no such policy in pack {info.name}{hint}"))
                continue
            if not isinstance(settings, Mapping):
                problems.append(Problem(f"policy config {name}", "must be an enforcement level or an object"))
                continue
            for prop, value in settings.items():
                problem = _problem(policies[name].config_schema, prop, value)
                if problem:
                    problems.append(Problem(f"policy config {name}.{prop}", problem))
                else:
                    config[name][prop] = value
    if problems:
        raise InputError(problems)
    return config


def _problem(schema: Mapping[str, Any], prop: str, value: Any) -> str | None:
    if prop == "enforcementLevel":
        allowed = ", ".join(LEVEL_VALUES)
        return None if value in LEVEL_VALUES else f"{value!r} is not an enforcement level; allowed: {allowed}"
    if prop not in schema:
        allowed = ", ".join(["enforcementLevel", *schema])
        return f"unknown property; allowed: {allowed}"
    spec = schema[prop]
    kinds = _TYPES.get(spec.get("type", ""), (object,))
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        return f"must be a {spec.get('type')} (got {value!r})"
    if "exclusiveMinimum" in spec and value <= spec["exclusiveMinimum"]:
        return f"must be more than {spec['exclusiveMinimum']:g} (got {value!r})"
    if "minimum" in spec and value < spec["minimum"]:
        return f"must be at least {spec['minimum']:g} (got {value!r})"
    return None
