"""The registry's mirror on GCP, as pure decisions: what Storage Transfer Service copies (models/ only, never
deleting), when and under which names."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

READER_ROLE = "roles/storage.objectViewer"  # get and list objects; no writes, no bucket settings
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


def mirrored_prefixes(transfer_spec: dict[str, Any]) -> list[str]:
    """The source prefixes a transfer spec (wire names) copies: the source path joined with each include prefix,
    or the path alone. Used by the policy; '' means the whole bucket."""
    source = transfer_spec.get("awsS3DataSource") or transfer_spec.get("gcsDataSource") or {}
    path = str(source.get("path") or "") if isinstance(source, dict) else ""
    conditions = transfer_spec.get("objectConditions") or {}
    includes = conditions.get("includePrefixes") if isinstance(conditions, dict) else None
    return [path + str(p) for p in includes] if includes else [path]
