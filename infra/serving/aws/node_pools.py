"""Node pool plans for EKS managed node groups: taints, labels, AMI type, capacity and bounds (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from infra.serving.aws.config import G5PoolSpec, Inf2PoolSpec
from infra.serving.scheduling import ACCELERATOR_LABEL, POOL_LABEL, Family, Taint, taint

# The EKS node group API spells taint effects NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE.
EKS_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}
# EKS-optimised Amazon Linux 2023 images with the accelerator's drivers and runtime.
AMI_TYPE = {"inf2": "AL2023_x86_64_NEURON", "g5": "AL2023_x86_64_NVIDIA", "system": "AL2023_x86_64_STANDARD"}

# Add-ons (CoreDNS, KEDA, Prometheus, the autoscaler, the Neuron scheduler) need untainted nodes; two
# sizes of a general-purpose family, fixed here because the instance catalog holds accelerator types only.
SYSTEM_INSTANCE_TYPES = ("m6i.large", "m6i.xlarge")


@dataclass(frozen=True)
class NodePoolPlan:
    family: Family
    instance_types: tuple[str, ...]
    capacity_type: Literal["ON_DEMAND", "SPOT"]
    ami_type: str
    min_size: int
    max_size: int
    disk_gib: int
    labels: dict[str, str]
    taints: tuple[Taint, ...]

    @property
    def desired_size(self) -> int:
        # The initial size only: the cluster autoscaler owns it afterwards (the component ignores changes).
        return self.min_size


def accelerator_plan(family: Literal["inf2", "g5"], spec: Inf2PoolSpec | G5PoolSpec) -> NodePoolPlan:
    labels: dict[str, str] = {ACCELERATOR_LABEL: family, POOL_LABEL: family}
    if family == "g5":
        # The NVIDIA device plugin chart schedules on nodes carrying this label when no node feature
        # discovery runs (its documented way to force GPU nodes).
        labels["nvidia.com/gpu.present"] = "true"
    return NodePoolPlan(
        family=family,
        instance_types=tuple(spec.instance_types),
        capacity_type="SPOT" if spec.capacity_type == "spot" else "ON_DEMAND",
        ami_type=AMI_TYPE[family],
        min_size=spec.min_size,
        max_size=spec.max_size,
        disk_gib=spec.disk_gib,
        labels=labels,
        taints=(taint(family),),
    )


def system_plan() -> NodePoolPlan:
    return NodePoolPlan(
        family="system",
        instance_types=SYSTEM_INSTANCE_TYPES,
        capacity_type="ON_DEMAND",
        ami_type=AMI_TYPE["system"],
        min_size=2,  # CoreDNS and the autoscaler keep running through one node's loss
        max_size=4,
        disk_gib=80,
        labels={POOL_LABEL: "system"},
        taints=(),
    )


def launch_template_metadata() -> dict[str, Any]:
    """IMDSv2 only, one hop: pods get AWS credentials from EKS Pod Identity, never the node's role."""
    return {
        "http_endpoint": "enabled",
        "http_tokens": "required",
        "http_put_response_hop_limit": 1,
        "instance_metadata_tags": "disabled",
    }
