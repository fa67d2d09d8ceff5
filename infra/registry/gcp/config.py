"""Config of the `registry` stack kind on GCP (`mlinfra:cloud: gcp`): the registry's mirror on GCP, a GCS
bucket that Storage Transfer Service fills from the AWS registry's models/ prefix on a schedule."""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

from pydantic import Field, field_validator

from infra.core.naming import GcsBucketName
from infra.core.spec import Spec

SERVICE_ACCOUNT_EMAIL = re.compile(
    r"^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]\.iam\.gserviceaccount\.com$"
)
AWS_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")
GCS_BUCKET = r"^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$"  # no dots: dotted names need domain verification


class MirrorScheduleSpec(Spec):
    interval_hours: int = Field(
        24,
        ge=1,
        le=168,
        description="Hours between the starts of two transfer runs (Storage Transfer Service allows 1 hour at least). "
        "A version promoted on AWS reaches the mirror after at most this long plus one run's duration.",
    )
    start_date: str = Field(
        "2026-01-01",
        description="First day of the schedule (YYYY-MM-DD, UTC). Fixed, so the job does not change on every update; "
        "a past date starts the schedule the following day.",
    )
    start_time_utc: str = Field("02:00", description="Time of day (HH:MM, UTC) the daily runs start.")

    @field_validator("start_date")
    @classmethod
    def _date(cls, value: str) -> str:
        try:
            dt.date.fromisoformat(value)
        except ValueError:
            raise ValueError("must be a date YYYY-MM-DD") from None
        return value

    @field_validator("start_time_utc")
    @classmethod
    def _time(cls, value: str) -> str:
        if not re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d", value):
            raise ValueError("must be a time HH:MM (24-hour, UTC)")
        return value


class MirrorLifecycleSpec(Spec):
    noncurrent_version_days: int = Field(
        90,
        ge=1,
        le=3650,
        description="Days a replaced object version (an alias moved on AWS) is kept after it "
        "became noncurrent, as on the AWS registry.",
    )
    noncurrent_versions_kept: int = Field(
        3, ge=0, le=100, description="Newest noncurrent versions kept whatever their age."
    )


class MirrorSpec(Spec):
    source_stack: str = Field(
        description="The AWS registry stack, as for a StackReference ('registry' or 'org/mlinfra/registry'); its "
        "bucketName output is the transfer's source, its gcpMirrorRoleArn output (if any) the role to assume."
    )
    bucket_name: GcsBucketName = Field(
        pattern=GCS_BUCKET,
        description="Name of the mirror's GCS bucket (global namespace); "
        "serving stacks on GCP read it as modelStore.bucket.",
    )
    role_arn: str | None = Field(
        None,
        description="AWS role Storage Transfer Service assumes with its Google identity "
        "(AssumeRoleWithWebIdentity) to read s3://<registry>/models/. Default: the source stack's "
        "gcpMirrorRoleArn output.",
    )
    readers: list[str] = Field(
        min_length=1,
        max_length=100,
        description="Service accounts allowed to read the mirror (roles/storage.objectViewer each): the serving "
        "model servers' Workload Identity accounts. Nobody else gets read access.",
    )
    schedule: MirrorScheduleSpec = Field(default_factory=MirrorScheduleSpec, description="When the transfer runs.")
    key_rotation_days: int = Field(90, ge=1, le=365, description="Rotation period of the mirror's Cloud KMS key, days.")
    lifecycle: MirrorLifecycleSpec = Field(
        default_factory=MirrorLifecycleSpec, description="Expiry of noncurrent versions."
    )

    @field_validator("role_arn")
    @classmethod
    def _role(cls, value: str | None) -> str | None:
        if value is not None and not AWS_ROLE_ARN.fullmatch(value):
            raise ValueError("must be an IAM role ARN such as arn:aws:iam::123456789012:role/registry-gcp-mirror")
        return value

    @field_validator("readers")
    @classmethod
    def _readers(cls, value: list[str]) -> list[str]:
        for email in value:
            if not SERVICE_ACCOUNT_EMAIL.fullmatch(email):
                raise ValueError(
                    f"{email!r} is not a service account email (<id>@<project>.iam.gserviceaccount.com); "
                    "readers are serving identities, never users, groups or allUsers"
                )
        dup = next((e for e in value if value.count(e) > 1), None)
        if dup:
            raise ValueError(f"{dup!r} appears twice")
        return value


class GcpRegistrySpec(Spec):
    mirror: MirrorSpec = Field(description="The registry's mirror on GCP (models/ only).")


class GcpRegistryStackConfig(Spec):
    kind: Literal["registry"] = Field(description="Stack kind.")
    cloud: Literal["gcp"] = Field(description="Cloud of the stack.")
    registry: GcpRegistrySpec = Field(description="The registry's mirror on GCP.")
