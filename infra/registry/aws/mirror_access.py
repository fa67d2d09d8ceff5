"""The AWS side of the registry's mirror on GCP: who may read models/ from S3 (pure IAM documents)."""

from __future__ import annotations

from typing import Any


def sts_role_trust_policy(subject_ids: list[str]) -> dict[str, Any]:
    """Trust of the AWS role Storage Transfer Service assumes: only the given Google service accounts (by their
    numeric subject id, from googleServiceAccounts.get), through accounts.google.com web identity federation
    (cloud.google.com/storage-transfer/docs/source-amazon-s3, 'federated identity')."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "StorageTransferServiceOnly",
                "Effect": "Allow",
                "Principal": {"Federated": "accounts.google.com"},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {"StringEquals": {"accounts.google.com:sub": sorted(subject_ids)}},
            }
        ],
    }
