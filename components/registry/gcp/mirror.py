"""The registry's mirror on GCP: a CMEK-encrypted, versioned, uniform-access GCS bucket, readable only by the
configured serving identities, that Storage Transfer Service fills from s3://<registry>/models/ on a schedule.
Long-lived like the registry: the bucket, key ring and key are protected and retained on delete."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
from pulumi_gcp.storage import (
    BucketEncryptionArgs,
    BucketLifecycleRuleActionArgs,
    BucketLifecycleRuleArgs,
    BucketLifecycleRuleConditionArgs,
    BucketVersioningArgs,
    TransferJobScheduleArgs,
    TransferJobScheduleScheduleStartDateArgs,
    TransferJobScheduleStartTimeOfDayArgs,
    TransferJobTransferSpecArgs,
    TransferJobTransferSpecAwsS3DataSourceArgs,
    TransferJobTransferSpecGcsDataSinkArgs,
    TransferJobTransferSpecTransferOptionsArgs,
)

from components.aliases import aliased
from infra.registry.gcp import mirror as rm
from infra.registry.gcp.config import MirrorSpec
from infra.registry.layout import MIRRORED_PREFIX


@dataclass(frozen=True)
class GcsRegistryMirrorArgs:
    spec: MirrorSpec
    project: str
    location: str  # the gcp:region: bucket and key ring live together (CMEK requires it)
    source_bucket: pulumi.Input[str]  # the AWS registry's bucket
    role_arn: pulumi.Input[str]  # AWS role Storage Transfer Service assumes
    key_ring_name: str
    key_name: str
    labels: dict[str, str]


class GcsRegistryMirror(pulumi.ComponentResource):
    def __init__(self, name: str, args: GcsRegistryMirrorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "mlinfra:registry:GcsRegistryMirror",
            name,
            None,
            aliased(opts, "mlinfra:gcs_registry_mirror:GcsRegistryMirror"),
        )
        spec = args.spec
        child = pulumi.ResourceOptions(parent=self)
        keep = pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True)

        self.key_ring = gcp.kms.KeyRing(
            f"{name}-keyring", name=args.key_ring_name, location=args.location, project=args.project, opts=keep
        )
        self.key = gcp.kms.CryptoKey(
            f"{name}-key",
            name=args.key_name,
            key_ring=self.key_ring.id,
            purpose="ENCRYPT_DECRYPT",
            rotation_period=rm.rotation_period(spec.key_rotation_days),
            labels=args.labels,
            opts=keep,
        )
        # Cloud Storage encrypts with the bucket's default key as its own service agent, so that agent (and only
        # it) may use the key; the bucket can be created only once it may.
        gcs_agent = gcp.storage.get_project_service_account_output(
            project=args.project, opts=pulumi.InvokeOptions(parent=self)
        )
        key_use = gcp.kms.CryptoKeyIAMMember(
            f"{name}-key-gcs-agent",
            crypto_key_id=self.key.id,
            role=rm.KEY_USER_ROLE,
            member=gcs_agent.email_address.apply(rm.reader_member),
            opts=child,
        )

        life = spec.lifecycle
        self.bucket = gcp.storage.Bucket(
            f"{name}-bucket",
            name=spec.bucket_name,
            project=args.project,
            location=args.location.upper(),
            storage_class="STANDARD",
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning=BucketVersioningArgs(enabled=True),
            encryption=BucketEncryptionArgs(default_kms_key_name=self.key.id),
            lifecycle_rules=[
                BucketLifecycleRuleArgs(
                    action=BucketLifecycleRuleActionArgs(type="Delete"),
                    condition=BucketLifecycleRuleConditionArgs(
                        days_since_noncurrent_time=life.noncurrent_version_days,
                        num_newer_versions=life.noncurrent_versions_kept,
                        with_state="ARCHIVED",
                    ),
                )
            ],
            force_destroy=False,
            labels=args.labels,
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True, depends_on=[key_use]),
        )

        # Read: the configured serving identities, one binding each; nothing public (public access prevention).
        self.readers = [
            gcp.storage.BucketIAMMember(
                f"{name}-reader-{i}",
                bucket=self.bucket.name,
                role=rm.READER_ROLE,
                member=rm.reader_member(email),
                opts=child,
            )
            for i, email in enumerate(spec.readers)
        ]
        # Write: the project's Storage Transfer Service agent, which also assumes the AWS role to read S3.
        sts_agent = gcp.storage.get_transfer_project_service_account_output(
            project=args.project, opts=pulumi.InvokeOptions(parent=self)
        )
        self.transfer_agent_subject_id = sts_agent.subject_id
        writer = gcp.storage.BucketIAMMember(
            f"{name}-transfer-writer",
            bucket=self.bucket.name,
            role=rm.TRANSFER_WRITER_ROLE,
            member=sts_agent.member,
            opts=child,
        )

        when = rm.schedule(spec.schedule.start_date, spec.schedule.start_time_utc, spec.schedule.interval_hours)
        prefix = MIRRORED_PREFIX
        self.transfer = gcp.storage.TransferJob(
            f"{name}-transfer",
            project=args.project,
            description=f"mlinfra registry mirror: s3 {prefix} -> gs://{spec.bucket_name}/{prefix}",
            transfer_spec=TransferJobTransferSpecArgs(
                aws_s3_data_source=TransferJobTransferSpecAwsS3DataSourceArgs(
                    bucket_name=args.source_bucket, path=prefix, role_arn=args.role_arn
                ),
                gcs_data_sink=TransferJobTransferSpecGcsDataSinkArgs(bucket_name=self.bucket.name, path=prefix),
                transfer_options=TransferJobTransferSpecTransferOptionsArgs(
                    overwrite_when=rm.OVERWRITE_WHEN,
                    delete_objects_from_source_after_transfer=False,
                    delete_objects_unique_in_sink=False,
                ),
            ),
            schedule=TransferJobScheduleArgs(
                schedule_start_date=TransferJobScheduleScheduleStartDateArgs(
                    year=when.start.year, month=when.start.month, day=when.start.day
                ),
                start_time_of_day=TransferJobScheduleStartTimeOfDayArgs(
                    hours=when.hour, minutes=when.minute, seconds=0, nanos=0
                ),
                repeat_interval=when.repeat_interval,
            ),
            status="ENABLED",
            opts=pulumi.ResourceOptions(parent=self, depends_on=[writer]),
        )
        self.register_outputs({"bucket": self.bucket.name, "key": self.key.id, "transferJob": self.transfer.name})
