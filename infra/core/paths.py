"""Config key paths with the syntax of `pulumi config set --path`.

`mlinfra:training.instanceType`, `mlinfra:serving.models[0].name`, `mlinfra:a["dotted.key"].b`.
Values follow the CLI's rule for paths: "true"/"false" become booleans, integers become numbers,
everything else stays a string; top-level entries are always strings.
"""

from __future__ import annotations

import re
from typing import Any

from infra.core.errors import InputError, Problem

Segment = str | int

_NAME = re.compile(r"[^.\[\]\"]+")


def split_key(key: str) -> tuple[str, list[Segment]]:
    """`ns:a.b[0]` -> ("ns:a", ["b", 0]). The first segment keeps its namespace."""
    if ":" not in key:
        raise InputError(Problem(key, "config keys are namespaced, e.g. mlinfra:training.nodeCount"))
    namespace, rest = key.split(":", 1)
    if not namespace:
        raise InputError(Problem(key, "the namespace before ':' is empty, e.g. mlinfra:training.nodeCount"))
    segments = _parse_segments(key, rest)
    if not segments or not isinstance(segments[0], str):
        raise InputError(Problem(key, "a config path must start with a key name"))
    return f"{namespace}:{segments[0]}", segments[1:]


def _parse_segments(key: str, text: str) -> list[Segment]:
    segments: list[Segment] = []
    i = 0
    while i < len(text):
        if text[i] == ".":
            if i == 0 or i == len(text) - 1 or text[i + 1] == ".":
                raise InputError(Problem(key, "empty path segment"))
            i += 1
            continue
        if text.startswith('["', i):
            end = text.find('"]', i + 2)
            if end < 0:
                raise InputError(Problem(key, 'unterminated ["..."] segment'))
            segments.append(text[i + 2 : end])
            i = end + 2
        elif text[i] == "[":
            end = text.find("]", i)
            index = text[i + 1 : end] if end > 0 else ""
            if not index.isdigit():
                raise InputError(Problem(key, f"list index must be a non-negative integer, got [{index}]"))
            segments.append(int(index))
            i = end + 1
        else:
            match = _NAME.match(text, i)
            if not match:
                raise InputError(Problem(key, f"unexpected character {text[i]!r} in path"))
            segments.append(match.group(0))
            i = match.end()
    return segments


def typed_value(raw: str) -> Any:
    """The CLI's typing rule for values set through a path."""
    if raw in ("true", "false"):
        return raw == "true"
    if re.fullmatch(r"-?\d+", raw):
        try:
            return int(raw)
        except ValueError:  # past Python's 4,300 digits: kept as text, which the field's type check then refuses
            return raw
    return raw


def set_path(config: dict[str, Any], key: str, raw: str) -> None:
    """Apply one `-c KEY=VALUE` override in place, creating maps and lists as the CLI does."""
    top, segments = split_key(key)
    if not segments:
        config[top] = raw
        return
    if not isinstance(config.get(top), (dict, list)):
        config[top] = [] if isinstance(segments[0], int) else {}
    container: Any = config[top]
    for here, after in zip(segments, segments[1:] + [None], strict=True):
        if after is None:
            _assign(container, here, typed_value(raw), key)
            return
        child = _get(container, here)
        if not isinstance(child, (dict, list)):
            child = [] if isinstance(after, int) else {}
            _assign(container, here, child, key)
        container = child


def _get(container: Any, segment: Segment) -> Any:
    if isinstance(container, dict):
        return container.get(segment)
    return container[segment] if isinstance(segment, int) and segment < len(container) else None


def _assign(container: Any, segment: Segment, value: Any, key: str) -> None:
    if isinstance(container, dict):
        if isinstance(segment, int):
            raise InputError(Problem(key, f"[{segment}] indexes a list, but this value is a map"))
        container[segment] = value
        return
    if not isinstance(segment, int):
        raise InputError(Problem(key, f"'{segment}' names a map key, but this value is a list"))
    if segment > len(container):
        raise InputError(Problem(key, f"list index {segment} is past the end (length {len(container)})"))
    if segment == len(container):
        container.append(value)
    else:
        container[segment] = value


def parse_override(text: str) -> tuple[str, str]:
    """`-c KEY=VALUE` -> (KEY, VALUE)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise InputError(Problem(text, "expected -c KEY=VALUE, e.g. -c mlinfra:training.nodeCount=8"))
    split_key(key)  # validates the path syntax early
    return key, value
