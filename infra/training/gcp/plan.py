"""Every decision of a GCP training stack, from its config and the GCP catalog (pure, no pulumi).

The A3 network layout follows Google's published A3 blueprints (cluster-toolkit
examples/machine-learning/a3-highgpu-8g and a3-megagpu-8g: a system VPC with MTU 8244 for nic0, plus
`network_count` GPU VPCs of one subnet each from a /9 split into /20s, gVNIC on every NIC, internal traffic
allowed): nic0 in the primary VPC, then one NIC per GPU NIC of the machine type, each in its own VPC.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass
from datetime import datetime

from infra.catalog.gcp import GcpMachineType, machine_type
from infra.core.labels import gcp_labels, label_value
from infra.core.tags import RUN_ID, contract_tags
from infra.registry.layout import checkpoints_prefix
from infra.training.bootstrap import FabricGate
from infra.training.gcp.checks import chosen_zone, gcp_training_findings, lustre_intent
from infra.training.gcp.config import GcpTrainingSpec
from infra.training.gcp.lustre import ManagedLustrePlan, pinned_tier, size_managed_lustre
from infra.training.launch import launch_generation, plan_fabric_gate
from infra.training.lifetime import RunLifetime, checked_expiry
from infra.training.spec import LifecycleSpec

GPU_MTU = 8244  # A3 blueprints: MTU of the system VPC and of every GPU VPC
GPU_SUBNET_PREFIX = 20  # A3 blueprints: subnetwork_cidr_suffix 20
NIC_TYPE = "GVNIC"


@dataclass(frozen=True)
class GpuNic:
    index: int  # 1.. (nic0 is the host NIC)
    cidr: str  # the subnet of its own VPC


@dataclass(frozen=True)
class GcpTrainingPlan(RunLifetime):
    run_id: str
    region: str
    zone: str
    mtype: GcpMachineType
    node_count: int
    image: str
    boot_disk_gib: int
    primary_cidr: str
    lustre_cidr: str
    gpu_nics: tuple[GpuNic, ...]
    lustre: ManagedLustrePlan
    data_bucket: str
    expires_at: str
    expires_at_provisional: bool
    lifecycle: LifecycleSpec
    tags: dict[str, str]
    generation: str  # keys the nodes' rendezvous: machine type, node count and zone (infra/training/launch.py)
    fabric_gate: FabricGate  # the all-reduce over the GPU NICs the nodes must pass before the job

    @property
    def labels(self) -> dict[str, str]:
        return gcp_labels(self.tags)

    @property
    def termination_time(self) -> str:
        """The nodes' hard end (scheduling.terminationTime, RFC 3339): expires-at itself."""
        return self.expires_at

    @property
    def processes_per_node(self) -> int:
        return self.mtype.accelerator.count


def run_label(run_id: str) -> tuple[str, str]:
    """(key, value) of the run's label on its instances, disks and file system."""
    return label_value(RUN_ID), label_value(run_id)


PREFIX_LENGTH = 40  # leaves room for the longest suffix within GCP's 63-character names


def run_resource_prefix(run_id: str) -> str:
    """Physical-name prefix of the run's networks, subnets, firewalls, placement policy, nodes and file
    system (they are found by it; networks take no labels). A run id too long for it keeps its head and gets
    a hash of the whole id, so two runs never share a prefix."""
    prefix = f"mlinfra-{run_id}"
    if len(prefix) <= PREFIX_LENGTH:
        return prefix
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:8]
    return f"{prefix[: PREFIX_LENGTH - 9].rstrip('-')}-{digest}"


# Every name the run's components give (components/gcp_training_*.py, gcp_run_filesystem.py): the audit
# matches these exactly, so another run whose id merely starts with this one's is never taken for it.
RUN_RESOURCE_SUFFIXES = r"(-net|-sub|-internal|-router|-lustre|-compact|-node-\d+|-gpunet-\d+(-sub|-internal)?)?"


def run_resource_name(run_id: str) -> re.Pattern[str]:
    return re.compile(re.escape(run_resource_prefix(run_id)) + RUN_RESOURCE_SUFFIXES + "$")


def lustre_instance_name(project: str, zone: str, run_id: str) -> str:
    """The full name of the run's Managed Lustre instance (its id is the run's resource prefix)."""
    return f"projects/{project}/locations/{zone}/instances/{run_resource_prefix(run_id)}"


def checkpoints_uri(bucket: str, run_id: str) -> str:
    """Where the run's checkpoints go in its data bucket: gs://<bucket>/checkpoints/<run-id>/."""
    return f"gs://{bucket}/{checkpoints_prefix(run_id)}"


def gpu_nic_layout(mtype: GcpMachineType, gpu_cidr: str) -> tuple[GpuNic, ...]:
    """One NIC per GPU NIC of the machine type, each in its own VPC with a /20 of `gpu_cidr`."""
    subnets = ipaddress.IPv4Network(gpu_cidr).subnets(new_prefix=GPU_SUBNET_PREFIX)
    return tuple(GpuNic(i + 1, str(next(subnets))) for i in range(mtype.gpu_nics))


def plan_gcp_training(spec: GcpTrainingSpec, region: str, stack: str, now: datetime, dry_run: bool) -> GcpTrainingPlan:
    """The plan for `spec`, or InputError with every finding (each names the field and the fix)."""
    expires_at, provisional = checked_expiry(gcp_training_findings(spec, region), spec, now, dry_run)
    mtype = machine_type(spec.machine_type)
    fs = spec.lustre
    zone = chosen_zone(spec, region)
    assert zone is not None, "the meaning checks refuse a region with no zone for the type"
    return GcpTrainingPlan(
        run_id=spec.run_id,
        region=region,
        zone=zone,
        mtype=mtype,
        node_count=spec.node_count,
        image=spec.image,
        boot_disk_gib=spec.boot_disk_gib,
        primary_cidr=spec.network.cidr,
        lustre_cidr=spec.network.lustre_cidr,
        gpu_nics=gpu_nic_layout(mtype, spec.network.gpu_cidr),
        lustre=size_managed_lustre(
            lustre_intent(spec), pinned_tier(fs.per_unit_storage_throughput, fs.capacity_gib), fs.capacity_gib
        ),
        data_bucket=spec.data_bucket,
        expires_at=expires_at,
        expires_at_provisional=provisional,
        lifecycle=spec.lifecycle,
        tags=contract_tags("training", stack, run_id=spec.run_id, expires_at=expires_at),
        generation=launch_generation(mtype.name, spec.node_count, zone),
        fabric_gate=plan_fabric_gate("gcp", mtype.name, spec.node_count, "nccl", spec.job.fabric_gate.skip),
    )
