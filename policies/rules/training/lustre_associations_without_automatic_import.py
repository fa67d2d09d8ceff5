"""A data repository association imports its S3 prefix once, on create, never automatically: automatic import
puts S3 event notifications on the registry bucket for the prefix, which overlap between concurrent runs (the
later association turns MISCONFIGURED) and which the registry's own BucketNotification, owning the bucket's
whole notification configuration, removes on its next update."""

from __future__ import annotations

from typing import Any

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import DRA

NAME = "lustre-associations-without-automatic-import"


def check(resource: Resource) -> list[str]:
    s3: Any = resource.get("s3")
    policy = s3.get("autoImportPolicy") if isinstance(s3, dict) else None
    events = policy.get("events") if isinstance(policy, dict) else None
    if is_unknown(events) or not events:
        return []
    return [
        f"s3.autoImportPolicy imports {', '.join(map(str, events))} events automatically, through S3 event "
        "notifications on the shared registry bucket that a concurrent run's overlap and the registry's "
        "BucketNotification removes; remove it and import once with batchImportMetaDataOnCreate: true"
    ]


RULE = ResourceRule(
    NAME,
    "Data repository associations import on create only, never automatically from the shared registry.",
    "mandatory",
    (DRA,),
    check,
)
