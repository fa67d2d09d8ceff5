"""The run's FSx for Lustre file system, sized by infra.training.aws.lustre, linked to the registry: `datasets/`
imported once at /fsx/datasets when the run starts, /fsx/checkpoints exported to `checkpoints/<run-id>/`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.training.aws.lustre import LustrePlan
from infra.training.bootstrap import CHECKPOINTS_PATH, DATASETS_PATH
from infra.training.limits import DATASETS_IMPORT_TIMEOUT


@dataclass(frozen=True)
class RunFileSystemArgs:
    plan: LustrePlan
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    registry_bucket: pulumi.Input[str]
    checkpoints_prefix: str | None  # "checkpoints/<run-id>/"; None: checkpoints are not exported
    datasets_prefix: str  # "datasets/"
    tags: Mapping[str, str]
    # The rules that open the Lustre ports on the file system's group: FSx refuses to create it before them.
    port_rules: Sequence[pulumi.Resource] = ()


class RunFileSystem(pulumi.ComponentResource):
    dns_name: pulumi.Output[str]
    mount_name: pulumi.Output[str]

    def __init__(self, name: str, args: RunFileSystemArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:training:RunFileSystem", name, None, opts)
        plan, tags = args.plan, dict(args.tags)
        persistent = plan.deployment_type.startswith("PERSISTENT")
        self.file_system = aws.fsx.LustreFileSystem(
            f"{name}-fs",
            deployment_type=plan.deployment_type,
            storage_type="SSD",
            storage_capacity=plan.storage_capacity_gib,
            per_unit_storage_throughput=plan.per_unit_storage_throughput,
            file_system_type_version=plan.file_system_type_version,
            subnet_ids=args.subnet_id,  # the nodes' subnet (one, flattened in v7): same AZ, no cross-AZ traffic
            security_group_ids=[args.security_group_id],
            data_compression_type="LZ4",
            # S3-linked file systems cannot be backed up; what must outlive the run is exported to the
            # registry through the checkpoints association, so deletion takes no final backup.
            skip_final_backup=True,
            automatic_backup_retention_days=0 if persistent else None,
            copy_tags_to_backups=False,
            tags={**tags, "Name": name},
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.port_rules)),
        )
        child = pulumi.ResourceOptions(parent=self)
        bucket = pulumi.Output.from_input(args.registry_bucket)
        aws.fsx.DataRepositoryAssociation(
            f"{name}-datasets",
            file_system_id=self.file_system.id,
            file_system_path=DATASETS_PATH,
            data_repository_path=bucket.apply(lambda b: f"s3://{b}/{args.datasets_prefix}"),
            # Read-only for the run: the listing is imported once, on create, and no automatic import. Automatic
            # import puts S3 event notifications on the shared registry bucket for datasets/: a second run's
            # overlap and the association turns MISCONFIGURED, and the registry's own BucketNotification (which
            # owns the bucket's whole notification configuration) removes them on its next update.
            batch_import_meta_data_on_create=True,
            delete_data_in_filesystem=False,
            tags=tags,
            # Created only once the import finished: the provider's 10-minute default is short for a large datasets/.
            opts=pulumi.ResourceOptions(
                parent=self, custom_timeouts=pulumi.CustomTimeouts(create=DATASETS_IMPORT_TIMEOUT)
            ),
        )
        if args.checkpoints_prefix is None:
            self.checkpoints = None
        else:
            self.checkpoints = aws.fsx.DataRepositoryAssociation(
                f"{name}-checkpoints",
                file_system_id=self.file_system.id,
                file_system_path=CHECKPOINTS_PATH,
                data_repository_path=bucket.apply(lambda b: f"s3://{b}/{args.checkpoints_prefix}"),
                batch_import_meta_data_on_create=False,
                # Export only, and never deletions: a checkpoint removed on Lustre stays in the registry.
                s3=aws.fsx.DataRepositoryAssociationS3Args(
                    auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(
                        events=["NEW", "CHANGED"]
                    ),
                ),
                delete_data_in_filesystem=False,
                tags=tags,
                opts=child,
            )
        self.dns_name = self.file_system.dns_name
        self.mount_name = self.file_system.mount_name
        self.register_outputs(
            {"fileSystemId": self.file_system.id, "dnsName": self.dns_name, "mountName": self.mount_name}
        )
