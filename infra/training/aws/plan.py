"""Every decision of a training stack, made from its config and the catalog (pure, no pulumi).

The components only wire what this plan says; tests check the decisions here without mocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from infra.catalog.aws import AcceleratorKind, InstanceType, instance_type
from infra.core.tags import contract_tags
from infra.training.aws import lustre
from infra.training.aws.checks import chosen_az, training_findings
from infra.training.aws.config import TrainingSpec
from infra.training.aws.efa import Interface, bandwidth_fraction, efa_device_count, efa_layout
from infra.training.aws.images import NodeImage, node_image
from infra.training.bootstrap import FabricGate
from infra.training.launch import launch_generation, plan_fabric_gate
from infra.training.lifetime import RunLifetime, checked_expiry
from infra.training.spec import LifecycleSpec

# Physical NeuronCores grouped into one logical core by default: Trainium2 runs with LNC=2 (Neuron docs,
# "Logical NeuronCore configuration"), so a trn2.48xlarge has 64 usable cores for 128 physical ones.
LOGICAL_NEURON_CORE_SIZE = {"Trainium2": 2}


@dataclass(frozen=True)
class TrainingPlan(RunLifetime):
    run_id: str
    region: str
    availability_zone: str
    itype: InstanceType
    node_count: int
    layout: tuple[Interface, ...]
    capacity_mode: Literal["on-demand", "capacity-block", "odcr"]
    reservation_id: str | None
    image: NodeImage
    torchrun: str
    lustre: lustre.LustrePlan
    expires_at: str
    expires_at_provisional: bool
    lifecycle: LifecycleSpec
    tags: dict[str, str]
    # The launch generation: changes exactly when the fleet is replaced (type, size, zone, capacity), and keys
    # the nodes' rendezvous on Lustre, so a replaced fleet's registrations never count for the new one.
    generation: str
    fabric_gate: FabricGate  # the all-reduce the nodes must pass before the job

    @property
    def placement_strategy(self) -> str | None:
        """`cluster` for on-demand; none with a reservation, whose capacity is placed already
        (a Capacity Block forbids a placement group of your own; an ODCR that should be packed is
        created in a cluster placement group by whoever reserves it)."""
        return "cluster" if self.capacity_mode == "on-demand" else None

    @property
    def market_type(self) -> str | None:
        return "capacity-block" if self.capacity_mode == "capacity-block" else None

    @property
    def reservation_target(self) -> Literal["id", "group"] | None:
        """How the launch template targets the reservation: a Capacity Block by its id; an ODCR through a
        resource group holding it (EC2 Fleet launches nothing into a reservation named by id; see
        infra/training/aws/reservation.py); on-demand not at all."""
        if not self.reservation_id:
            return None
        return "id" if self.capacity_mode == "capacity-block" else "group"

    @property
    def fleet_capacity_type(self) -> str:
        return "capacity-block" if self.capacity_mode == "capacity-block" else "on-demand"

    @property
    def efa_devices(self) -> int:
        return efa_device_count(self.layout)

    @property
    def fabric_share(self) -> float:
        return bandwidth_fraction(self.itype, self.layout)

    @property
    def accelerator_kind(self) -> AcceleratorKind:
        return self.itype.accelerator_kind or "gpu"

    @property
    def devices_per_node(self) -> int:
        return self.itype.accelerator_count

    @property
    def processes_per_node(self) -> int:
        """torchrun workers per node: one per GPU, or one per logical NeuronCore on Trainium."""
        accelerator = self.itype.accelerators[0]
        cores = accelerator.cores_per_device or 1
        return accelerator.count * cores // LOGICAL_NEURON_CORE_SIZE.get(accelerator.model, 1)

    @property
    def ip_interfaces(self) -> int:
        """Interfaces per node that take a VPC IP address (1 with the efa-only layout)."""
        return sum(i.carries_ip for i in self.layout)


def plan_training(spec: TrainingSpec, region: str, stack: str, now: datetime, dry_run: bool) -> TrainingPlan:
    """The plan for `spec`, or InputError with every finding (each names the field and the fix)."""
    expires_at, provisional = checked_expiry(training_findings(spec, region), spec, now, dry_run)
    itype = instance_type(spec.instance_type)
    fs = spec.lustre
    intent = lustre.FsxIntent(
        dataset_gib=fs.dataset_gib,
        checkpoint_gib=fs.checkpoint_gib,
        checkpoint_write_seconds=fs.checkpoint_write_seconds,
        read_throughput_gbps=fs.read_throughput_gbps,
        deployment_type=fs.deployment_type,
    )
    image = node_image(itype)
    availability_zone = chosen_az(spec, region)
    assert availability_zone is not None, "the meaning checks refuse a region with no AZ for the type"
    backend: Literal["nccl", "xla"] = "xla" if itype.accelerator_kind == "neuron" else "nccl"
    return TrainingPlan(
        run_id=spec.run_id,
        region=region,
        availability_zone=availability_zone,
        itype=itype,
        node_count=spec.node_count,
        layout=efa_layout(itype),
        capacity_mode=spec.capacity.mode,
        reservation_id=spec.capacity.reservation_id,
        image=image,
        torchrun=spec.job.torchrun_path or image.torchrun,
        lustre=lustre.size_lustre_pinned(intent, fs.storage_capacity_gib, fs.per_unit_storage_throughput),
        expires_at=expires_at,
        expires_at_provisional=provisional,
        lifecycle=spec.lifecycle,
        tags=contract_tags("training", stack, run_id=spec.run_id, expires_at=expires_at),
        generation=launch_generation(itype.name, spec.node_count, availability_zone, spec.capacity.mode),
        fabric_gate=plan_fabric_gate("aws", itype.name, spec.node_count, backend, spec.job.fabric_gate.skip),
    )
