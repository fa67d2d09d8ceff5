"""No bucket IAM grant names allUsers or allAuthenticatedUsers: a bucket is read by named identities only."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcs import BUCKET_IAM_TYPES, PUBLIC_MEMBERS

NAME = "gcs-buckets-not-granted-to-the-public"


def check(resource: Resource) -> list[str]:
    members = resource.get("members")
    members = members if isinstance(members, list) else [resource.get("member")]
    public = [m for m in members if not is_unknown(m) and m in PUBLIC_MEMBERS]
    return [
        f"{resource.get('role')} is granted to {m}; grant it to the service accounts that need it instead"
        for m in public
    ]


RULE = ResourceRule(NAME, "GCS bucket IAM grants name no public members.", "mandatory", BUCKET_IAM_TYPES, check)
