"""Managed Lustre for one GCP run: the planned tier and capacity, in the nodes' zone and primary VPC (through
private services access), labelled with the run; deleted with the stack (checkpoints are copied out first)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.aliases import aliased
from infra.training.gcp.lustre import ManagedLustrePlan


@dataclass(frozen=True)
class GcpRunFileSystemArgs:
    plan: ManagedLustrePlan
    instance_id: str
    zone: str
    network_id: pulumi.Input[str]
    labels: Mapping[str, str]
    filesystem: str = "mlinfra"  # the Lustre file system name clients mount (at most 8 characters)


class GcpRunFileSystem(pulumi.ComponentResource):
    def __init__(self, name: str, args: GcpRunFileSystemArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "mlinfra:training:GcpRunFileSystem",
            name,
            None,
            aliased(opts, "mlinfra:gcp_run_filesystem:GcpRunFileSystem"),
        )
        self.instance = gcp.lustre.Instance(
            f"{name}-lustre",
            instance_id=args.instance_id,
            location=args.zone,
            filesystem=args.filesystem,
            capacity_gib=str(args.plan.capacity_gib),
            per_unit_storage_throughput=str(args.plan.per_unit_storage_throughput),
            network=args.network_id,
            labels=dict(args.labels),
            description="mlinfra training run file system",
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.mount_point = self.instance.mount_point
        self.register_outputs({"mountPoint": self.mount_point})
