"""Config of the `training` stack kind: one run on whole EFA nodes with FSx for Lustre."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from infra.core.spec import Spec
from infra.training.spec import LustreIntentSpec, RunSpec


class CapacitySpec(Spec):
    mode: Literal["on-demand", "capacity-block", "odcr"] = Field(
        "on-demand",
        description="How the nodes are bought: on-demand in a cluster placement group, an EC2 Capacity Block "
        "for ML, or an On-Demand Capacity Reservation (ODCR).",
    )
    reservation_id: str | None = Field(
        None,
        pattern=r"^cr-[0-9a-f]{8,17}$",
        description="Capacity reservation id (cr-...), required for capacity-block and odcr.",
    )
    reserved_count: int | None = Field(
        None, ge=1, description="Instances in the reservation; nodeCount must not exceed it."
    )


class LustreSpec(LustreIntentSpec):
    """Sizing intents for FSx for Lustre, and the overrides FSx allows."""

    deployment_type: Literal["SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"] | None = Field(
        None, description="Pin the deployment type; default: the cheapest that meets the targets."
    )
    storage_capacity_gib: int | None = Field(
        None, description="Override the sized capacity, GiB (must be an allowed step of the deployment type)."
    )
    per_unit_storage_throughput: int | None = Field(
        None, description="Override the sized per-unit throughput, MB/s/TiB (allowed values depend on the type)."
    )


class NetworkSpec(Spec):
    vpc_id: str | None = Field(None, pattern=r"^vpc-[0-9a-f]{8,17}$", description="Bring your own VPC (with subnetId).")
    subnet_id: str | None = Field(
        None,
        pattern=r"^subnet-[0-9a-f]{8,17}$",
        description="Bring your own private subnet, in the AZ that offers the type; must not map public IPs.",
    )
    cidr: str = Field("10.64.0.0/16", description="CIDR of the VPC created for the run (ignored with vpcId).")
    egress: Literal["nat", "endpoints"] = Field(
        "nat", description="Way out for images and packages: a NAT gateway, or VPC interface endpoints only."
    )


class TrainingSpec(RunSpec):
    instance_type: str = Field(description="Training instance type, e.g. p4d.24xlarge or p5.48xlarge.")
    availability_zone: str | None = Field(
        None,
        description="AZ for every node and the file system; default: the first AZ of the region offering the type.",
    )
    capacity: CapacitySpec = Field(default_factory=CapacitySpec, description="How capacity is obtained.")
    lustre: LustreSpec = Field(default_factory=LustreSpec, description="Sizing intents for FSx for Lustre.")
    network: NetworkSpec = Field(default_factory=NetworkSpec, description="Network for the run.")
    ami_id: str | None = Field(
        None,
        pattern=r"^ami-[0-9a-f]{8,17}$",
        description="Override the Deep Learning AMI otherwise found through its public SSM parameter.",
    )
    root_volume_gib: int = Field(200, ge=100, le=16384, description="Encrypted gp3 root volume per node, GiB.")


class TrainingStackConfig(Spec):
    kind: Literal["training"] = Field(description="Stack kind.")
    registry_stack: str = Field(
        description="Stack holding the registry, as for a StackReference: 'registry' or 'org/mlinfra/registry'."
    )
    training: TrainingSpec = Field(description="The run.")
