"""The registry bucket and its KMS key are protected: `pulumi destroy` must never delete every model."""

from __future__ import annotations

from policies.model import Resource, ResourceRule
from policies.readers.aws import KMS_KEY, S3_BUCKET, role_of

NAME = "registry-bucket-and-key-protected"


def check(resource: Resource) -> list[str]:
    if role_of(resource) != "registry" or resource.protect:
        return []
    what = "bucket" if resource.type == S3_BUCKET else "KMS key"
    return [
        f"registry {what} {resource.label} is not protected; declare it with protect=True and "
        "retain_on_delete=True so neither pulumi destroy nor dropping it from the program deletes it"
    ]


RULE = ResourceRule(
    NAME, "The registry bucket and its KMS key are declared with protect.", "mandatory", (S3_BUCKET, KMS_KEY), check
)
