"""A training run has a hard end: its `mlinfra:expires-at` is ISO-8601 UTC, in the future and within
the maximum lifetime (pack config `maxLifetimeHours`), so the run guard can stop the spend."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from infra.core.tags import EXPIRES_AT
from infra.training.spec import MAX_TTL_HOURS
from policies.model import Finding, Stack, StackRule
from policies.readers.aws import role_of, tags

NAME = "training-expiry-within-max-lifetime"
_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def expiry_problem(value: Any, now: datetime, max_hours: float) -> str | None:
    try:
        expires = datetime.strptime(str(value), _FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return f"{EXPIRES_AT} {value!r} is not ISO-8601 UTC (YYYY-MM-DDTHH:MM:SSZ); set lifecycle.expiresAt"
    hours = (expires - now).total_seconds() / 3600
    if hours <= 0:
        return f"{EXPIRES_AT} {value} has passed; a new run needs a new expiry (lifecycle.expiresAt or ttlHours)"
    if hours > max_hours:
        return (
            f"{EXPIRES_AT} {value} is {hours:.0f} hours away, beyond the maximum lifetime of {max_hours:g} "
            "hours; shorten lifecycle.ttlHours, or checkpoint and start a new run"
        )
    return None


def check(stack: Stack, config: Mapping[str, Any], now: datetime | None = None) -> list[Finding]:
    now = now or datetime.now(UTC)
    max_hours = float(config.get("maxLifetimeHours", MAX_TTL_HOURS))
    first: dict[str, str] = {}
    for resource in stack.resources:
        value = tags(resource).get(EXPIRES_AT)
        if role_of(resource) == "training" and isinstance(value, str):
            first.setdefault(value, resource.urn)
    findings = []
    for value, urn in first.items():
        problem = expiry_problem(value, now, max_hours)
        if problem:
            findings.append(Finding(urn, problem))
    return findings


RULE = StackRule(
    NAME,
    "Training runs expire in the future, within the maximum lifetime.",
    "mandatory",
    check,
    config_schema={
        "maxLifetimeHours": {
            "type": "number",
            "exclusiveMinimum": 0,
            "default": MAX_TTL_HOURS,
            "description": "Longest a training run may live, hours (expires-at minus now).",
        }
    },
)
