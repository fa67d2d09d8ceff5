"""The `registry` stack kind on GCP (`mlinfra:cloud: gcp`): the registry's mirror on GCP. The AWS registry stays
the one source of truth; this stack copies its models/ prefix into a GCS bucket that GCP serving reads."""

from __future__ import annotations

from typing import Any

import pulumi

from components.registry.gcp.mirror import GcsRegistryMirror, GcsRegistryMirrorArgs
from infra.core.labels import gcp_labels
from infra.core.tags import contract_tags
from infra.registry.gcp import mirror as registry_mirror
from infra.registry.gcp.config import GcpRegistryStackConfig
from infra.registry.layout import MIRRORED_PREFIX

ROLE_KEY = "mlinfra:registry.mirror.roleArn"


def build(config: GcpRegistryStackConfig) -> None:
    spec = config.registry.mirror
    stack = pulumi.get_stack()
    provider_config = pulumi.Config("gcp")
    project, region = provider_config.require("project"), provider_config.require("region")
    source = pulumi.StackReference(spec.source_stack)
    bucket = source.require_output("bucketName")
    role_arn = pulumi.Output.all(source.get_output("gcpMirrorRoleArn")).apply(
        lambda values: mirror_role_arn(spec.role_arn, values[0], spec.source_stack)
    )
    cloud_names = registry_mirror.names(stack)
    mirror = GcsRegistryMirror(
        "mirror",
        GcsRegistryMirrorArgs(
            spec=spec,
            project=project,
            location=region,
            source_bucket=bucket,
            role_arn=role_arn,
            key_ring_name=cloud_names["key_ring"],
            key_name=cloud_names["key"],
            labels=gcp_labels(contract_tags("registry", stack)),
        ),
    )

    pulumi.export("bucketName", mirror.bucket.name)
    pulumi.export("kmsKeyId", mirror.key.id)
    pulumi.export("transferJob", mirror.transfer.name)
    pulumi.export("sourceBucket", bucket)
    pulumi.export("sourceRegion", source.get_output("region"))
    pulumi.export("prefixes", {"models": MIRRORED_PREFIX})
    pulumi.export("readers", list(spec.readers))
    pulumi.export("transferAgentSubjectId", mirror.transfer_agent_subject_id)
    pulumi.export("scheduleHours", spec.schedule.interval_hours)


def mirror_role_arn(configured: str | None, from_source: Any, source_stack: str) -> str:
    """The configured role wins; else the registry stack's; neither is an error naming the key (no silent gap)."""
    if configured:
        return configured
    if isinstance(from_source, str) and from_source:
        return from_source
    raise pulumi.RunError(
        f"{ROLE_KEY}: required: registry stack {source_stack!r} exports no gcpMirrorRoleArn; set "
        "mlinfra:registry.gcpMirror.stsSubjectIds on it (transferAgentSubjectId of this stack) or give "
        "the ARN of an AWS role Storage Transfer Service may assume"
    )
