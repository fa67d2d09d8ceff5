"""The registry bucket keeps every version: a checkpoint or model overwritten by mistake stays recoverable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.providers import tokens
from policies.model import Finding, Stack, StackRule, is_unknown
from policies.readers.aws import attached_to_bucket, registry_buckets

NAME = "registry-bucket-versioned"
VERSIONING = tokens.AWS_S3_BUCKET_VERSIONING


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for bucket in registry_buckets(stack):
        versionings = attached_to_bucket(stack, bucket, VERSIONING)
        if not versionings:
            findings.append(
                Finding(
                    bucket.urn,
                    f"registry bucket {bucket.label} has no {VERSIONING}; add one with "
                    "versioningConfiguration.status 'Enabled'",
                )
            )
        for versioning in versionings:
            configuration = versioning.get("versioningConfiguration")
            status = configuration.get("status") if isinstance(configuration, dict) else None
            if status != "Enabled" and not is_unknown(status):
                findings.append(
                    Finding(
                        versioning.urn,
                        (
                            f"versioningConfiguration.status of registry bucket {bucket.label} is {status!r}; "
                            f"set it to "
                            "'Enabled'"
                        ),
                    )
                )
    return findings


RULE = StackRule(NAME, "The registry bucket has versioning enabled.", "mandatory", check)
