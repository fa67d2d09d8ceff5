"""The registry bucket sends its object events to EventBridge: training run guards stop their runs on
the completion markers (runs/<run-id>/_SUCCESS, _FAILED) only through those events. Advisory: a
registry that no training stack uses may leave them off (`mlinfra:registry.eventBridge`), and every
run still has its schedule at expires-at."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.providers import tokens
from policies.model import Finding, Stack, StackRule, is_unknown
from policies.readers.aws import attached_to_bucket, registry_buckets

NAME = "registry-bucket-sends-events-to-eventbridge"
NOTIFICATION = tokens.AWS_S3_BUCKET_NOTIFICATION


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for bucket in registry_buckets(stack):
        notifications = attached_to_bucket(stack, bucket, NOTIFICATION)
        flags = [n.get("eventbridge") for n in notifications]
        if any(f is True or f == "true" or is_unknown(f) for f in flags):
            continue
        findings.append(
            Finding(
                notifications[0].urn if notifications else bucket.urn,
                (
                    f"registry bucket {bucket.label} does not send object events to EventBridge, so run guards "
                    f"never see "
                    f"completion markers and runs stop only at expires-at; add an {NOTIFICATION} with eventbridge true "
                    "(mlinfra:registry.eventBridge)"
                ),
            )
        )
    return findings


RULE = StackRule(NAME, "The registry bucket sends object events to EventBridge for the run guards.", "advisory", check)
