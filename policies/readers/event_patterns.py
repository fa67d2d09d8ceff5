"""Does an EventBridge event pattern match an event (pure)? Enough of EventBridge's matching to judge
a run guard's rule: exact values, prefix, suffix, wildcard, anything-but, exists, equals-ignore-case,
numeric, and `$or`. Event fields set to `ANY` (a bucket name the rule cannot know) match every test.
"""

from __future__ import annotations

import json
import operator
import re
from typing import Any

from policies.model import is_unknown


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()
_MISSING = object()
_NUMERIC = {"<": operator.lt, "<=": operator.le, "=": operator.eq, ">=": operator.ge, ">": operator.gt}


def parse(value: Any) -> dict | None:
    """The pattern from an eventPattern input (a JSON string); None when unknown or not an object."""
    if is_unknown(value) or not isinstance(value, str):
        return value if isinstance(value, dict) else None
    try:
        pattern = json.loads(value)
    except ValueError:
        return None
    return pattern if isinstance(pattern, dict) else None


def matches(pattern: dict, event: Any) -> bool:
    for key, test in pattern.items():
        if key == "$or":
            if not any(matches(branch, event) for branch in test if isinstance(branch, dict)):
                return False
            continue
        value = event.get(key, _MISSING) if isinstance(event, dict) else _MISSING
        if isinstance(test, dict):
            if value is ANY:
                continue
            if value is _MISSING or not matches(test, value):
                return False
        elif isinstance(test, list):
            values = value if isinstance(value, list) else [value]
            if not any(_matches_one(t, v) for t in test for v in values):
                return False
        else:
            return False  # not a valid pattern: leaves are arrays
    return True


def _matches_one(test: Any, value: Any) -> bool:
    if isinstance(test, dict) and "exists" in test:
        return (value is not _MISSING) == bool(test["exists"])
    if value is ANY:
        return True
    if not isinstance(test, dict):
        return value is not _MISSING and test == value
    if value is _MISSING:
        return False
    if "prefix" in test:
        return _affix(test["prefix"], value, str.startswith)
    if "suffix" in test:
        return _affix(test["suffix"], value, str.endswith)
    if "wildcard" in test:
        return isinstance(value, str) and _wildcard(str(test["wildcard"])).fullmatch(value) is not None
    if "equals-ignore-case" in test:
        return isinstance(value, str) and value.lower() == str(test["equals-ignore-case"]).lower()
    if "anything-but" in test:
        excluded = test["anything-but"]
        if isinstance(excluded, dict):
            return not _matches_one(excluded, value)
        return value not in (excluded if isinstance(excluded, list) else [excluded])
    if "numeric" in test:
        checks = test["numeric"]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        return all(
            _NUMERIC.get(op, lambda a, b: False)(value, bound)
            for op, bound in zip(checks[::2], checks[1::2], strict=False)
        )
    return False


def _affix(expected: Any, value: Any, test) -> bool:
    if not isinstance(value, str):
        return False
    if isinstance(expected, dict) and "equals-ignore-case" in expected:
        return test(value.lower(), str(expected["equals-ignore-case"]).lower())
    return isinstance(expected, str) and test(value, expected)


def _wildcard(pattern: str) -> re.Pattern:
    """EventBridge wildcards: `*` is any run of characters; nothing else is special."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


def s3_object_created(key: str) -> dict[str, Any]:
    """An S3 "Object Created" event as EventBridge delivers it, for `key` in a bucket the caller cannot name."""
    return {
        "version": "0",
        "id": ANY,
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": ANY,
        "time": ANY,
        "region": ANY,
        "resources": ANY,
        "detail": {
            "version": "0",
            "bucket": {"name": ANY},
            "object": {"key": key, "size": ANY, "etag": ANY, "version-id": ANY, "sequencer": ANY},
            "request-id": ANY,
            "requester": ANY,
            "source-ip-address": ANY,
            "reason": ANY,
        },
    }
