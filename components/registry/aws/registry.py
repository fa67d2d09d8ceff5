"""The model registry: one versioned, KMS-encrypted, TLS-only, protected S3 bucket."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.registry.aws.access import RegistryAccess
from infra.registry import layout as registry_layout
from infra.registry.aws.config import RegistrySpec


@dataclass(frozen=True)
class ModelRegistryArgs:
    spec: RegistrySpec
    bucket_name: pulumi.Input[str]
    tags: Mapping[str, str]
    key_policy: pulumi.Input[str] | None = None  # JSON; None keeps KMS's default key policy


class ModelRegistry(pulumi.ComponentResource):
    def __init__(self, name: str, args: ModelRegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:registry:ModelRegistry", name, None, opts)
        spec, tags = args.spec, dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)
        # Losing either of these loses every model: Pulumi refuses to delete them, and if they are
        # ever dropped from the program they stay in the account.
        keep = pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True)

        self.key = aws.kms.Key(
            f"{name}-key",
            description="mlinfra model registry (S3 SSE-KMS)",
            enable_key_rotation=True,
            deletion_window_in_days=spec.kms_key_deletion_window_days,
            policy=args.key_policy,
            tags=tags,
            opts=keep,
        )
        aws.kms.Alias(
            f"{name}-key-alias",
            name=f"alias/mlinfra/{pulumi.get_stack()}-registry",
            target_key_id=self.key.key_id,
            opts=child,
        )
        self.bucket = aws.s3.Bucket(
            f"{name}-bucket",
            bucket=args.bucket_name,
            # Object Lock is switched on by BucketObjectLockConfiguration below (allowed on existing
            # versioned buckets); setting it here would be ForceNew and replace the protected bucket.
            force_destroy=False,
            tags=tags,
            opts=keep,
        )
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=self.bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        public_block = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access-block",
            bucket=self.bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        versioning = aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=self.bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=self.bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms",
                        kms_master_key_id=self.key.arn,
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=self.bucket.id,
            policy=self.bucket.arn.apply(lambda arn: json.dumps(registry_layout.tls_only_bucket_policy(arn))),
            # The public access block must exist first, or S3 may judge the policy before it applies.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[public_block]),
        )
        lifecycle = spec.lifecycle
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle",
            bucket=self.bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-noncurrent-versions",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                        noncurrent_days=lifecycle.noncurrent_version_days,
                        newer_noncurrent_versions=lifecycle.noncurrent_versions_kept or None,
                    ),
                ),
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="abort-incomplete-uploads",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=lifecycle.abort_incomplete_upload_days,
                    ),
                ),
            ],
            # Lifecycle rules on noncurrent versions need versioning on first.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
        )
        if spec.object_lock.enabled:
            aws.s3.BucketObjectLockConfiguration(
                f"{name}-object-lock",
                bucket=self.bucket.id,
                object_lock_enabled="Enabled",
                rule=aws.s3.BucketObjectLockConfigurationRuleArgs(
                    default_retention=aws.s3.BucketObjectLockConfigurationRuleDefaultRetentionArgs(
                        mode=spec.object_lock.mode,
                        days=spec.object_lock.retention_days,
                    ),
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
            )
        if spec.event_bridge:
            # A BucketNotification owns the bucket's whole notification configuration (PutBucketNotification-
            # Configuration replaces it): an update removes any notification another party added. Nothing else
            # may add one: training imports datasets/ once, with no automatic import (whose S3 notifications this
            # would remove); policy lustre-associations-without-automatic-import keeps it so.
            aws.s3.BucketNotification(f"{name}-events", bucket=self.bucket.id, eventbridge=True, opts=child)

        self.access = RegistryAccess(self.bucket.arn, self.key.arn)
        self.bucket_name = self.bucket.bucket
        self.prefixes = dict(registry_layout.ROOTS)
        self.register_outputs(
            {"bucketName": self.bucket.bucket, "bucketArn": self.bucket.arn, "kmsKeyArn": self.key.arn}
        )

    def grant_read(
        self, role: aws.iam.Role, *prefixes: str, opts: pulumi.ResourceOptions | None = None
    ) -> aws.iam.RolePolicy:
        return self.access.grant_read(role, *prefixes, opts=opts)

    def grant_write(
        self, role: aws.iam.Role, *prefixes: str, opts: pulumi.ResourceOptions | None = None
    ) -> aws.iam.RolePolicy:
        return self.access.grant_write(role, *prefixes, opts=opts)
