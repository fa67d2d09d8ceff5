"""The `registry` stack kind: the permanent model registry shared by training and serving stacks."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from components.registry.aws.registry import ModelRegistry, ModelRegistryArgs
from infra.core.naming import registry_bucket_name
from infra.core.tags import contract_tags
from infra.registry import layout as registry_layout
from infra.registry.aws.config import GcpMirrorAccessSpec, RegistryStackConfig
from infra.registry.aws.mirror_access import sts_role_trust_policy
from infra.registry.layout import MIRRORED_PREFIX


def build(config: RegistryStackConfig) -> None:
    spec = config.registry
    region = aws.get_region().region
    account_id = aws.get_caller_identity().account_id
    bucket_name = spec.bucket_name or registry_bucket_name(spec.bucket_name_prefix, account_id, region)
    key_policy = registry_layout.registry_key_policy(account_id, aws.get_partition().partition, region)
    registry = ModelRegistry(
        "registry",
        ModelRegistryArgs(
            spec=spec,
            bucket_name=bucket_name,
            tags=contract_tags("registry", pulumi.get_stack()),
            key_policy=json.dumps(key_policy),
        ),
    )
    pulumi.export("bucketName", registry.bucket_name)
    pulumi.export("bucketArn", registry.bucket.arn)
    pulumi.export("kmsKeyArn", registry.key.arn)
    pulumi.export("region", region)
    pulumi.export("eventBridge", spec.event_bridge)
    pulumi.export("prefixes", registry_layout.ROOTS)
    if spec.gcp_mirror is not None:
        pulumi.export("gcpMirrorRoleArn", _gcp_mirror_role(registry, spec.gcp_mirror).arn)


def _gcp_mirror_role(registry: ModelRegistry, access: GcpMirrorAccessSpec) -> aws.iam.Role:
    """The role GCP's Storage Transfer Service assumes to copy models/ to the mirror: read-only, models/ only."""
    role = aws.iam.Role(
        "registry-gcp-mirror",
        name=access.role_name,
        assume_role_policy=json.dumps(sts_role_trust_policy(access.sts_subject_ids)),
        max_session_duration=3600,
        tags=contract_tags("registry", pulumi.get_stack()),
        opts=pulumi.ResourceOptions(parent=registry),
    )
    registry.grant_read(role, MIRRORED_PREFIX)
    return role
