"""Log groups expire their events: without retention they are kept, and billed, forever."""

from __future__ import annotations

from infra.providers import tokens
from policies.model import Resource, ResourceRule, is_unknown

NAME = "log-groups-have-retention"
LOG_GROUP = tokens.AWS_CLOUDWATCH_LOG_GROUP


def check(resource: Resource) -> list[str]:
    days = resource.get("retentionInDays")
    if is_unknown(days) or (isinstance(days, (int, float)) and not isinstance(days, bool) and days > 0):
        return []
    return ["retentionInDays is not set, so events are kept (and billed) forever; set retentionInDays, e.g. 30"]


RULE = ResourceRule(NAME, "CloudWatch log groups set retentionInDays.", "mandatory", (LOG_GROUP,), check)
