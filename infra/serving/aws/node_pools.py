"""Node pool plans for EKS managed node groups: one group per instance type, with taints, labels, AMI type,
capacity, bounds and the cluster autoscaler's node template (pure).

One shape per group because the cluster autoscaler models a group by one instance type (it takes the first
of a mixed group's list) and EKS launches a mixed group's types in list order: a pod that fits only the
larger size would wait for ever on a group the autoscaler believes too small, or get the smaller size. With
one group per shape the autoscaler's expander chooses among the groups whose shape holds the pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from infra.catalog.aws import instance_type
from infra.serving.aws.allocatable import Resources, holds, replica
from infra.serving.aws.config import NodePoolSpec
from infra.serving.charts import GPU_PRESENT_LABEL
from infra.serving.families import AMI_NVIDIA, FAMILIES
from infra.serving.scheduling import ACCELERATOR_LABEL, FALLBACK_LABEL, POOL_LABEL, Taint, taint
from infra.serving.servers import PROFILES
from infra.serving.spec import ModelSpec

# The EKS node group API spells taint effects NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE.
EKS_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}
# EKS-optimised Amazon Linux 2023 images with the accelerator's drivers and runtime.
AMI_TYPE = {
    **{name: f.ami_type or AMI_NVIDIA for name, f in FAMILIES.items() if f.cloud == "aws"},
    "system": "AL2023_x86_64_STANDARD",
}
# The label the cluster autoscaler's AWS provider reads to know a node has GPUs (cloudprovider/aws
# GPULabel): without it on the group's template, a GPU pod never triggers a scale-up from zero.
AWS_GPU_LABEL = "k8s.amazonaws.com/accelerator"
GPU_LABEL_VALUE = {name: f.gpu_label for name, f in FAMILIES.items() if f.gpu_label}
# Node-template tags on the Auto Scaling group: what a node of an empty group would offer, for the
# autoscaler's scale-from-zero simulation (cluster-autoscaler/cloudprovider/aws/README.md, "Scaling a node
# group to 0"). EKS managed node groups do not put their labels' and taints' tags on the group for us.
TEMPLATE_PREFIX = "k8s.io/cluster-autoscaler/node-template"
NODE_GROUP_SUFFIX = "-nodes"  # the EKS node group resource of a plan is named <plan name>-nodes

# Add-ons (CoreDNS, KEDA, Prometheus, the autoscaler, the Neuron scheduler) need untainted nodes; two
# sizes of a general-purpose family, fixed here because the instance catalog holds accelerator types only.
SYSTEM_INSTANCE_TYPES = ("m6i.large", "m6i.xlarge")


@dataclass(frozen=True)
class NodePoolPlan:
    family: str  # a serving family (infra/serving/families.py) or "system"
    instance_type: str
    capacity_type: Literal["ON_DEMAND", "SPOT"]
    ami_type: str
    min_size: int
    max_size: int
    disk_gib: int
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    devices: int  # accelerators of one node (the group's template resource)

    baseline: bool = False  # the on-demand baseline of a Spot pool
    fallback: bool = False  # an on-demand group behind a Spot pool's group of the same type

    @property
    def name(self) -> str:
        """pool-<family>-<size>, e.g. pool-inf2-8xlarge (the type's family is the pool's); a Spot pool's
        on-demand baseline adds -on-demand, its on-demand fallback -fallback."""
        suffix = "-on-demand" if self.baseline else "-fallback" if self.fallback else ""
        return f"pool-{self.family}-{self.instance_type.split('.', 1)[1]}{suffix}"

    @property
    def autoscaling_group_pattern(self) -> str:
        """A regular expression matching this group's Auto Scaling group name, as the cluster autoscaler's AWS
        provider names the node group (ASG name): EKS names it eks-<node group name>-<uuid>, and Pulumi names the
        node group <resource name>-<random suffix>, the resource being <plan name>-nodes. Plan names are letters,
        digits and hyphens: nothing to escape for Go's regexp."""
        return f"^eks-{self.name}{NODE_GROUP_SUFFIX}-"

    @property
    def desired_size(self) -> int:
        # The initial size only: the cluster autoscaler owns it afterwards (the component ignores changes).
        return self.min_size

    def template_tags(self) -> dict[str, str]:
        """The Auto Scaling group tags that tell the cluster autoscaler what an empty group's nodes offer."""
        tags = {f"{TEMPLATE_PREFIX}/label/{key}": value for key, value in self.labels.items()}
        tags.update({f"{TEMPLATE_PREFIX}/taint/{t.key}": f"{t.value}:{t.effect}" for t in self.taints})
        if self.family in PROFILES:
            tags[f"{TEMPLATE_PREFIX}/resources/{PROFILES[self.family].resource}"] = str(self.devices)
        return tags


def replicas_of(models: Sequence[ModelSpec], family: str) -> list[Resources]:
    """What one replica of each model the pool serves asks of a node."""
    return [replica(m) for m in models if m.accelerator == family]


def holding_types(model: ModelSpec, pool: NodePoolSpec) -> dict[str, float | None]:
    """The pool's types a replica of `model` fits, with their network bandwidth (Gbps): its start-up budget's."""
    need = replica(model)
    return {t: instance_type(t).total_bandwidth_gbps for t in pool.instance_types if holds(t, need)}


def minimum_type(instance_types: Sequence[str], replicas: Sequence[Resources]) -> str:
    """The type that keeps the pool's minimum: the first (in the pool's order, smallest first) that holds a replica
    of every model the pool serves; the first type when none does (the config check refuses that) or none is
    given. A minimum on a type too small for its models would run idle: their replicas need another node."""
    able = [t for t in instance_types if all(holds(t, need) for need in replicas)]
    return (able or list(instance_types))[0]


def accelerator_plans(family: str, spec: NodePoolSpec, replicas: Sequence[Resources] = ()) -> list[NodePoolPlan]:
    """One group per instance type of the pool. The pool's minSize (and a Spot pool's on-demand baseline) is kept
    on minimum_type of the model servers' `replicas`; maxSize bounds each type's group (the autoscaler scales the
    groups whose shape holds the waiting pods)."""
    kept = minimum_type(spec.instance_types, replicas)
    labels: dict[str, str] = {ACCELERATOR_LABEL: family, POOL_LABEL: family}
    if not FAMILIES[family].neuron:
        # The NVIDIA device plugin chart schedules on nodes carrying this label when no node feature
        # discovery runs (its documented way to force GPU nodes); charts.nvidia_values selects it.
        labels[GPU_PRESENT_LABEL] = "true"
        labels[AWS_GPU_LABEL] = GPU_LABEL_VALUE[family]
    spot = getattr(spec, "capacity_type", "on-demand") == "spot"
    plans = [
        NodePoolPlan(
            family=family,
            instance_type=name,
            capacity_type="SPOT" if spot else "ON_DEMAND",
            ami_type=AMI_TYPE[family],
            min_size=spec.min_size if name == kept else 0,
            max_size=spec.max_size,
            disk_gib=spec.disk_gib,
            labels=labels,
            taints=(taint(family),),
            devices=instance_type(name).accelerator_count,
        )
        for name in spec.instance_types
    ]
    base = getattr(spec, "on_demand_base", 0)
    if spot and base:
        # Kept running on demand: with replicas spread over capacity types, a reclaim leaves one serving.
        first = next(plan for plan in plans if plan.instance_type == kept)
        plans.append(replace(first, capacity_type="ON_DEMAND", min_size=base, max_size=base, baseline=True))
    if spot and getattr(spec, "on_demand_fallback", False):
        # Empty until the Spot group of its type cannot launch: the priority expander (expander_priorities) tries
        # the Spot groups first.
        spot_groups = [plan for plan in plans if plan.capacity_type == "SPOT"]
        plans += [
            replace(
                plan,
                capacity_type="ON_DEMAND",
                min_size=0,
                fallback=True,
                labels={**plan.labels, FALLBACK_LABEL: "true"},
            )
            for plan in spot_groups
        ]
    return plans


SPOT_PRIORITY, DEFAULT_PRIORITY = 20, 10


def expander_priorities(plans: Sequence[NodePoolPlan]) -> dict[int, list[str]]:
    """The cluster autoscaler's priority expander: Spot groups first, every other group (system, on-demand pools,
    the fallbacks behind Spot) after; least-waste chooses within a priority. Empty without Spot groups."""
    spot = [plan.autoscaling_group_pattern for plan in plans if plan.capacity_type == "SPOT"]
    return {DEFAULT_PRIORITY: [".*"], SPOT_PRIORITY: spot} if spot else {}


def system_plans() -> list[NodePoolPlan]:
    return [
        NodePoolPlan(
            family="system",
            instance_type=name,
            capacity_type="ON_DEMAND",
            ami_type=AMI_TYPE["system"],
            min_size=2 if index == 0 else 0,  # CoreDNS and the autoscaler keep running through one node's loss
            max_size=4,
            disk_gib=80,
            labels={POOL_LABEL: "system"},
            taints=(),
            devices=0,
        )
        for index, name in enumerate(SYSTEM_INSTANCE_TYPES)
    ]


def launch_template_metadata() -> dict[str, Any]:
    """IMDSv2 only, one hop: pods get AWS credentials from EKS Pod Identity, never the node's role."""
    return {
        "http_endpoint": "enabled",
        "http_tokens": "required",
        "http_put_response_hop_limit": 1,
        "instance_metadata_tags": "disabled",
    }
