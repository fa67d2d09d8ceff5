"""The registry bucket encrypts with its own KMS key (SSE-KMS) and S3 bucket keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.providers import tokens
from policies.model import Finding, Stack, StackRule, is_unknown
from policies.readers.aws import as_list, attached_to_bucket, registry_buckets

NAME = "registry-bucket-encrypted-with-kms"
ENCRYPTION = tokens.AWS_S3_BUCKET_SERVER_SIDE_ENCRYPTION_CONFIGURATION
KMS_ALGORITHMS = ("aws:kms", "aws:kms:dsse")


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for bucket in registry_buckets(stack):
        configurations = attached_to_bucket(stack, bucket, ENCRYPTION)
        if not configurations:
            findings.append(
                Finding(
                    bucket.urn,
                    (
                        f"registry bucket {bucket.label} has no {ENCRYPTION}; add one with sseAlgorithm 'aws:kms', "
                        "the registry key as kmsMasterKeyId and bucketKeyEnabled true"
                    ),
                )
            )
        for configuration in configurations:
            for i, rule in enumerate(r for r in as_list(configuration.get("rules")) if isinstance(r, dict)):
                default = rule.get("applyServerSideEncryptionByDefault")
                default = default if isinstance(default, dict) else {}
                algorithm = default.get("sseAlgorithm")
                where = f"rules[{i}]"
                if algorithm not in KMS_ALGORITHMS and not is_unknown(algorithm):
                    findings.append(
                        Finding(
                            configuration.urn,
                            (
                                f"{where} sseAlgorithm is {algorithm!r}; set 'aws:kms' with the registry key "
                                f"as kmsMasterKeyId"
                            ),
                        )
                    )
                elif default.get("kmsMasterKeyId") is None:
                    findings.append(
                        Finding(
                            configuration.urn,
                            (
                                f"{where} has no kmsMasterKeyId, so S3 uses the AWS managed key; set the "
                                f"registry's own key"
                            ),
                        )
                    )
                if rule.get("bucketKeyEnabled") is not True and not is_unknown(rule.get("bucketKeyEnabled")):
                    findings.append(
                        Finding(
                            configuration.urn,
                            (f"{where} bucketKeyEnabled is not true; enable S3 bucket keys (far fewer KMS requests)"),
                        )
                    )
    return findings


RULE = StackRule(NAME, "The registry bucket uses SSE-KMS with its own key and bucket keys.", "mandatory", check)
