"""Config of the `registry` stack kind: the long-lived, protected model registry bucket."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from infra.core.naming import bucket_name_problem
from infra.core.spec import Spec


class ObjectLockSpec(Spec):
    enabled: bool = Field(
        False,
        description="Turn on S3 Object Lock (write-once-read-many). Decided at bucket creation and "
        "cannot be turned off afterwards.",
    )
    mode: Literal["GOVERNANCE", "COMPLIANCE"] = Field(
        "GOVERNANCE",
        description="Default retention mode. COMPLIANCE cannot be shortened or removed by anyone, root included.",
    )
    retention_days: int = Field(
        30, ge=1, le=36500, description="Default retention, in days, for every new object version."
    )


class LifecycleSpec(Spec):
    noncurrent_version_days: int = Field(
        90, ge=1, le=3650, description="Days a replaced or deleted object version is kept before it expires."
    )
    noncurrent_versions_kept: int = Field(
        3, ge=0, le=100, description="Newest noncurrent versions kept whatever their age."
    )
    abort_incomplete_upload_days: int = Field(
        7, ge=1, le=365, description="Days after which unfinished multipart uploads are aborted and their parts freed."
    )


class GcpMirrorAccessSpec(Spec):
    sts_subject_ids: list[str] = Field(
        min_length=1,
        max_length=10,
        description="Numeric subject ids of the Storage Transfer Service agents (one per GCP project) that may read "
        "models/ through web identity federation: the transferAgentSubjectId output of the registry's "
        "mirror stack on GCP (googleServiceAccounts.get).",
    )
    role_name: str = Field(
        "mlinfra-registry-gcp-mirror",
        pattern=r"^[\w+=,.@-]{1,64}$",
        description="Name of the IAM role they assume (the mirror's mlinfra:registry.mirror.roleArn).",
    )

    @field_validator("sts_subject_ids", mode="before")
    @classmethod
    def _as_text(cls, value: object) -> object:
        # A long digit string reads as a number in YAML and in `-c` values; it is an identifier, kept as text.
        return (
            [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
            if isinstance(value, list)
            else value
        )

    @field_validator("sts_subject_ids")
    @classmethod
    def _numeric(cls, value: list[str]) -> list[str]:
        bad = [v for v in value if not (v.isdigit() and 10 <= len(v) <= 30)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a Google subject id (digits only, e.g. 100000000000000000001)")
        return value


class RegistrySpec(Spec):
    bucket_name: str | None = Field(
        None,
        description="Exact bucket name. Default: '<bucketNamePrefix>-<account id>-<region>', unique per account and "
        "region.",
    )
    bucket_name_prefix: str = Field(
        "mlinfra-registry",
        min_length=3,
        max_length=30,
        pattern=r"^[a-z0-9][a-z0-9-]*[a-z0-9]$",
        description="Prefix of the default bucket name (lowercase letters, digits, hyphens).",
    )
    kms_key_deletion_window_days: int = Field(
        30,
        ge=7,
        le=30,
        description="Waiting period, in days, before a scheduled deletion of the registry's KMS key completes.",
    )
    object_lock: ObjectLockSpec = Field(
        default_factory=ObjectLockSpec, description="Optional write-once retention for all object versions."
    )
    lifecycle: LifecycleSpec = Field(
        default_factory=LifecycleSpec, description="Expiry of old object versions and abandoned uploads."
    )
    gcp_mirror: GcpMirrorAccessSpec | None = Field(
        None,
        description="Let the registry's mirror on GCP (Storage Transfer Service) read models/ only, through an "
        "IAM role trusted by accounts.google.com for the given subject ids. Off by default.",
    )
    event_bridge: bool = Field(
        True,
        description="Send the bucket's object events to EventBridge; training run guards watch their "
        "completion markers through it.",
    )

    @field_validator("bucket_name_prefix")
    @classmethod
    def _prefix_makes_valid_names(cls, value: str) -> str:
        problem = bucket_name_problem(f"{value}-123456789012-us-east-1")
        if problem:
            raise ValueError(f"default bucket names built from it would be invalid: {problem}")
        return value

    @field_validator("bucket_name")
    @classmethod
    def _valid_bucket_name(cls, value: str | None) -> str | None:
        if value is not None:
            problem = bucket_name_problem(value)
            if problem:
                raise ValueError(f"not a valid S3 bucket name: {problem}")
        return value


class RegistryStackConfig(Spec):
    kind: Literal["registry"] = Field(description="Stack kind.")
    registry: RegistrySpec = Field(default_factory=RegistrySpec, description="The registry bucket and its key.")
