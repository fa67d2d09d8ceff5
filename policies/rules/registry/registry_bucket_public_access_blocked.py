"""The registry bucket blocks every form of public access: all four S3 public access block settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.providers import tokens
from policies.model import Finding, Stack, StackRule, is_unknown
from policies.readers.aws import attached_to_bucket, registry_buckets

NAME = "registry-bucket-public-access-blocked"
PUBLIC_ACCESS_BLOCK = tokens.AWS_S3_BUCKET_PUBLIC_ACCESS_BLOCK
SETTINGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for bucket in registry_buckets(stack):
        blocks = attached_to_bucket(stack, bucket, PUBLIC_ACCESS_BLOCK)
        if not blocks:
            findings.append(
                Finding(
                    bucket.urn,
                    (
                        f"registry bucket {bucket.label} has no {PUBLIC_ACCESS_BLOCK}; add one with "
                        f"{', '.join(SETTINGS)} all true"
                    ),
                )
            )
        for block in blocks:
            off = [s for s in SETTINGS if block.get(s) is not True and not is_unknown(block.get(s))]
            if off:
                findings.append(
                    Finding(
                        block.urn,
                        (
                            f"public access block of registry bucket {bucket.label} leaves {', '.join(off)} off; "
                            "set all four settings to true"
                        ),
                    )
                )
    return findings


RULE = StackRule(NAME, "The registry bucket has all four public access blocks on.", "mandatory", check)
