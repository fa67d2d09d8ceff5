"""A GCP training node has a hard end Compute Engine enforces: scheduling.terminationTime no later than the
run's expiry (its mlinfra-expires-at label), or a maxRunDuration that ends by then, with
instanceTerminationAction DELETE, so the node is deleted even when nothing else runs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp import block
from policies.readers.gcp_training import EXPIRES_AT_LABEL, INSTANCE, is_training, label_expiry

NAME = "gcp-training-nodes-end-by-expiry"


def _time(value: Any) -> datetime | None:
    text = str(value).replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def check(resource: Resource, now: datetime | None = None) -> list[str]:
    if not is_training(resource):
        return []
    scheduling = block(resource, "scheduling")
    if is_unknown(scheduling):
        return []
    expiry = label_expiry(resource)
    fix = (
        f"set scheduling.terminationTime to the run's expiry ({expiry or f'its {EXPIRES_AT_LABEL} label'}) and "
        "instanceTerminationAction DELETE"
    )
    end, duration = scheduling.get("terminationTime"), block(resource, "scheduling", "maxRunDuration")
    if is_unknown(end) or is_unknown(duration):
        return []
    if not end and not (isinstance(duration, dict) and duration.get("seconds")):
        return [f"the node has no hard end (scheduling.terminationTime or maxRunDuration); {fix}"]
    findings = []
    if scheduling.get("instanceTerminationAction") != "DELETE":
        findings.append(
            f"scheduling.instanceTerminationAction is {scheduling.get('instanceTerminationAction')!r}, so at "
            f"its end the node is only stopped and keeps its disks; {fix}"
        )
    limit = _time(expiry) if expiry else None
    if expiry and limit is None:
        findings.append(f"its {EXPIRES_AT_LABEL} label {expiry!r} is not a time, so no end can be checked; {fix}")
    elif limit is not None:
        if end:
            at = _time(end)
            if at is None or at > limit:
                findings.append(f"scheduling.terminationTime {end} is after the run's expiry {expiry}; {fix}")
        else:
            seconds = float(duration.get("seconds") or 0)
            left = (limit - (now or datetime.now(UTC))).total_seconds()
            if seconds > left + 60:
                findings.append(
                    f"scheduling.maxRunDuration of {seconds:.0f} s ends after the run's expiry {expiry} "
                    f"({max(left, 0):.0f} s from now); {fix}"
                )
    return findings


RULE = ResourceRule(
    NAME,
    "GCP training nodes are deleted by Compute Engine no later than the run's expiry.",
    "mandatory",
    (INSTANCE,),
    check,
)
