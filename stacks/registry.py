"""The `registry` stack kind: the permanent model registry shared by training and serving stacks."""
from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from components.registry import ModelRegistry, ModelRegistryArgs
from infra import registry_layout
from infra.config.registry import RegistryStackConfig
from infra.naming import registry_bucket_name
from infra.tags import contract_tags


def build(config: RegistryStackConfig) -> None:
    spec = config.registry
    region = aws.get_region().region
    account_id = aws.get_caller_identity().account_id
    bucket_name = spec.bucket_name or registry_bucket_name(spec.bucket_name_prefix, account_id, region)
    key_policy = registry_layout.registry_key_policy(account_id, aws.get_partition().partition, region)
    registry = ModelRegistry(
        "registry",
        ModelRegistryArgs(spec=spec, bucket_name=bucket_name, tags=contract_tags("registry", pulumi.get_stack()),
                          key_policy=json.dumps(key_policy)),
    )
    pulumi.export("bucketName", registry.bucket_name)
    pulumi.export("bucketArn", registry.bucket.arn)
    pulumi.export("kmsKeyArn", registry.key.arn)
    pulumi.export("region", region)
    pulumi.export("eventBridge", spec.event_bridge)
    pulumi.export("prefixes", registry_layout.ROOTS)
