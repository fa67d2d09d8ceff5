"""Accelerator node pools carry their device taint (nvidia.com/gpu, aws.amazon.com/neuron), so only pods
that request the device land on the expensive nodes."""

from __future__ import annotations

from infra.catalog.aws import instance_type
from infra.core.shapes import dict_at
from policies.model import Resource, ResourceRule
from policies.readers.aws import EKS_NODE_GROUP, KARPENTER_NODE_POOL, as_list, instance_types
from policies.readers.gcp import GKE_NODE_POOL, node_config

NAME = "accelerator-node-pools-tainted"
TAINT_KEYS = {"gpu": "nvidia.com/gpu", "neuron": "aws.amazon.com/neuron"}
_NO_SCHEDULE = ("NO_SCHEDULE", "NoSchedule")


def check(resource: Resource) -> list[str]:
    if resource.type == GKE_NODE_POOL:
        return _gke(resource)
    kinds = set()
    for name in instance_types(resource):
        try:
            kind = instance_type(name).accelerator_kind
        except LookupError:
            continue
        if kind:
            kinds.add(kind)
    taints = {(t.get("key"), t.get("effect")) for t in _taints(resource) if isinstance(t, dict)}
    effect = "NO_SCHEDULE" if resource.type == EKS_NODE_GROUP else "NoSchedule"
    return [
        f"accelerator pool has no {TAINT_KEYS[k]} taint with effect {effect}; add it so only pods requesting "
        f"{TAINT_KEYS[k]} are scheduled here"
        for k in sorted(kinds)
        if not any(key == TAINT_KEYS[k] and e in _NO_SCHEDULE for key, e in taints)
    ]


def _taints(resource: Resource) -> list:
    if resource.type == EKS_NODE_GROUP:
        return as_list(resource.get("taints"))
    spec = dict_at(resource.get("spec"))
    return as_list(((spec.get("template") or {}).get("spec") or {}).get("taints"))


def _gke(resource: Resource) -> list[str]:
    """A GKE pool with guest accelerators (all NVIDIA on GKE) wants the nvidia.com/gpu NO_SCHEDULE taint."""
    config = node_config(resource)
    if not isinstance(config, dict) or not as_list(config.get("guestAccelerators")):
        return []
    if any(
        isinstance(t, dict) and t.get("key") == TAINT_KEYS["gpu"] and t.get("effect") in _NO_SCHEDULE
        for t in as_list(config.get("taints"))
    ):
        return []
    return [
        f"accelerator pool has no {TAINT_KEYS['gpu']} taint with effect NO_SCHEDULE in nodeConfig.taints; add it "
        f"so only pods requesting {TAINT_KEYS['gpu']} are scheduled here"
    ]


RULE = ResourceRule(
    NAME,
    "GPU and Neuron node pools carry their device taint.",
    "advisory",
    (EKS_NODE_GROUP, KARPENTER_NODE_POOL, GKE_NODE_POOL),
    check,
)
