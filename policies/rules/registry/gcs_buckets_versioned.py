"""GCS buckets keep object versions: a model overwritten or deleted by mistake stays recoverable."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp import block, flag
from policies.readers.gcs import GCS_BUCKET

NAME = "gcs-buckets-versioned"


def check(resource: Resource) -> list[str]:
    versioning = block(resource, "versioning")
    if is_unknown(versioning) or is_unknown(versioning.get("enabled")):
        return []
    if flag(versioning.get("enabled")) is True:
        return []
    return [
        "versioning.enabled is not true, so an overwritten or deleted object is gone; set versioning.enabled true "
        "(and expire noncurrent versions with a lifecycle rule)"
    ]


RULE = ResourceRule(NAME, "GCS buckets have object versioning enabled.", "mandatory", (GCS_BUCKET,), check)
