"""GCS buckets use uniform bucket-level access (IAM only, no object ACLs) with public access prevention enforced."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp import flag
from policies.readers.gcs import GCS_BUCKET

NAME = "gcs-buckets-not-public"


def check(resource: Resource) -> list[str]:
    found = []
    uniform = resource.get("uniformBucketLevelAccess")
    if not is_unknown(uniform) and flag(uniform) is not True:
        found.append(
            "uniformBucketLevelAccess is not true, so object ACLs can grant access that bucket IAM does not "
            "show; set it true"
        )
    prevention = resource.get("publicAccessPrevention")
    if not is_unknown(prevention) and prevention != "enforced":
        found.append(
            f"publicAccessPrevention is {prevention!r}, so the bucket could be made public; set it to 'enforced'"
        )
    return found


RULE = ResourceRule(
    NAME, "GCS buckets use uniform access with public access prevention enforced.", "mandatory", (GCS_BUCKET,), check
)
