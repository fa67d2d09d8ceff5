"""GCS buckets encrypt with a customer-managed Cloud KMS key (rotated, revocable), not Google's default key."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp import block
from policies.readers.gcs import GCS_BUCKET

NAME = "gcs-buckets-encrypted-with-cmek"


def check(resource: Resource) -> list[str]:
    encryption = block(resource, "encryption")
    if is_unknown(encryption):
        return []
    key = encryption.get("defaultKmsKeyName")
    if is_unknown(key) or (isinstance(key, str) and key):
        return []
    return [
        "encryption.defaultKmsKeyName is not set, so objects are encrypted with a Google-managed key; set it to a "
        "Cloud KMS crypto key in the bucket's location (with a rotation period) and let the Cloud Storage service "
        "agent use it"
    ]


RULE = ResourceRule(
    NAME, "GCS buckets encrypt with a customer-managed Cloud KMS key.", "mandatory", (GCS_BUCKET,), check
)
