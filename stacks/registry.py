"""The `registry` stack kind: the permanent model registry shared by training and serving stacks."""
from __future__ import annotations

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
    bucket_name = spec.bucket_name or registry_bucket_name(
        spec.bucket_name_prefix, aws.get_caller_identity().account_id, region
    )
    registry = ModelRegistry(
        "registry",
        ModelRegistryArgs(spec=spec, bucket_name=bucket_name, tags=contract_tags("registry", pulumi.get_stack())),
    )
    pulumi.export("bucketName", registry.bucket_name)
    pulumi.export("bucketArn", registry.bucket.arn)
    pulumi.export("kmsKeyArn", registry.key.arn)
    pulumi.export("region", region)
    pulumi.export("prefixes", registry_layout.ROOTS)
