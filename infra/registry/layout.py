"""The registry's prefix layout and the IAM documents that grant access to it (pure, no pulumi).

Layout (docs/reference.md "Registry"): datasets/, checkpoints/<run-id>/, models/<name>/<version>/<variant>/,
plus runs/<run-id>/ for completion markers and guard reports. Versions are immutable, so no grant
includes object deletion.
"""

from __future__ import annotations

import re
from typing import Any

ROOTS = {"datasets": "datasets/", "checkpoints": "checkpoints/", "models": "models/", "runs": "runs/"}
MIRRORED_PREFIX = ROOTS["models"]  # what the mirrors on other clouds copy: nothing else of the registry leaves AWS
VERSION_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._=-]{0,62}"  # a model version: one registry segment
RESERVED_VERSIONS = ("aliases",)  # models/<name>/aliases/ holds the alias objects, beside the versions
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=-]*")


def checkpoints_prefix(run_id: str) -> str:
    return _checked(f"checkpoints/{run_id}/")


def runs_prefix(run_id: str) -> str:
    return _checked(f"runs/{run_id}/")


def model_prefix(name: str, version: str | None = None, variant: str | None = None) -> str:
    parts = [p for p in (name, version, variant) if p is not None]
    return _checked("models/" + "".join(f"{p}/" for p in parts))


def prefix_problem(prefix: str) -> str | None:
    """Why `prefix` is not a grantable registry prefix, or None."""
    if not prefix.endswith("/"):
        return "must end with '/'"
    root, *rest = prefix[:-1].split("/")
    if f"{root}/" not in ROOTS.values():
        return f"must start with one of {', '.join(ROOTS.values())}"
    bad = [segment for segment in rest if not _SEGMENT.fullmatch(segment)]
    if bad:
        return f"segment {bad[0]!r} must be letters, digits, '.', '_', '=' or '-' (no wildcards, no '..')"
    return None


def _checked(prefix: str) -> str:
    problem = prefix_problem(prefix)
    if problem:
        raise ValueError(f"registry prefix {prefix!r}: {problem}")
    return prefix


def _kms_statement(key_arn: Any, bucket_arn: Any, actions: list[str]) -> dict[str, Any]:
    # With S3 bucket keys the encryption context is the bucket ARN; pinning it (and the S3 service)
    # keeps the grant from decrypting anything else under the same key.
    return {
        "Sid": "RegistryKey",
        "Effect": "Allow",
        "Action": actions,
        "Resource": key_arn,
        "Condition": {"StringEquals": {"kms:EncryptionContext:aws:s3:arn": bucket_arn}},
    }


READ_ACTIONS = ["s3:GetObject", "s3:GetObjectVersion", "s3:GetObjectTagging"]
WRITE_ACTIONS = [
    "s3:PutObject",
    "s3:GetObject",
    "s3:GetObjectVersion",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
]


def read_policy(bucket_arn: Any, key_arn: Any, prefixes: list[str]) -> dict[str, Any]:
    """Least privilege to list and read object versions under `prefixes`."""
    return _prefix_policy(bucket_arn, key_arn, prefixes, "RegistryRead", READ_ACTIONS, ["kms:Decrypt"])


def write_policy(bucket_arn: Any, key_arn: Any, prefixes: list[str]) -> dict[str, Any]:
    """Least privilege to add new object versions under `prefixes` (and read them back); never delete."""
    # Multipart uploads read back their data keys, so writers need Decrypt too.
    return _prefix_policy(
        bucket_arn, key_arn, prefixes, "RegistryWrite", WRITE_ACTIONS, ["kms:GenerateDataKey", "kms:Decrypt"]
    )


def _prefix_policy(
    bucket_arn: Any, key_arn: Any, prefixes: list[str], sid: str, actions: list[str], kms_actions: list[str]
) -> dict[str, Any]:
    prefixes = [_checked(p) for p in prefixes]
    return {
        "Version": "2012-10-17",
        "Statement": [
            _list_statement(bucket_arn, prefixes),
            {"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": [f"{bucket_arn}/{p}*" for p in prefixes]},
            _kms_statement(key_arn, bucket_arn, kms_actions),
        ],
    }


def _list_statement(bucket_arn: Any, prefixes: list[str]) -> dict[str, Any]:
    return {
        "Sid": "RegistryList",
        "Effect": "Allow",
        "Action": ["s3:ListBucket", "s3:ListBucketVersions"],
        "Resource": bucket_arn,
        "Condition": {"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}},
    }


def tls_only_bucket_policy(bucket_arn: Any) -> dict[str, Any]:
    """Deny every request over plain HTTP or TLS older than 1.2."""
    resources = [bucket_arn, f"{bucket_arn}/*"]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": resources,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
            {
                "Sid": "DenyOldTls",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": resources,
                "Condition": {"NumericLessThan": {"s3:TlsVersion": "1.2"}},
            },
        ],
    }


# FSx for Lustre reaches S3 for data repository associations through one service-linked role per file
# system (AWSServiceRoleForFSxS3Access_fs-...), which needs the bucket's KMS key to import and export
# SSE-KMS objects (FSx for Lustre guide, "Working with server-side encrypted Amazon S3 buckets").
FSX_S3_ROLE_PATH = "aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"


def registry_key_policy(account_id: str, partition: str, region: str) -> dict[str, Any]:
    """Key policy of the registry key: the account administers it through IAM (the default policy),
    and the account's FSx-for-Lustre S3 roles may use it, only through S3 in the registry's region."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AccountAdministersThroughIam",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
                "Action": "kms:*",
                "Resource": "*",
            },
            {
                # The role's name carries the file system id, unknown until a training stack creates
                # it, so the principal is matched by ARN pattern, pinned to this account and to S3.
                "Sid": "FsxLustreDataRepositoriesThroughS3",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"],
                "Resource": "*",
                "Condition": {
                    "ArnLike": {"aws:PrincipalArn": f"arn:{partition}:iam::{account_id}:role/{FSX_S3_ROLE_PATH}"},
                    "StringEquals": {"kms:CallerAccount": account_id, "kms:ViaService": f"s3.{region}.amazonaws.com"},
                },
            },
        ],
    }
