"""Config of the `training` stack kind: one run on whole EFA nodes with FSx for Lustre."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from infra.core.spec import Spec
from infra.training.limits import DEFAULT_GRACE_MINUTES, MAX_GRACE_MINUTES

RUN_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$"
EXPIRES_AT_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"
EXPIRES_AT_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # strptime/strftime form of EXPIRES_AT_PATTERN
MAX_TTL_HOURS = 336  # two weeks: longer runs checkpoint and start a new run


class CapacitySpec(Spec):
    mode: Literal["on-demand", "capacity-block", "odcr"] = Field(
        "on-demand",
        description="How the nodes are bought: on-demand in a cluster placement group, an EC2 Capacity Block "
        "for ML, or an On-Demand Capacity Reservation (ODCR).",
    )
    reservation_id: Optional[str] = Field(
        None, pattern=r"^cr-[0-9a-f]{8,17}$",
        description="Capacity reservation id (cr-...), required for capacity-block and odcr.",
    )
    reserved_count: Optional[int] = Field(
        None, ge=1, description="Instances in the reservation; nodeCount must not exceed it."
    )


class LustreSpec(Spec):
    dataset_gib: float = Field(1200, ge=0, description="Size of the training data imported from the registry's datasets/, GiB.")
    checkpoint_gib: float = Field(500, ge=0, description="Size of one full checkpoint, GiB.")
    checkpoint_write_seconds: float = Field(
        600, gt=0, description="Target time to write one checkpoint to Lustre, seconds."
    )
    read_throughput_gbps: float = Field(
        10, ge=0, description="Target aggregate read throughput for data loading, GB/s."
    )
    deployment_type: Optional[Literal["SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"]] = Field(
        None, description="Pin the deployment type; default: the cheapest that meets the targets."
    )
    storage_capacity_gib: Optional[int] = Field(
        None, description="Override the sized capacity, GiB (must be an allowed step of the deployment type)."
    )
    per_unit_storage_throughput: Optional[int] = Field(
        None, description="Override the sized per-unit throughput, MB/s/TiB (allowed values depend on the type)."
    )


class NetworkSpec(Spec):
    vpc_id: Optional[str] = Field(None, pattern=r"^vpc-[0-9a-f]{8,17}$", description="Bring your own VPC (with subnetId).")
    subnet_id: Optional[str] = Field(
        None, pattern=r"^subnet-[0-9a-f]{8,17}$",
        description="Bring your own private subnet, in the AZ that offers the type; must not map public IPs.",
    )
    cidr: str = Field("10.64.0.0/16", description="CIDR of the VPC created for the run (ignored with vpcId).")
    egress: Literal["nat", "endpoints"] = Field(
        "nat", description="Way out for images and packages: a NAT gateway, or VPC interface endpoints only."
    )


class JobSpec(Spec):
    command: list[str] = Field(
        default_factory=lambda: ["/opt/job/train.py"], min_length=1,
        description="Training script and its arguments, as torchrun takes them on every node (torchrun starts "
        "Python itself, so no leading `python`).",
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables for the job.")
    torchrun_path: Optional[str] = Field(
        None, pattern=r"^/[A-Za-z0-9._/-]+$",
        description="Absolute path of torchrun on the AMI; default: the path on the Deep Learning AMI in use "
        "(set it together with amiId when the AMI is your own).",
    )


class LifecycleSpec(Spec):
    ttl_hours: float = Field(
        24, gt=0, le=MAX_TTL_HOURS,
        description=f"Hard maximum lifetime of the run, hours (at most {MAX_TTL_HOURS}); expiresAt = start + ttlHours. "
        "At expiresAt the run guard terminates the nodes, exports the checkpoints and deletes the file system.",
    )
    expires_at: Optional[str] = Field(
        None, pattern=EXPIRES_AT_PATTERN,
        description="When the run's resources expire, ISO-8601 UTC (e.g. 2026-11-22T08:00:00Z). Fixed once when the "
        "run starts (`python -m infra run` writes it); required by `pulumi up`, provisional (now + ttlHours) in previews.",
    )
    teardown_on_completion: bool = Field(
        True,
        description="Terminate the nodes as soon as the job ends (the nodes power off, and the run guard terminates "
        "them on the completion marker). false keeps them for inspection until expiresAt.",
    )
    export_checkpoints: bool = Field(
        True,
        description="Export /fsx/checkpoints to the registry's checkpoints/<run-id>/ (continuously, and once more before "
        "the file system is deleted). false: checkpoints live only on Lustre and are lost with it.",
    )
    grace_period_minutes: int = Field(
        DEFAULT_GRACE_MINUTES, ge=0, le=MAX_GRACE_MINUTES,
        description="Minutes before expiresAt at which every node sends SIGTERM to the job, so it can save a last "
        "checkpoint and end normally before the run guard's hard stop.",
    )


class TrainingSpec(Spec):
    run_id: str = Field(pattern=RUN_ID_PATTERN, description="Run id: lowercase letters, digits and '-', up to 40 characters.")
    instance_type: str = Field(description="Training instance type, e.g. p4d.24xlarge or p5.48xlarge.")
    node_count: int = Field(ge=1, le=256, description="Whole nodes in the cluster, 1 to 256.")
    availability_zone: Optional[str] = Field(
        None, description="AZ for every node and the file system; default: the first AZ of the region offering the type."
    )
    capacity: CapacitySpec = Field(default_factory=CapacitySpec, description="How capacity is obtained.")
    lustre: LustreSpec = Field(default_factory=LustreSpec, description="Sizing intents for FSx for Lustre.")
    network: NetworkSpec = Field(default_factory=NetworkSpec, description="Network for the run.")
    job: JobSpec = Field(default_factory=JobSpec, description="What the nodes run.")
    lifecycle: LifecycleSpec = Field(default_factory=LifecycleSpec, description="How long the run may live.")
    ami_id: Optional[str] = Field(
        None, pattern=r"^ami-[0-9a-f]{8,17}$",
        description="Override the Deep Learning AMI otherwise found through its public SSM parameter.",
    )
    root_volume_gib: int = Field(200, ge=100, le=16384, description="Encrypted gp3 root volume per node, GiB.")


class TrainingStackConfig(Spec):
    kind: Literal["training"] = Field(description="Stack kind.")
    registry_stack: str = Field(
        description="Stack holding the registry, as for a StackReference: 'registry' or 'org/mlinfra/registry'."
    )
    training: TrainingSpec = Field(description="The run.")
