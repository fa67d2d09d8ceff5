"""Every decision of a training stack, made from its config and the catalog (pure, no pulumi).

The components only wire what this plan says; tests check the decisions here without mocks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Literal, Optional

from infra.training.aws import lustre
from infra.catalog.aws import InstanceType, instance_type
from infra.training.aws.config import EXPIRES_AT_FORMAT, LifecycleSpec, TrainingSpec
from infra.training.aws.checks import EXPIRES_AT_KEY, chosen_az, training_findings
from infra.training.aws.efa import Interface, bandwidth_fraction, efa_device_count, efa_layout
from infra.core.errors import InputError, Problem
from infra.training.aws.images import NodeImage, node_image
from infra.registry.layout import ROOTS, checkpoints_prefix, runs_prefix
from infra.core.tags import contract_tags

# Physical NeuronCores grouped into one logical core by default: Trainium2 runs with LNC=2 (Neuron docs,
# "Logical NeuronCore configuration"), so a trn2.48xlarge has 64 usable cores for 128 physical ones.
LOGICAL_NEURON_CORE_SIZE = {"Trainium2": 2}


class RunLifetime:
    """What every training plan derives from its run id, expires-at and lifecycle (AWS and GCP)."""
    run_id: str
    expires_at: str
    lifecycle: LifecycleSpec

    @property
    def expires_at_epoch(self) -> int:
        return int(datetime.strptime(self.expires_at, EXPIRES_AT_FORMAT).replace(tzinfo=timezone.utc).timestamp())

    @property
    def stop_at_epoch(self) -> int:
        """When the nodes ask the job to stop: the grace period before expires-at (Unix time)."""
        return self.expires_at_epoch - 60 * self.lifecycle.grace_period_minutes

    @property
    def prefixes(self) -> dict[str, str]:
        """Registry prefixes of this run."""
        return {"datasets": ROOTS["datasets"], "checkpoints": checkpoints_prefix(self.run_id), "runs": runs_prefix(self.run_id)}


@dataclass(frozen=True)
class TrainingPlan(RunLifetime):
    run_id: str
    region: str
    availability_zone: str
    itype: InstanceType
    node_count: int
    layout: tuple[Interface, ...]
    capacity_mode: Literal["on-demand", "capacity-block", "odcr"]
    reservation_id: Optional[str]
    image: NodeImage
    torchrun: str
    lustre: lustre.LustrePlan
    expires_at: str
    expires_at_provisional: bool
    lifecycle: LifecycleSpec
    tags: dict[str, str]

    @property
    def placement_strategy(self) -> Optional[str]:
        """`cluster` for on-demand; none with a reservation, whose capacity is placed already
        (a Capacity Block forbids a placement group of your own; an ODCR that should be packed is
        created in a cluster placement group by whoever reserves it)."""
        return "cluster" if self.capacity_mode == "on-demand" else None

    @property
    def market_type(self) -> Optional[str]:
        return "capacity-block" if self.capacity_mode == "capacity-block" else None

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
    def accelerator_kind(self) -> str:
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
    intent = lustre.LustreIntent(
        dataset_gib=fs.dataset_gib,
        checkpoint_gib=fs.checkpoint_gib,
        checkpoint_write_seconds=fs.checkpoint_write_seconds,
        read_throughput_gbps=fs.read_throughput_gbps,
        deployment_type=fs.deployment_type,
    )
    image = node_image(itype)
    return TrainingPlan(
        run_id=spec.run_id,
        region=region,
        availability_zone=chosen_az(spec, region),
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
    )


def checked_expiry(findings: list[Problem], spec: TrainingSpec, now: datetime, dry_run: bool) -> tuple[str, bool]:
    """(expires-at, provisional?) once neither the meaning checks' `findings` nor the expiry has a
    problem; otherwise InputError with all of them, so every plan reports everything at once."""
    expires_at, provisional, problem = run_expiry(spec.lifecycle, now, dry_run)
    if problem:
        findings = [*findings, problem]
    if findings:
        raise InputError(findings)
    return expires_at, provisional


def run_expiry(lifecycle: LifecycleSpec, now: datetime, dry_run: bool) -> tuple[str, bool, Optional[Problem]]:
    """(expires-at, provisional?, problem). A preview without a fixed expiry shows now + ttlHours,
    rounded up to the minute; `pulumi up` needs it fixed in config so updates never move it."""
    fixed = lifecycle.expires_at
    if fixed:
        try:
            at = datetime.strptime(fixed, EXPIRES_AT_FORMAT).replace(tzinfo=timezone.utc)
        except ValueError:
            return fixed, False, Problem(EXPIRES_AT_KEY, f"{fixed!r} is not a real UTC time (YYYY-MM-DDTHH:MM:SSZ)")
        if not dry_run and at <= now:
            return fixed, False, Problem(
                EXPIRES_AT_KEY,
                f"{fixed} has passed: this run's lifetime is over; tear it down (`python -m infra teardown --stack "
                "<stack>`), or start a new run with a new runId and no expiresAt")
        return fixed, False, None
    at = now.astimezone(timezone.utc) + timedelta(hours=lifecycle.ttl_hours)
    at = datetime.fromtimestamp(math.ceil(at.timestamp() / 60) * 60, tz=timezone.utc)
    text = at.strftime(EXPIRES_AT_FORMAT)
    if dry_run:
        return text, True, None
    return text, False, Problem(
        EXPIRES_AT_KEY,
        "required for `pulumi up`, so the run's expiry is fixed once: start it with `python -m infra run`, or "
        f"`pulumi config set --path mlinfra:training.lifecycle.expiresAt {text}`",
    )
