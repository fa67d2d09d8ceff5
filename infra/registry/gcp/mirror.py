"""The registry's mirror on GCP, as pure decisions: what Storage Transfer Service copies (models/ only, never
deleting), when, under which names, and the AWS role trust that lets its Google identity read S3."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from infra.registry import layout as registry_layout

MIRRORED_PREFIX = registry_layout.ROOTS["models"]  # "models/": nothing else of the registry leaves AWS
READER_ROLE = "roles/storage.objectViewer"          # get and list objects; no writes, no bucket settings
# What the Storage Transfer Service agent needs on a sink bucket: storage.buckets.get, objects.list,
# objects.create and objects.delete (to replace an object that differs), and no more
# (cloud.google.com/storage-transfer/docs/sink-cloud-storage).
TRANSFER_WRITER_ROLE = "roles/storage.legacyBucketWriter"
KEY_USER_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"  # the GCS service agent, for the bucket's CMEK
OVERWRITE_WHEN = "DIFFERENT"  # versions are immutable; aliases move, and a moved alias must follow


@dataclass(frozen=True)
class Schedule:
    start: dt.date
    hour: int
    minute: int
    interval_hours: int

    @property
    def repeat_interval(self) -> str:
        return f"{self.interval_hours * 3600}s"


def schedule(start_date: str, start_time_utc: str, interval_hours: int) -> Schedule:
    hour, minute = (int(part) for part in start_time_utc.split(":"))
    return Schedule(dt.date.fromisoformat(start_date), hour, minute, interval_hours)


def rotation_period(days: int) -> str:
    return f"{days * 86400}s"


def reader_member(email: str) -> str:
    return f"serviceAccount:{email}"


def names(stack: str) -> dict[str, str]:
    """Cloud-side names: key ring and key (never reusable after deletion in Cloud KMS, so stack-scoped)."""
    from infra.core.naming import slug

    return {"key_ring": f"mlinfra-{slug(stack, 50)}", "key": "models-mirror"}


def sts_role_trust_policy(subject_ids: list[str]) -> dict[str, Any]:
    """Trust of the AWS role Storage Transfer Service assumes: only the given Google service accounts (by their
    numeric subject id, from googleServiceAccounts.get), through accounts.google.com web identity federation
    (cloud.google.com/storage-transfer/docs/source-amazon-s3, 'federated identity')."""
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "StorageTransferServiceOnly", "Effect": "Allow",
        "Principal": {"Federated": "accounts.google.com"}, "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {"accounts.google.com:sub": sorted(subject_ids)}}}]}


def mirrored_prefixes(transfer_spec: dict[str, Any]) -> list[str]:
    """The source prefixes a transfer spec (wire names) copies: the source path joined with each include prefix,
    or the path alone. Used by the policy; '' means the whole bucket."""
    source = transfer_spec.get("awsS3DataSource") or transfer_spec.get("gcsDataSource") or {}
    path = str(source.get("path") or "") if isinstance(source, dict) else ""
    conditions = transfer_spec.get("objectConditions") or {}
    includes = conditions.get("includePrefixes") if isinstance(conditions, dict) else None
    return [path + str(p) for p in includes] if includes else [path]
